"""Comparisons, selection and float division, after TPU-MLIR's
`Interfaces/BM1684X/{Compare,CompareConst,Where,Div,Reciprocal}.cpp`:

- Compare: `backend_api_bcbinary_global` with binary_type = BINARY_GT/GE/
  LT/LE (BM168x::compare_mode); the chip's EQ / NE compare float bits
  (−0 ≠ +0), so Equal is GE·LE and NotEqual GT + LT (`equality`); the
  logical modes (And, Or, Xor) are refused;
- CompareConst, Not: `backend_api_constbinary_global`, the constant on the
  right (an inversed order comparison flipped, as
  normalizeCompareConstModeAndInversed); Not is Equal 0;
- Where: `backend_api_select_global` (`select_common_spec_t`, both branches
  tensors), every operand at the output's rank;
- Div, PowTensor's base: bcbinary BINARY_DIV (float only: tpuc lowers Div in
  f32 even in INT8 mode);
- Reciprocal: constbinary DIV with `inversed` (const_val / x);
- Pow with a constant exponent: x·x for 2, 1/x for −1, SQRT / RSQRT for
  ±0.5, otherwise TPU-MLIR's PowLowering (exp(n·ln|x|), times x for an odd
  integer n) through scratch buffers; PowTensor exp(b·ln a).

The results are floats of 1.0 / 0.0 (comparisons) or the chip's float
arithmetic: DIV, LN and EXP are not correctly rounded, so the float bound
(cosine) applies, never bit equality.
"""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.active import ACTIVE_TYPES
from tpuc.passes.native.binary import bcbinary, operand_specs, relu_fields
from tpuc.passes.native.context import (
    DTYPE_F32,
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
    is_float,
)
from tpuc.passes.native.conv import raw_spec
from tpuc.passes.native.f32 import in_f32
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import ActiveGlobal, ConstBinaryGlobal, declare

SelectSpec = declare(
    "select_common_spec_t",
    "i32 sel0_is_const; i32 sel1_is_const; f32 sel0_const_val; f32 sel1_const_val; u64 buffer_addr",
)

BINARY_ADD, BINARY_MUL, BINARY_DIV = 0, 2, 3
COMPARE_TYPES = {
    "Greater": 10001, "GreaterOrEqual": 10002, "Less": 10003, "LessOrEqual": 10004,
    "Equal": 10005, "NotEqual": 10006,
}  # fmt: skip
"""Param.h binary_type_t of each tpuc compare mode. And / Or / Xor have none:
the chip's float bcbinary refuses BINARY_LOGIC_* ("not supported binary
type"), and TPU-MLIR's And as MUL holds for 0/1 inputs only."""
FLIPPED = {"Greater": "Less", "GreaterOrEqual": "LessOrEqual", "Less": "Greater",
           "LessOrEqual": "GreaterOrEqual"}  # fmt: skip
SYMMETRIC = {"Equal", "NotEqual"}


def float_only(op: Operation, what: str) -> None:
    if not all(is_float(v) for v in (*op.operands, *op.results)):
        raise NotExpressible(f"an integer {what} (tpuc lowers it in float)")
    names = {dtype_name(v) for v in (*op.operands, *op.results)}
    if len(names) != 1:
        raise NotExpressible(f"a {what} over mixed float types {sorted(names)}")


def bc_call(op: Operation, ctx: NativeContext, kind: int, relu: bool = True) -> list[NativeCall]:
    param = bcbinary(op, ctx, kind)
    if not relu:
        param.spec.if_relu, param.spec.relu_upper_limit = 0, -1.0
    return [ctx.call("backend_api_bcbinary_global", param, op, inputs=operand_specs(op, ctx))]


def const_param(value: SSAValue, kind: int, const: float, inversed: bool = False
                ) -> ConstBinaryGlobal:  # fmt: skip
    param = ConstBinaryGlobal()
    c = param.common
    c.binary_type = kind
    c.B_const_val = float(const)
    c.B_dtype = dtype_code(value)
    c.inversed = int(inversed)
    c.relu_upper_limit = -1.0
    c.scale_A = 1
    c.f8_scale_A = 1.0
    return param


def equality(op: Operation, ctx: NativeContext, mode: str, make) -> list[NativeCall]:
    """Equal / NotEqual without the chip's EQ / NE, which compare float bits
    (−0 ≠ +0, measured): a == b is (a >= b)·(a <= b), a != b is
    (a > b) + (a < b), the two halves in scratch; `make(kind, dst)` is the
    call of one comparison into `dst`."""
    dst = op.results[0]
    shape = tuple(shape_of(dst))
    nbytes = 4 * math.prod(shape)
    halves = [raw_spec(ctx.scratch(nbytes, i), dtype_code(dst), shape) for i in range(2)]
    kinds = ("GreaterOrEqual", "LessOrEqual") if mode == "Equal" else ("Greater", "Less")
    calls = [make(COMPARE_TYPES[k], h) for k, h in zip(kinds, halves, strict=True)]
    param = bcbinary(op, ctx, BINARY_MUL if mode == "Equal" else BINARY_ADD)
    param.spec.if_relu, param.spec.relu_upper_limit = 0, -1.0
    calls.append(ctx.call("backend_api_bcbinary_global", param, op, halves, [ctx.spec(dst)]))
    return calls


