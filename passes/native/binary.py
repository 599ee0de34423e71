"""Binary elementwise ops, after TPU-MLIR's `Interfaces/BM1684X/{Add,Sub,Mul,
Max,Min,AddConst,SubConst,MulConst}.cpp`: tensor-tensor ops through
`backend_api_bcbinary_global` (`bcbinary_global_param_t`, the backend
broadcasts), tensor-constant ops through `backend_api_constbinary_global`
(`constbinary_global_spec_t`).

INT8 (measured on the vendor's chip model): MUL computes
(A·B·scale_A + 2^(rshift_A−1)) >> rshift_A with a u8 scale_A, whatever the
round mode, which bm168x's lowering chooses (HalfUp); ADD/SUB compute
((A·scale_A + 2^(rshift_A−1)) >> rshift_A) ± ((B·scale_B + 2^(rshift_B−1))
>> rshift_B), u8 scales, each term rounded on its own, then relu and
saturation: tpuc's bm168x Add/Sub contract (one rshift per input), so a
symmetric INT8 Add/Sub of two inputs is one call (int8_add_terms). An
asymmetric one keeps the shared-rshift contract (the chip saturates
q − izp to 8 bits, so zero points cannot go into the call): exact sums in
int32 scratch, one requant (int8_add).
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.cast import nchw, round_mode
from tpuc.passes.native.context import (
    DTYPE_F32,
    DTYPE_I32,
    DTYPE_U32,
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
    is_float,
    quant_of,
)
from tpuc.passes.native.conv import raw_spec
from tpuc.passes.native.requant import RequantInt
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import BcBinaryGlobal, ConstBinaryGlobal

BINARY_ADD, BINARY_SUB, BINARY_MUL, BINARY_MAX, BINARY_MIN = 0, 1, 2, 4, 10000


def relu_fields(op: Operation) -> tuple[int, float]:
    """(if_relu, relu_upper_limit) from do_relu / relu_limit (-1: no limit)."""
    limit = op.value("relu_limit")
    return int(bool(op.value("do_relu"))), -1.0 if limit is None else float(limit)


def zero_point(value) -> int:
    q = quant_of(value)
    return q.zero_point if q is not None else 0


def operand_specs(op: Operation, ctx: NativeContext, pairs: bool = True) -> list[bytes]:
    """The operands (two unless `pairs` is off) at the output's rank (leading
    1s), as TPU-MLIR's shape inference leaves them; the backend broadcasts
    the unit dims."""
    if pairs and len(op.operands) != 2:
        raise NotExpressible(f"{len(op.operands)} inputs (the chip's binary ops take two)")
    rank = len(shape_of(op.results[0]))
    specs = []
    for value in op.operands:
        shape = tuple(shape_of(value))
        if len(shape) > rank:
            raise NotExpressible(f"an input of rank {len(shape)} above the output's {rank}")
        specs.append(ctx.spec(value, (1,) * (rank - len(shape)) + shape))
    return specs


def bcbinary(op: Operation, ctx: NativeContext, binary_type: int) -> BcBinaryGlobal:
    param = BcBinaryGlobal()
    spec = param.spec
    spec.binary_type = binary_type
    spec.if_relu, spec.relu_upper_limit = relu_fields(op)
    spec.scale_A = spec.scale_B = 1
    spec.f8_scale_A = spec.f8_scale_B = 1.0
    return param


def all_float(op: Operation) -> bool:
    return all(is_float(v) for v in (*op.operands, *op.results))


def unsigned(value) -> bool:
    return dtype_name(value) in ("u8", "u16", "u32")


def term_factors(op: Operation) -> tuple[list[int], list[int]] | None:
    """(u8 multipliers, rshifts) of an Add/Sub in the per-term form (one
    rshift per input), None in the shared form; NotExpressible when the
    chip's call cannot take them."""
    count = len(op.operands)
    multipliers = [int(m) for m in op.value("multiplier") or [1] * count]
    rshifts = [int(r) for r in op.value("rshift") or [0]]
    if count < 2 or len(rshifts) != count:
        return None
    if len(multipliers) != count or not all(0 <= m <= 255 for m in multipliers):
        raise NotExpressible(f"INT8 Add/Sub multipliers {multipliers} (the chip takes u8 scales)")
    if not all(0 <= r < 32 for r in rshifts):
        raise NotExpressible(f"INT8 Add/Sub rshifts {rshifts}")
    if any(rshifts) and op.value("round_mode") != "HalfUp":
        raise NotExpressible(f"round mode {op.value('round_mode')} (the chip rounds half up)")
    if any(q.zero_point for q in map(quant_of, (*op.operands, op.results[0])) if q):
        raise NotExpressible("an INT8 Add/Sub with one rshift per input and zero points")
    limit = op.value("relu_limit")
    if op.value("do_relu") and limit is not None and float(limit) >= 0:
        raise NotExpressible(f"an INT8 Add/Sub with relu_limit {limit}")
    return multipliers, rshifts


