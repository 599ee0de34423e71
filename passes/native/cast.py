"""tpu.Cast, after TPU-MLIR's `Interfaces/BM1684X/Cast.cpp`.

Float <-> float (and plain integer <-> integer) goes through
`backend_api_cast_global` with `cast_global_spec_t`; float -> quantized
(quantize) through the old-style `backend_api_requant_float_global`
(`requant_fp_param_t`), quantized -> float (dequantize) through
`backend_api_dequant_float_global` (`dequant_fp_param_t`), both with the
addresses inside the struct and the tensor viewed as getNCHW's n, c, h, w.
"""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import (
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    is_float,
    quant_of,
)
from tpuc.passes.native.conv import round_mode
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import declare

declare("cast_common_spec_t", "i32 src_dtype; i32 dst_dtype; i32 round_mode")
CastGlobal = declare("cast_global_spec_t", "cast_common_spec_t common")
CastLocal = declare("cast_local_spec_t", "cast_common_spec_t common; u32 buffer_addr")
RequantFp = declare(
    "requant_fp_param_t",
    "u64 input_addr; u64 output_addr; u64 requant_addr; u32 buffer_local_addr; i32 n; i32 c; "
    "i32 h; i32 w; bool is_perchannel; f32 scale_value; f32 offset_value; i32 input_dtype; "
    "i32 output_dtype; i32 mode; i32 round_mode; i32 src_round_mode",
)
DequantFp = declare(
    "dequant_fp_param_t",
    "u64 input_addr; u64 output_addr; u64 dequant_addr; u64 buffer_addr; i32 n; i32 c; i32 h; "
    "i32 w; bool is_perchannel; bool has_buffer; f32 scale_value; i32 offset_value; "
    "i32 input_dtype; i32 output_dtype; i32 round_mode; u32 margins",
)


CAST_ROUND_MODES = ("HalfToEven", "HalfAwayFromZero", "TowardsZero", "Up", "Down")
"""The round modes of the chip's cast kernel (`tpu_bdc_cast` asserts on others)."""


def nchw(value: SSAValue, left_align: bool = True) -> tuple[int, int, int, int]:
    """TPU-MLIR's module::getNCHW: n, c, h from the front and w the rest
    (left-aligned), or w, h, c from the back and n the rest."""
    shape = list(shape_of(value) or ())
    if left_align:
        shape = (shape + [1, 1, 1, 1])[:3] + [math.prod(shape[3:])]
        return tuple(shape)  # type: ignore[return-value]
    padded = [1, 1, 1] + shape
    return (math.prod(padded[:-3]), padded[-3], padded[-2], padded[-1])


def _scaled(op: Operation, ctx: NativeContext, p, scale, offset, function: str) -> NativeCall:
    """`p` (requant_fp_param_t or dequant_fp_param_t) over the op's input and
    output with scale_value = `scale`, offset_value = `offset`."""
    src, dst = op.operands[0], op.results[0]
    p.input_addr, p.output_addr = ctx.address(src), ctx.address(dst)
    p.n, p.c, p.h, p.w = nchw(src)
    p.scale_value, p.offset_value = scale, offset
    p.input_dtype, p.output_dtype = dtype_code(src), dtype_code(dst)
    p.round_mode = round_mode(op)
    return NativeCall(function, p.to_bytes(), plain=True)


def quantize_scale(op: Operation) -> tuple[float, float]:
    """requant_fp_param_t's (scale_value, offset_value) of a quantizing
    Cast: 1/S_out and Z_out (the global and the local rule)."""
    q = quant_of(op.results[0])
    return 1.0 / q.scale, float(q.zero_point)


def _quantize(op: Operation, ctx: NativeContext) -> NativeCall:
    """requant_fp_param_t: scale_value = 1/S_out, offset_value = Z_out, mode 0."""
    scale, offset = quantize_scale(op)
    return _scaled(op, ctx, RequantFp(), scale, offset, "backend_api_requant_float_global")


def _dequantize(op: Operation, ctx: NativeContext) -> NativeCall:
    """dequant_fp_param_t: scale_value = S_in, offset_value = Z_in."""
    q = quant_of(op.operands[0])
    return _scaled(op, ctx, DequantFp(), q.scale, q.zero_point, "backend_api_dequant_float_global")


@native_rule(tpu.CastOp)
def cast(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Quantize, dequantize, or cast_global_spec_t {src_dtype, dst_dtype, round_mode};
    nothing when a long-row softmax's layer group casts (softmax.absorbed_cast)."""
    from tpuc.passes.native.softmax import absorbs

    if absorbs(op):
        return []
    src, dst = op.operands[0], op.results[0]
    if op.value("to"):
        raise NotExpressible(f"a cast through {op.value('to')}")
    qin, qout = quant_of(src), quant_of(dst)
    if qin is None and qout is not None and is_float(src):
        return [_quantize(op, ctx)]
    if qin is not None and qout is None and is_float(dst):
        return [_dequantize(op, ctx)]
    if qin is not None or qout is not None:
        raise NotExpressible("a cast between quantized types")
    mode = op.value("round_mode") or "HalfAwayFromZero"
    if mode not in CAST_ROUND_MODES:  # the backend asserts (tpu_bdc_cast)
        raise NotExpressible(
            f"round_mode {mode} (the chip's cast takes {', '.join(CAST_ROUND_MODES)})"
        )
    spec = CastGlobal()
    spec.common.src_dtype, spec.common.dst_dtype = dtype_code(src), dtype_code(dst)
    spec.common.round_mode = round_mode(op)
    return [ctx.call("backend_api_cast_global", spec, op)]
