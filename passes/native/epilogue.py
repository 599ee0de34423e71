"""tpuc's float epilogue on the chip: an INT8 convolution or matmul whose
result only float layers read hands them its accumulator dequantized
(`tpuc.kernels.requant.chip_float_epilogue`). The chip has no single op for
that; the native target writes the sequence whose result tpuc's kernels
define, all in the result's own buffer (int32 and f32 are both 4 bytes):

1. the convolution (or the 1x1 convolution an FC is) with an int32 result:
   the accumulator plus the int32 bias (`merge_coeff = 1`, conv.py);
2. `backend_api_cast_global` int32 -> f32, in place (exact below 2^24,
   else rounded half to even);
3. `backend_api_bcbinary_global` MUL by the per-channel f32 scale
   f32(M·2^−r) (a [1, C, 1, 1] coefficient), in place, with the fused ReLU
   (and its limit) on the product.

Only an f32 result: an f16/bf16 one would need a 4-byte scratch buffer the
activation plan does not hold.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import (
    DTYPE_F32,
    DTYPE_I32,
    ROUND_HALF_EVEN,
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_name,
)
from tpuc.passes.native.conv import coeff_table, int8_calls, raw_spec
from tpuc.target.vendor.params import DECLARED, BcBinaryGlobal, declare

BINARY_MUL = 2


def _cast_param():
    if "cast_global_spec_t" not in DECLARED:  # also declared by cast.py
        declare("cast_common_spec_t", "i32 src_dtype; i32 dst_dtype; i32 round_mode")
        declare("cast_global_spec_t", "cast_common_spec_t common")
    return DECLARED["cast_global_spec_t"]()


def check_f32(op: Operation) -> None:
    if dtype_name(op.results[0]) != "f32":
        raise NotExpressible(
            f"an INT8 float epilogue to {dtype_name(op.results[0])} (needs a 4-byte scratch buffer)"
        )


def channel_scales(table: np.ndarray) -> np.ndarray:
    """f32(M·2^−r) per channel, from coeff_table's [bias, M, r] rows."""
    return np.ldexp(table[:, 1].astype(np.float64), -table[:, 2].astype(np.int64)).astype(
        np.float32
    )


def epilogue_calls(op: Operation, ctx: NativeContext, shape: tuple[int, int, int, int],
                   scales: np.ndarray, axis: int = 1) -> list[NativeCall]:  # fmt: skip
    """Steps 2 and 3 on the int32 accumulator at op's result address, viewed
    as `shape` [N, C, H, W] with `scales` along `axis` (1: [1, C, 1, 1];
    3: [1, 1, 1, W], the backend broadcasting it over the lanes)."""
    addr = ctx.address(op.results[0])
    cast = _cast_param()
    cast.common.src_dtype, cast.common.dst_dtype = DTYPE_I32, DTYPE_F32
    cast.common.round_mode = ROUND_HALF_EVEN
    as_f32 = raw_spec(addr, DTYPE_F32, shape)
    calls = [ctx.call("backend_api_cast_global", cast, op, [raw_spec(addr, DTYPE_I32, shape)],
                      [as_f32])]  # fmt: skip
    mul = BcBinaryGlobal()
    s = mul.spec
    s.binary_type = BINARY_MUL
    relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit")
    s.if_relu = int(relu)
    s.relu_upper_limit = float(limit) if relu and limit is not None and limit >= 0 else -1.0
    s.scale_A = s.scale_B = 1
    s.f8_scale_A = s.f8_scale_B = 1.0
    scale_addr = ctx.coeffs.add(f"{op.names[0]}_epilogue_scale", scales.astype(np.float32))
    coeff_dims = [1, 1, 1, 1]
    coeff_dims[axis] = shape[axis]
    coeff = raw_spec(scale_addr, DTYPE_F32, tuple(coeff_dims))
    calls.append(ctx.call("backend_api_bcbinary_global", mul, op, [as_f32, coeff], [as_f32]))
    return calls


def conv_float_epilogue(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """tpu.Conv2D, quantized input, f32 result."""
    check_f32(op)
    n, oc, oh, ow = shape_of(op.results[0])
    table = coeff_table(op, oc)
    return [*int8_calls(op, ctx, int32=True),
            *epilogue_calls(op, ctx, (n, oc, oh, ow), channel_scales(table))]  # fmt: skip


__all__ = ["channel_scales", "check_f32", "conv_float_epilogue", "epilogue_calls"]