def int8_add_terms(
    op: Operation, ctx: NativeContext, kind: int, factors: tuple[list[int], list[int]]
) -> list[NativeCall]:
    """Σ ±round(q_i·M_i >> r_i): one bcbinary ADD/SUB of two inputs (scale and
    rshift per input, the fused relu, saturation to the output); a third
    input adds onto the first two's int32 sum (scale 1, rshift 0)."""
    multipliers, rshifts = factors
    inputs = operand_specs(op, ctx, pairs=False)
    relu = int(bool(op.value("do_relu")))
    if len(inputs) == 2:
        param = bcbinary(op, ctx, kind)
        spec = param.spec
        spec.if_relu, spec.relu_upper_limit = relu, -1.0
        spec.scale_A, spec.scale_B = multipliers
        spec.rshift_A, spec.rshift_B = rshifts
        return [ctx.call("backend_api_bcbinary_global", param, op, inputs=inputs)]
    shape = tuple(shape_of(op.results[0]))
    pair_unsigned = all(unsigned(v) for v in op.operands[:2])
    acc = raw_spec(ctx.scratch(4 * math.prod(shape)), DTYPE_U32 if pair_unsigned else DTYPE_I32,
                   shape)  # fmt: skip
    calls = []
    for i in range(1, len(inputs)):
        param = bcbinary(op, ctx, BINARY_ADD if i == 1 else kind)
        spec = param.spec
        spec.if_relu, spec.relu_upper_limit = (relu if i == len(inputs) - 1 else 0), -1.0
        lhs = inputs[0] if i == 1 else acc
        spec.scale_A, spec.rshift_A = (multipliers[0], rshifts[0]) if i == 1 else (1, 0)
        spec.scale_B, spec.rshift_B = multipliers[i], rshifts[i]
        outputs = [acc] if i < len(inputs) - 1 else None
        calls.append(ctx.call("backend_api_bcbinary_global", param, op, [lhs, inputs[i]], outputs))
    return calls