@native_rule(tpu.CompareOp)
def compare(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Compare.cpp: bcbinary with binary_type = compare_mode(mode), scales 1
    (Equal / NotEqual: `equality`)."""
    float_only(op, "comparison")
    mode = op.value("mode")
    if mode not in COMPARE_TYPES:
        raise NotExpressible(f"compare mode {mode!r}")
    inputs = operand_specs(op, ctx)

    def make(kind: int, dst: bytes) -> NativeCall:
        param = bcbinary(op, ctx, kind)
        param.spec.if_relu, param.spec.relu_upper_limit = 0, -1.0
        return ctx.call("backend_api_bcbinary_global", param, op, inputs, [dst])

    if mode in ("Equal", "NotEqual"):
        return equality(op, ctx, mode, make)
    return [make(COMPARE_TYPES[mode], ctx.spec(op.results[0]))]


def compare_const_calls(op: Operation, ctx: NativeContext, mode: str, const: float
                        ) -> list[NativeCall]:  # fmt: skip
    src = ctx.spec(op.operands[0])

    def make(kind: int, dst: bytes) -> NativeCall:
        param = const_param(op.operands[0], kind, const)
        return ctx.call("backend_api_constbinary_global", param, op, [src], [dst])

    if mode in ("Equal", "NotEqual"):
        return equality(op, ctx, mode, make)
    return [make(COMPARE_TYPES[mode], ctx.spec(op.results[0]))]


@native_rule(tpu.CompareConstOp)
def compare_const(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """CompareConst.cpp: constbinary, B_const_val = const_val, an inversed
    order comparison flipped (c > x is x < c)."""
    float_only(op, "comparison")
    mode = op.value("mode")
    if op.value("inversed") and mode not in SYMMETRIC:
        mode = FLIPPED.get(mode, mode)
    if mode not in COMPARE_TYPES:
        raise NotExpressible(f"compare mode {mode!r}")
    return compare_const_calls(op, ctx, mode, float(op.value("const_val")))


@native_rule(tpu.NotOp)
def logical_not(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """1.0 where x == 0 (compare_mode("Not") is EQ; here `equality`'s)."""
    float_only(op, "logical not")
    return compare_const_calls(op, ctx, "Equal", 0.0)


@native_rule(tpu.WhereOp)
def where(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Where.cpp: select_common_spec_t, both branches tensors. The chip's
    select does not broadcast: an operand of another shape is tiled to the
    output's first (into scratch)."""
    float_only(op, "select")
    out = tuple(shape_of(op.results[0]))
    nbytes = 4 * math.prod(out)
    calls, ins = [], []
    for i, value in enumerate(op.operands):
        shape = tuple(shape_of(value))
        if len(shape) > len(out):
            raise NotExpressible(f"a select operand of rank {len(shape)} above the output's")
        shape = (1,) * (len(out) - len(shape)) + shape
        if shape == out:
            ins.append(ctx.spec(value, shape))
            continue
        addr, code = ctx.scratch(nbytes, i), dtype_code(value)
        where = (ctx.address(value), code)
        calls.append(tile_call(ctx, op, where, (shape, out), addr, 4, len(op.operands)))
        ins.append(raw_spec(addr, code, out))
    return calls + [ctx.call("backend_api_select_global", SelectSpec(), op, inputs=ins)]


@native_rule(tpu.DivOp)
def div(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Div.cpp: bcbinary DIV, scales 1, the fused relu (in f32)."""
    float_only(op, "division")
    param = bcbinary(op, ctx, BINARY_DIV)
    return in_f32(op, ctx, lambda ins, out: [
        ctx.call("backend_api_bcbinary_global", param, op, ins, [out])
    ])  # fmt: skip


@native_rule(tpu.ReciprocalOp)
def reciprocal(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Reciprocal.cpp: constbinary DIV inversed, const_val / x (in f32)."""
    float_only(op, "reciprocal")
    param = const_param(op.operands[0], BINARY_DIV, float(op.value("const_val")), inversed=True)
    param.common.B_dtype = DTYPE_F32
    param.common.if_relu, param.common.relu_upper_limit = relu_fields(op)
    return in_f32(op, ctx, lambda ins, out: [
        ctx.call("backend_api_constbinary_global", param, op, ins, [out])
    ])  # fmt: skip


def active_call(ctx: NativeContext, op: Operation, mode: str, src: bytes, dst: bytes
                ) -> NativeCall:  # fmt: skip
    param = ActiveGlobal()
    param.common.active_type = ACTIVE_TYPES[mode]
    return ctx.call("backend_api_active_global", param, op, [src], [dst])


def mul_const_call(ctx: NativeContext, op: Operation, const: float, src: bytes, dst: bytes
                   ) -> NativeCall:  # fmt: skip
    """constbinary MUL by an f32 constant (f32 specs)."""
    param = const_param(op.results[0], BINARY_MUL, const)
    param.common.B_dtype = DTYPE_F32
    return ctx.call("backend_api_constbinary_global", param, op, [src], [dst])


@native_rule(tpu.PowOp)
def power(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """x^n: x·x for n = 2 (exact in every float type), a copy for 1; else
    in f32 (`in_f32`: the chip's SQRT, LN and EXP take f32 only): 1/x for
    −1, SQRT / RSQRT for ±0.5, otherwise PowLowering's exp(n·ln|x|) (|x|
    for an integer n; times x for an odd one)."""
    float_only(op, "power")
    n = float(op.value("exponent"))
    src, dst = op.operands[0], op.results[0]
    if n == 2.0:
        x = ctx.spec(src)
        param = bcbinary(op, ctx, BINARY_MUL)
        param.spec.if_relu, param.spec.relu_upper_limit = 0, -1.0
        return [ctx.call("backend_api_bcbinary_global", param, op, [x, x], [ctx.spec(dst)])]
    if n == 1.0:
        from tpuc.passes.native.data import copy

        return copy(src, dst, ctx)
    shape = tuple(shape_of(dst))

    def body(ins: list[bytes], y: bytes) -> list[NativeCall]:
        (x,) = ins
        if n == -1.0:
            param = const_param(src, BINARY_DIV, 1.0, inversed=True)
            param.common.B_dtype = DTYPE_F32
            return [ctx.call("backend_api_constbinary_global", param, op, [x], [y])]
        if n in (0.5, -0.5):
            return [active_call(ctx, op, "SQRT" if n > 0 else "RSQRT", x, y)]
        t = raw_spec(ctx.scratch(4 * math.prod(shape), 3), DTYPE_F32, shape)
        integer = n == int(n)
        odd = integer and int(n) % 2 != 0
        calls, base = [], x
        if integer:
            calls.append(active_call(ctx, op, "ABSVAL", x, t))
            base = t
        calls.append(active_call(ctx, op, "LN", base, t))
        calls.append(mul_const_call(ctx, op, n - 1 if odd else n, t, t))
        calls.append(active_call(ctx, op, "EXP", t, t if odd else y))
        if odd:
            param = bcbinary(op, ctx, BINARY_MUL)
            param.spec.if_relu, param.spec.relu_upper_limit = 0, -1.0
            calls.append(ctx.call("backend_api_bcbinary_global", param, op, [x, t], [y]))
        return calls

    return in_f32(op, ctx, body)


@native_rule(tpu.PowTensorOp)
def power_tensor(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """a^b = exp(b·ln a) in f32 (nan for a < 0, as tpuc's for a non-integer b)."""
    float_only(op, "power")
    out_shape = tuple(shape_of(op.results[0]))
    a_shape = (1,) * (len(out_shape) - len(shape_of(op.operands[0]))) + tuple(
        shape_of(op.operands[0])
    )
    nbytes = 4 * math.prod(out_shape)
    la = raw_spec(ctx.scratch(nbytes, 3), DTYPE_F32, a_shape)
    prod = raw_spec(ctx.scratch(nbytes, 4), DTYPE_F32, out_shape)
    param = bcbinary(op, ctx, BINARY_MUL)
    param.spec.if_relu, param.spec.relu_upper_limit = 0, -1.0

    def body(ins: list[bytes], y: bytes) -> list[NativeCall]:
        a, b = ins
        return [
            active_call(ctx, op, "LN", a, la),
            ctx.call("backend_api_bcbinary_global", param, op, [la, b], [prod]),
            active_call(ctx, op, "EXP", prod, y),
        ]

    return in_f32(op, ctx, body)


declare("tile_common_spec_t", "i32 tile_coeff[8]; i32 type")
TileGlobal = declare("tile_global_spec_t", "tile_common_spec_t common; u64 buffer_addr")


def tile_call(ctx: NativeContext, op: Operation, src: tuple[int, int], shapes, dst: int,
              elem: int, buffer: int) -> NativeCall:  # fmt: skip
    """backend_api_tile_global (Tile.cpp): `src` = (address, dtype code) of a
    tensor viewed as shapes[0] (the output's rank, unit dims where it
    repeats) repeated into shapes[1] at `dst`; `buffer`: the scratch index
    of a buffer as large as the output (TileGlobalBuffer's size at most)."""
    (addr, code), (in_shape, out_shape) = src, shapes
    if len(in_shape) != len(out_shape) or any(
        o % i for i, o in zip(in_shape, out_shape, strict=True)
    ):
        raise NotExpressible(f"a tile of {list(in_shape)} into {list(out_shape)}")
    p = TileGlobal()
    for i, (a, b) in enumerate(zip(in_shape, out_shape, strict=True)):
        p.common.tile_coeff[i] = b // a
    p.buffer_addr = ctx.scratch(elem * math.prod(out_shape), buffer)
    ins, outs = [raw_spec(addr, code, tuple(in_shape))], [raw_spec(dst, code, tuple(out_shape))]
    return ctx.call("backend_api_tile_global", p, op, ins, outs)
