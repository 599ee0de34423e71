"""RequantInt / RequantIntAxis, after TPU-MLIR's
`Interfaces/BM1684X/{RequantInt,RequantIntAxis}.cpp`: the old-style
`backend_api_requant_int_global(requant_int_param_t*, sizeof)` with the
addresses in the struct and the tensor as getNCHW's n, c, h, w.

tpuc's requant(q − Z_in, M, r) + Z_out is the library's MultiplierShift
mode (2) with mul_value = M, shift_value = −r, zx_value = Z_in and
offset_value = Z_out; per channel, a coefficient [C][3] of int32
[M, −r, Z_out] (TPU-MLIR's quant weight, (1, C, 1, 1, 3)), which did not
match on the chip model: a per-channel requant is one scalar call per run
of channels (`RequantInt.per_channel_calls`). tpuc's DequantInt
has a float result, which the library's dequant_int (integer results) does
not write.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

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
from tpuc.target.vendor.params import declare

RequantIntParam = declare(
    "requant_int_param_t",
    "u64 input_addr; u64 output_addr; u64 requant_addr; u32 buffer_local_addr; i32 n; i32 c; "
    "i32 h; i32 w; bool is_perchannel; i32 mul_value; i32 shift_value; i32 offset_value; "
    "i32 input_dtype; i32 output_dtype; i32 mode; i32 reshaped_coeff; i32 zx_value; "
    "i32 round_mode",
)
MULTIPLIER_SHIFT = 2  # tpu::RequantMode::MultiplierShift
DTYPE_UINT8 = 3
ELEMENT_BYTES = {0: 4, 1: 2, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 4, 8: 2}  # by DTYPE_CODES


@dataclass(frozen=True)
class RequantInt:
    """requant(q − Z_in, M, r) + Z_out from addrs[0] into addrs[1] over an
    NCHW tensor (`dims`), `dtypes` and `zero_points` (in, out), `rounding`
    the library's round mode; one (M, r) or one per channel."""

    addrs: tuple[int, int]
    dims: Sequence[int]
    dtypes: tuple[int, int]
    multiplier: Sequence[int]
    rshift: Sequence[int]
    zero_points: tuple[int, int]
    rounding: int

    def call(self) -> NativeCall:
        """One requant_int_param_t call: the scalar form, one (M, r) (per
        channel: per_channel_calls)."""
        if len(self.multiplier) != 1 or len(self.rshift) != 1:
            raise NotExpressible(
                "a per-channel requant_int coefficient (its layout does not match)"
            )
        p = RequantIntParam()
        p.input_addr, p.output_addr = self.addrs
        p.n, p.c, p.h, p.w = self.dims
        p.input_dtype, p.output_dtype = self.dtypes
        p.zx_value, p.offset_value = self.zero_points
        p.mode, p.round_mode = MULTIPLIER_SHIFT, self.rounding
        p.mul_value, p.shift_value = int(self.multiplier[0]), -int(self.rshift[0])
        return NativeCall("backend_api_requant_int_global", p.to_bytes(), plain=True)

    def per_channel_calls(self) -> list[NativeCall]:
        """Scalar requant_int calls, one per run of neighbouring channels that
        share their (M, r) in each image (the library's per-channel
        coefficient form does not match; the scalar form is exact for 31-bit
        multipliers, shifts up to 40 and ties in every round mode tpuc has)."""
        n, c, h, w = self.dims
        pairs = np.stack(np.broadcast_arrays(self.multiplier, self.rshift), axis=-1)
        pairs = np.broadcast_to(pairs, (c, 2))
        src_bytes, dst_bytes = (ELEMENT_BYTES[code] for code in self.dtypes)
        if np.all(pairs == pairs[0]):
            runs, images = [(0, c)], [(0, n)]
        else:
            starts = [0] + [k for k in range(1, c) if np.any(pairs[k] != pairs[k - 1])]
            runs = list(zip(starts, [*starts[1:], c], strict=True))
            images = [(b, 1) for b in range(n)]
        calls = []
        for b, count in images:
            for c0, c1 in runs:
                at = (b * c + c0) * h * w
                m, r = (int(v) for v in pairs[c0])
                part = replace(
                    self,
                    addrs=(self.addrs[0] + at * src_bytes, self.addrs[1] + at * dst_bytes),
                    dims=(count, c1 - c0, h, w),
                    multiplier=[m],
                    rshift=[r],
                )
                calls.append(part.call())
        return calls


@native_rule(tpu.RequantIntOp, tpu.RequantIntAxisOp)
def requant_int(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """requant_int_param_t in MultiplierShift mode; per channel (axis 1, the
    Axis form): RequantInt.per_channel_calls. A fused relu only where the saturation
    clamps it (an unsigned result with zero point 0)."""
    src, dst = op.operands[0], op.results[0]
    qin, qout = quant_of(src), quant_of(dst)
    if qin is None or qout is None:
        raise NotExpressible("a requant of unquantized values")
    if (op.value("quant_mode") or "MultiplierShift") != "MultiplierShift":
        raise NotExpressible(f"quant_mode {op.value('quant_mode')}")
    if op.value("do_relu"):
        limit = op.value("relu_limit")
        unsigned = dtype_code(dst) == DTYPE_UINT8 and qout.zero_point == 0
        if not unsigned or (limit is not None and float(limit) >= 0):
            raise NotExpressible("a requant with a fused relu")
    multiplier, rshift = list(op.value("multiplier")), list(op.value("rshift"))
    dims = nchw(src)
    if len(multiplier) not in (1, dims[1]) or len(rshift) not in (1, dims[1]):
        raise NotExpressible(f"{len(multiplier)} multipliers for {dims[1]} channels")
    return RequantInt(
        (ctx.address(src), ctx.address(dst)),
        dims,
        (dtype_code(src), dtype_code(dst)),
        multiplier,
        rshift,
        (qin.zero_point, qout.zero_point),
        round_mode(op),
    ).per_channel_calls()


@native_rule(tpu.DequantIntOp)
def dequant_int(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """DequantInt.cpp's dequant_int_param_t writes integers; tpuc's DequantInt is float."""
    if is_float(op.results[0]):
        raise NotExpressible("a DequantInt with a float result (the library writes integers)")
    raise NotExpressible("a DequantInt with an integer result")