def int8_add(op: Operation, ctx: NativeContext, kind: int) -> list[NativeCall]:
    """The shared-rshift form (an asymmetric Add/Sub: zero points cannot go
    into the one-call form), Σ ±(q_i − Z_i)·M_i requantized once: bcbinary
    ADD/SUB with u8 scale_A/B = M_a/M_b, rshift 0 and an int32 result in
    scratch (exact: |Σ| < 2^17; a third input adds onto it, scale 1 for the
    sum), then requant_int_param_t int32 -> the output with
    multiplier 1, shift −r, zx = Σ ±Z_i·M_i, offset Z_out and the op's round
    mode. The zero points go to zx, not izp_A/B: the chip saturates q − izp
    to 8 bits. The fused relu clamps the sum at 0 in the last bcbinary when
    zx is 0 (requant is monotonic and keeps 0 at Z_out, so that is clamping
    the output at Z_out); else only when Z_out is the storage minimum (the
    saturation clamps)."""
    multipliers = [int(m) for m in op.value("multiplier") or [1] * len(op.operands)]
    rshift = [int(r) for r in op.value("rshift") or [0]]
    if len(multipliers) != len(op.operands) or len(rshift) != 1:
        raise NotExpressible(f"multipliers {multipliers}, rshifts {rshift}")
    if not all(0 <= m <= 255 for m in multipliers) or not 0 <= rshift[0] < 32:
        raise NotExpressible(
            f"INT8 Add/Sub with multipliers {multipliers} >> {rshift[0]} (the chip's "
            "bcbinary takes unsigned 8-bit scales: lower for bm168x)"
        )
    limit = op.value("relu_limit")
    if op.value("do_relu") and limit is not None and float(limit) >= 0:
        raise NotExpressible(f"an INT8 Add/Sub with relu_limit {limit}")
    out = quant_of(op.results[0])
    signs = [1] + [1 if kind == BINARY_ADD else -1] * (len(multipliers) - 1)
    offset = sum(
        s * zero_point(v) * m for s, v, m in zip(signs, op.operands, multipliers, strict=True)
    )
    relu = bool(op.value("do_relu"))
    shape = tuple(shape_of(op.results[0]))
    scratch = ctx.scratch(4 * math.prod(shape))
    acc = raw_spec(scratch, DTYPE_I32, shape)
    inputs = operand_specs(op, ctx, pairs=False)
    calls = []
    for i in range(len(inputs)):
        param = bcbinary(op, ctx, BINARY_ADD if i == 0 else kind)
        spec = param.spec
        spec.if_relu = int(relu and not offset and i == len(inputs) - 1)  # on the whole sum
        spec.relu_upper_limit = -1.0
        if i == 0:  # q_0·M_0 (+ q_0·0): one term fits the chip's 16-bit sum
            spec.scale_A, spec.scale_B = multipliers[0], 0
            lhs = rhs = inputs[0]
            # the chip's integer add wants an unsigned result of unsigned inputs
            first = raw_spec(scratch, DTYPE_U32 if unsigned(op.operands[0]) else DTYPE_I32,
                             shape)  # fmt: skip
            calls.append(ctx.call("backend_api_bcbinary_global", param, op, [lhs, rhs], [first]))
            continue
        spec.scale_A, spec.scale_B = 1, multipliers[i]
        calls.append(ctx.call("backend_api_bcbinary_global", param, op, [acc, inputs[i]], [acc]))
    if offset:  # − Σ ±Z_i·M_i as an int32 coefficient (constbinary saturates to 16 bits)
        param = bcbinary(op, ctx, BINARY_ADD)
        param.spec.relu_upper_limit = -1.0
        coeff = ctx.coeffs.add(f"{op.names[0]}_zero_points", np.array([-offset], np.int32))
        const = raw_spec(coeff, DTYPE_I32, (1,) * len(shape))
        calls.append(ctx.call("backend_api_bcbinary_global", param, op, [acc, const], [acc]))
    dst = op.results[0]
    calls.append(
        RequantInt(
            (scratch, ctx.address(dst)),
            nchw(dst),
            (DTYPE_I32, dtype_code(dst)),
            [1],
            rshift,
            (0, out.zero_point),
            round_mode(op),
        ).call()
    )
    return calls


