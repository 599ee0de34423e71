"""f32 between casts: the detour several native rules share.

The chip's half-float kernels either refuse a function (sqrt, ln, exp, the
divide) or round in an order tpuc's interpreter does not follow (softmax,
LayerNorm, depthwise conv, some average pools). tpuc computes those ops in
f32 and rounds once to the result type, so the native target casts the
operands to f32 in scratch buffers, runs the op in f32 and casts the result
back, rounding to nearest even.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.ir import Operation

from tpuc.dialects.base import shape_of
from tpuc.passes.native.cast import CastGlobal
from tpuc.passes.native.context import (
    DTYPE_F32,
    ROUND_HALF_EVEN,
    NativeCall,
    NativeContext,
    dtype_code,
    dtype_name,
)
from tpuc.passes.native.conv import raw_spec


def cast_call(ctx: NativeContext, op: Operation, src: bytes, dst: bytes, codes: tuple[int, int]
              ) -> NativeCall:  # fmt: skip
    """cast_global_spec_t src -> dst, rounding to nearest even."""
    spec = CastGlobal()
    spec.common.src_dtype, spec.common.dst_dtype = codes
    spec.common.round_mode = ROUND_HALF_EVEN
    return ctx.call("backend_api_cast_global", spec, op, [src], [dst])


def in_f32(op: Operation, ctx: NativeContext, body) -> list[NativeCall]:
    """`body(inputs, output)` over f32 specs: as is for f32, else (the chip
    divides f32 only) the f16/bf16 operands cast to f32 in scratch and the
    f32 result cast back, which is tpuc's float arithmetic (f32, rounded
    to the storage type once)."""
    dst = op.results[0]
    from tpuc.passes.native.binary import operand_specs

    ins = operand_specs(op, ctx, pairs=False)
    if dtype_name(dst) == "f32":
        return body(ins, ctx.spec(dst))
    out_shape = tuple(shape_of(dst))
    rank = len(out_shape)
    nbytes = 4 * math.prod(out_shape)
    code = dtype_code(dst)
    calls, f32_ins = [], []
    for i, (value, spec) in enumerate(zip(op.operands, ins, strict=True)):
        shape = (1,) * (rank - len(shape_of(value))) + tuple(shape_of(value))
        f32 = raw_spec(ctx.scratch(nbytes, i), DTYPE_F32, shape)
        calls.append(cast_call(ctx, op, spec, f32, (code, DTYPE_F32)))
        f32_ins.append(f32)
    out = raw_spec(ctx.scratch(nbytes, len(ins)), DTYPE_F32, out_shape)
    calls += body(f32_ins, out)
    calls.append(cast_call(ctx, op, out, ctx.spec(dst), (DTYPE_F32, code)))
    return calls


def between_casts(
    op: Operation,
    ctx: NativeContext,
    body: Callable[[bytes, bytes], list[NativeCall]],
    view: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
) -> list[NativeCall]:
    """`body(f32 input, f32 output)` for a one-input op: its input cast to f32
    in scratch buffer 0, the result in scratch buffer 1 cast back; `view`:
    the (input, output) shapes every call sees instead of the op's own."""
    src, dst = op.operands[0], op.results[0]
    size = 4 * max(math.prod(shape_of(src)), math.prod(shape_of(dst)))
    shapes = view or (tuple(shape_of(src)), tuple(shape_of(dst)))
    wide_in = raw_spec(ctx.scratch(size, 0), DTYPE_F32, shapes[0])
    wide_out = raw_spec(ctx.scratch(size, 1), DTYPE_F32, shapes[1])
    return [
        cast_call(ctx, op, ctx.spec(src, shapes[0]), wide_in, (dtype_code(src), DTYPE_F32)),
        *body(wide_in, wide_out),
        cast_call(ctx, op, wide_out, ctx.spec(dst, shapes[1]), (DTYPE_F32, dtype_code(dst))),
    ]


__all__ = ["between_casts", "cast_call", "in_f32"]
