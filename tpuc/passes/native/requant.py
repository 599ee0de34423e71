"""RequantInt / RequantIntAxis, after TPU-MLIR's
`Interfaces/BM1684X/{RequantInt,RequantIntAxis}.cpp`: the old-style
`backend_api_requant_int_global(requant_int_param_t*, sizeof)` with the
addresses in the struct and the tensor as getNCHW's n, c, h, w.

tpuc's requant(q − Z_in, M, r) + Z_out is the library's MultiplierShift
mode (2) with mul_value = M, shift_value = −r, zx_value = Z_in and
offset_value = Z_out; per channel, a coefficient [C][3] of int32
[M, −r, Z_out] (TPU-MLIR's quant weight, (1, C, 1, 1, 3)). tpuc's DequantInt
has a float result, which the library's dequant_int (integer results) does
not write.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.passes.native.cast import nchw, round_mode
from tpuc.passes.native.context import (
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    is_float,
    quant_of,
)
from tpuc.passes.native.rules import native_rule
from tpuc.vendor.params import declare

RequantIntParam = declare(
    "requant_int_param_t",
    "u64 input_addr; u64 output_addr; u64 requant_addr; u32 buffer_local_addr; i32 n; i32 c; "
    "i32 h; i32 w; bool is_perchannel; i32 mul_value; i32 shift_value; i32 offset_value; "
    "i32 input_dtype; i32 output_dtype; i32 mode; i32 reshaped_coeff; i32 zx_value; "
    "i32 round_mode",
)
MULTIPLIER_SHIFT = 2  # tpu::RequantMode::MultiplierShift


def requant_int_call(
    ctx: NativeContext,
    addrs: tuple[int, int],
    dims: Sequence[int],
    dtypes: tuple[int, int],
    multiplier: Sequence[int],
    rshift: Sequence[int],
    zero_points: tuple[int, int],
    rounding: int,
) -> NativeCall:
    """One requant_int_param_t call: `dims` (n, c, h, w), one (M, r) or one per c."""
    p = RequantIntParam()
    p.input_addr, p.output_addr = addrs
    p.n, p.c, p.h, p.w = dims
    p.input_dtype, p.output_dtype = dtypes
    p.zx_value, p.offset_value = zero_points
    p.mode, p.round_mode = MULTIPLIER_SHIFT, rounding
    if len(multiplier) == 1 and len(rshift) == 1:
        p.mul_value, p.shift_value = multiplier[0], -rshift[0]
    else:
        c = dims[1]
        table = np.zeros((c, 3), np.int32)
        table[:, 0] = np.broadcast_to(np.asarray(multiplier, np.int64), (c,))
        table[:, 1] = -np.broadcast_to(np.asarray(rshift, np.int64), (c,))
        table[:, 2] = zero_points[1]
        p.is_perchannel = True
        p.requant_addr = ctx.coeffs.add("requant", table)
    return NativeCall("backend_api_requant_int_global", p.to_bytes(), plain=True)


@native_rule(tpu.RequantIntOp, tpu.RequantIntAxisOp)
def requant_int(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """requant_int_param_t in MultiplierShift mode (per channel for the Axis form)."""
    src, dst = op.operands[0], op.results[0]
    qin, qout = quant_of(src), quant_of(dst)
    if qin is None or qout is None:
        raise NotExpressible("a requant of unquantized values")
    if (op.value("quant_mode") or "MultiplierShift") != "MultiplierShift":
        raise NotExpressible(f"quant_mode {op.value('quant_mode')}")
    multiplier, rshift = list(op.value("multiplier")), list(op.value("rshift"))
    if len(multiplier) > 1 or len(rshift) > 1:
        raise NotExpressible("a per-channel requant (the library's coefficient layout is unknown)")
    return [
        requant_int_call(
            ctx,
            (ctx.address(src), ctx.address(dst)),
            nchw(src),
            (dtype_code(src), dtype_code(dst)),
            multiplier,
            rshift,
            (qin.zero_point, qout.zero_point),
            round_mode(op),
        )
    ]


@native_rule(tpu.DequantIntOp)
def dequant_int(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """DequantInt.cpp's dequant_int_param_t writes integers; tpuc's DequantInt is float."""
    if is_float(op.results[0]):
        raise NotExpressible("a DequantInt with a float result (the library writes integers)")
    raise NotExpressible("a DequantInt with an integer result")