@native_rule(tpu.AddOp, tpu.SubOp)
def add_sub(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """bcbinary ADD/SUB; float coeff other than 1 has no field; INT8: int8_add."""
    kind = BINARY_ADD if isinstance(op, tpu.AddOp) else BINARY_SUB
    if all_float(op):
        coeff = op.value("coeff") if isinstance(op, tpu.AddOp) else None
        if coeff and any(float(c) != 1.0 for c in coeff):
            raise NotExpressible(f"coeff {list(coeff)} (bcbinary has no float coefficients)")
        if len(op.operands) > 2:
            return float_sum(op, ctx, kind)
    elif quant_of(op.results[0]) is not None:
        factors = term_factors(op)
        if factors is not None:
            return int8_add_terms(op, ctx, kind, factors)
        return int8_add(op, ctx, kind)
    else:
        raise NotExpressible("mixed float and integer operands")
    param = bcbinary(op, ctx, kind)
    inputs = operand_specs(op, ctx)
    return [ctx.call("backend_api_bcbinary_global", param, op, inputs=inputs)]


def float_sum(op: Operation, ctx: NativeContext, kind: int) -> list[NativeCall]:
    """Three or more float inputs: a chain of two-input calls in f32 (between
    casts for f16/bf16), in input order, the fused relu on the last; tpuc
    sums them in f32 in that order and rounds once."""
    from tpuc.passes.native.f32 import in_f32

    def body(ins: list[bytes], out: bytes) -> list[NativeCall]:
        calls = []
        for i in range(1, len(ins)):
            param = bcbinary(op, ctx, kind)
            if i < len(ins) - 1:
                param.spec.if_relu, param.spec.relu_upper_limit = 0, -1.0
            lhs = ins[0] if i == 1 else out
            calls.append(ctx.call("backend_api_bcbinary_global", param, op, [lhs, ins[i]], [out]))
        return calls

    return in_f32(op, ctx, body)


def int8_mul_scale(op: Operation) -> tuple[int, int]:
    """An INT8 Mul's (scale_A, rshift_A): the chip takes one u8 multiplier
    and a right shift, rounding half up (global and local rules)."""
    multiplier = [int(m) for m in op.value("multiplier") or [1]]
    rshift = [int(r) for r in op.value("rshift") or [0]]
    if len(multiplier) != 1 or not 0 <= multiplier[0] <= 255 or not 0 <= rshift[0] < 32:
        raise NotExpressible(f"multiplier {multiplier} >> {rshift} (the chip takes u8 >> n)")
    if rshift[0] and op.value("round_mode") != "HalfUp":
        raise NotExpressible(f"round mode {op.value('round_mode')} (the chip rounds half up)")
    return multiplier[0], rshift[0]


@native_rule(tpu.MulOp)
def mul(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """bcbinary MUL: scale_A = multiplier, rshift_A = rshift (Mul.cpp)."""
    param = bcbinary(op, ctx, BINARY_MUL)
    inputs = operand_specs(op, ctx)
    if not all_float(op):
        if quant_of(op.results[0]) is None:
            raise NotExpressible("mixed float and integer operands")
        if any(q.zero_point for q in map(quant_of, (*op.operands, op.results[0])) if q):
            raise NotExpressible(
                "asymmetric INT8 Mul (the chip's Mul has no zero points, and TPU-MLIR lowers it "
                "in F32: name it F32 in a --quantize_table)"
            )
        param.spec.scale_A, param.spec.rshift_A = int8_mul_scale(op)
    return [ctx.call("backend_api_bcbinary_global", param, op, inputs=inputs)]


@native_rule(tpu.MaxOp, tpu.MinOp)
def max_min(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """bcbinary MAX/MIN; INT8 only when every operand shares the output's type."""
    kind = BINARY_MAX if isinstance(op, tpu.MaxOp) else BINARY_MIN
    if not all_float(op):
        types = {v.type.element_type for v in (*op.operands, *op.results)}
        if len(types) != 1:
            raise NotExpressible("INT8 Max/Min over operands of different scales")
    param = bcbinary(op, ctx, kind)
    return [ctx.call("backend_api_bcbinary_global", param, op, inputs=operand_specs(op, ctx))]


CONST_KINDS = {tpu.AddConstOp: BINARY_ADD, tpu.SubConstOp: BINARY_SUB, tpu.MulConstOp: BINARY_MUL}


def const_fields(op: Operation, c) -> None:
    """constbinary_common_spec_t of a float AddConst/SubConst/MulConst
    (global and local rules)."""
    c.binary_type = CONST_KINDS[type(op)]
    c.B_const_val = float(op.value("const_val"))
    c.B_dtype = DTYPE_F32
    c.inversed = int(bool(op.value("is_reverse"))) if isinstance(op, tpu.SubConstOp) else 0
    c.if_relu, c.relu_upper_limit = relu_fields(op)
    c.scale_A = 1
    c.f8_scale_A = 1.0


@native_rule(tpu.AddConstOp, tpu.SubConstOp, tpu.MulConstOp)
def const_binary(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """constbinary: B_const_val = const_val (FP32), inversed = is_reverse
    (SubConst: const − x), scale_A = 1 (AddConst.cpp / MulConst.cpp float form)."""
    if not all_float(op):
        raise NotExpressible("integer constant arithmetic (INT8 lowers it to tpu.Lut)")
    param = ConstBinaryGlobal()
    const_fields(op, param.common)
    return [ctx.call("backend_api_constbinary_global", param, op)]
