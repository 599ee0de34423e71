"""INT8 lookup tables: every elementwise unary op becomes tpu.Lut.

An 8-bit input takes 256 values only, so any function of one value is
exact up to the output's rounding: for each stored q the table holds
quantize(f(S_in·(q − Z_in))) in the output's storage, where f is the TOP
float kernel of that very op (the float interpreter's semantics, fused ReLU
and attributes included). PRelu with a per-channel slope gets one table per
channel.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation

from tpuc.base.numerics import (
    dequantize,
    multiply_by_quantized_multiplier,
    quantize,
    quantize_multiplier,
)
from tpuc.dialects import top, tpu
from tpuc.ir.qparams import QuantParams
from tpuc.passes.canonicalize.common import is_requant_point
from tpuc.passes.lowering.context import Lowering
from tpuc.passes.lowering.int8_eltwise import read_int8
from tpuc.passes.lowering.registry import lowering

LUT_OPS = top.ELEMENTWISE_UNARY


def input_values(quant: QuantParams) -> np.ndarray:
    """The real value of every stored integer qmin..qmax, in table order."""
    q = np.arange(quant.qmin, quant.qmax + 1, dtype=np.float32)
    return dequantize(q, quant.scale, quant.zero_point)


def storage_dtype(quant: QuantParams) -> type:
    return np.int8 if quant.signed else np.uint8


def quantize_table(y: np.ndarray, out: QuantParams) -> np.ndarray:
    """Real outputs -> the output's stored integers. Out-of-domain inputs
    (log/sqrt of negatives: NaN) map to real 0; ±inf saturate."""
    y = np.asarray(y, np.float32)
    y = np.where(np.isnan(y), np.float32(0.0), y)
    q = quantize(y, out.scale, out.zero_point, out.qmin, out.qmax)
    return q.astype(storage_dtype(out))


def float_kernel(op: Operation, args: list[np.ndarray]) -> np.ndarray:
    """The TOP interpreter's kernel of `op` applied to `args`."""
    from tpuc.interp.top_ops import KERNELS

    with np.errstate(all="ignore"):
        return np.asarray(KERNELS[type(op)](op, args), np.float32)


def build_lut(lw: Lowering, table: np.ndarray, value) -> Operation:
    out = lw.out_quant()
    weight = lw.add_weight("table", table, out.element_type())
    return lw.build(tpu.LutOp, [value, weight], copy_attributes=False)


def requant_table(inp: QuantParams, out: QuantParams) -> np.ndarray:
    """A pre-quantized model's QUANTIZE (int8 to int8 at another scale) as
    TFLite's Requantize computes it: MultiplyByQuantizedMultiplier(q − Z_in,
    S_in/S_out) + Z_out, saturated."""
    multiplier, shift = quantize_multiplier(inp.scale / out.scale)
    q = np.arange(inp.qmin, inp.qmax + 1, dtype=np.int64) - inp.zero_point
    y = multiply_by_quantized_multiplier(q, multiplier, shift) + out.zero_point
    return np.clip(y, out.qmin, out.qmax).astype(storage_dtype(out))


def lower_lut(lw: Lowering):
    """table[q − qmin_in] = quantize(f(S_in·(q − Z_in)), S_out, Z_out)."""
    value, quant = read_int8(lw, 0)
    if is_requant_point(lw.op):
        return build_lut(lw, requant_table(quant, lw.out_quant()), value)
    y = float_kernel(lw.op, [input_values(quant)])
    return build_lut(lw, quantize_table(y, lw.out_quant()), value)


# --- PRelu ---------------------------------------------------------------------------------


def channel_slope(op: top.PReluOp) -> bool:
    """A weight slope that is one value, or one per channel (axis 1)."""
    slope, x = op.operands[1], op.operands[0]
    if not isinstance(slope.owner, top.WeightOp):
        return False
    if not isinstance(slope.type, TensorType) or not isinstance(x.type, TensorType):
        return False
    shape, x_shape = tuple(slope.type.get_shape()), tuple(x.type.get_shape())
    if len(shape) > len(x_shape):
        return False
    if all(d == 1 for d in shape):
        return True
    if len(x_shape) < 2:
        return False
    full = (1,) * (len(x_shape) - len(shape)) + shape
    return full[1] == x_shape[1] and all(d == 1 for i, d in enumerate(full) if i != 1)


@lowering(top.PReluOp, modes=("INT8",), when=channel_slope)
def lower_prelu(lw: Lowering):
    """One table per channel ([C, 256]); a single slope gives one table."""
    value, quant = read_int8(lw, 0)
    slope = lw.weight(1).reshape(-1)
    x = input_values(quant)
    if slope.size == 1:
        y = float_kernel(lw.op, [x, slope.reshape(())])
    else:
        y = float_kernel(lw.op, [x[None, :], slope[:, None]])
    return build_lut(lw, quantize_table(y, lw.out_quant()), value)
