"""TPU canonicalization: precision changes that cancel or combine.

Lowering inserts a tpu.Cast wherever producer and consumer precision
differ, one op at a time; once other patterns have removed what stood in
between, chains appear: a Cast to the type a value already has, a
dequantize feeding a quantize (one integer rescale, tpu.RequantInt), two
rescales in a row (one). A float round trip is dropped only when the middle
type holds every value of the outer one (f16 -> f32 -> f16); through a
narrower type (f32 -> f16 -> f32) it rounds, so it stays. Value conversions
(`to` = INT32, BOOL …) are never touched. The outer op's tensor name is the
one that survives.
"""

from __future__ import annotations

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tpuc.base.numerics import multiplier_rshift
from tpuc.dialects import tpu
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.ir.qparams import QuantParams
from tpuc.passes.canonicalize.common import (
    absorb,
    can_absorb_into,
    is_returned,
    only_user_is,
    producer,
)

FLOATS = (Float32Type, Float16Type, BFloat16Type)


def element(value: SSAValue) -> Attribute:
    t = value.type
    return t.element_type if isinstance(t, TensorType) else t


def is_quant(value: SSAValue) -> bool:
    return isinstance(element(value), UniformQuantizedType)


def is_float(value: SSAValue) -> bool:
    return isinstance(element(value), FLOATS)


def plain_cast(op: Operation | None) -> bool:
    """A tpu.Cast that only changes precision (no `to` value conversion)."""
    return isinstance(op, tpu.CastOp) and op.value("to") in (None, "", "F32")


def requant_style(anchor: Operation) -> tuple[int, str]:
    """Multiplier width and rounding of the module's chip (32-bit,
    HalfAwayFromZero when the module names none)."""
    from tpuc.ir.module_io import module_attr
    from tpuc.ir.weights import module_of
    from tpuc.target.chips import CHIPS

    chip = CHIPS.get(str(module_attr(module_of(anchor), "chip", "")).lower())
    if chip is None:
        return 32, "HalfAwayFromZero"
    return chip.multiplier_bits, chip.round_mode


def bypass(
    rewriter: PatternRewriter, outer: Operation, source: SSAValue, inner: Operation | None = None
) -> None:
    """`outer` (fed through `inner`, if given) computes `source` again: its
    readers read `source`. A returned outer keeps its name: the producer of
    `source` takes it over when it can, else nothing changes."""
    if is_returned(outer.results[0]):
        owner = source.owner
        first_user = inner or outer
        if not (
            isinstance(owner, Operation)
            and can_absorb_into(owner)
            and len(owner.results) == 1
            and only_user_is(source, first_user)
        ):
            return
        absorb(rewriter, owner, outer)  # type: ignore[arg-type]
    else:
        rewriter.replace(outer, [], [source])
    if inner is not None:
        rewriter.erase(inner)


def requant_between(
    rewriter: PatternRewriter, outer: Operation, source: SSAValue, inner: Operation
) -> None:
    """Replace inner → outer by one tpu.RequantInt from `source`'s type to
    outer's: requant(q − Z_in, M, r) + Z_out with M/2^r ≈ S_in/S_out."""
    if element(source) == element(outer.results[0]):
        bypass(rewriter, outer, source, inner)
        return
    q_in = QuantParams.of(element(source))
    q_out = QuantParams.of(element(outer.results[0]))
    bits, round_mode = requant_style(outer)
    multiplier, rshift = multiplier_rshift(q_in.scale / q_out.scale, bits)
    new = tpu.RequantIntOp.make(
        [source],
        outer.attributes["name"].data,  # type: ignore[union-attr]
        {"multiplier": [multiplier], "rshift": [rshift], "round_mode": round_mode},
        result_types=[outer.results[0].type],
    )
    rewriter.replace(outer, new)
    rewriter.erase(inner)


class RemoveNoopCast(RewritePattern):
    """Cast(x: T) -> T is x."""

    roots = (tpu.CastOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tpu.CastOp, rewriter: PatternRewriter) -> None:
        if plain_cast(op) and element(op.input) == element(op.output):
            bypass(rewriter, op, op.input)


class FoldQuantRoundTrip(RewritePattern):
    """Cast(quant A -> float) -> Cast(float -> quant B): one RequantInt from
    A to B (nothing at all when A == B)."""

    roots = (tpu.CastOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tpu.CastOp, rewriter: PatternRewriter) -> None:
        inner = producer(op.input, tpu.CastOp)
        if not (plain_cast(op) and plain_cast(inner) and is_quant(op.output)):
            return
        assert inner is not None
        if not (is_quant(inner.input) and is_float(inner.output)):
            return
        if only_user_is(inner.output, op):
            requant_between(rewriter, op, inner.input, inner)


class DropWideningRoundTrip(RewritePattern):
    """Cast(A -> f32) -> Cast(f32 -> A) for A = f16/bf16 is the identity (f32
    holds every A); Cast(f32 -> A) -> Cast(A -> f32) rounds and stays."""

    roots = (tpu.CastOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tpu.CastOp, rewriter: PatternRewriter) -> None:
        inner = producer(op.input, tpu.CastOp)
        if not (plain_cast(op) and plain_cast(inner)):
            return
        assert inner is not None
        source = inner.input
        if element(source) != element(op.output) or not is_float(source):
            return
        if isinstance(element(inner.output), Float32Type) and only_user_is(inner.output, op):
            bypass(rewriter, op, source, inner)


def real_range(quant: QuantParams) -> tuple[float, float]:
    return (
        quant.scale * (quant.qmin - quant.zero_point),
        quant.scale * (quant.qmax - quant.zero_point),
    )


def covers(middle: QuantParams, out: QuantParams) -> bool:
    """The middle type's real range holds the output's: clamping in the
    middle then clamps nothing the output would keep."""
    (lo_mid, hi_mid), (lo_out, hi_out) = real_range(middle), real_range(out)
    return lo_mid <= lo_out and hi_mid >= hi_out


class MergeRequantInt(RewritePattern):
    """RequantInt(A -> B) -> RequantInt(B -> C): one RequantInt(A -> C),
    when B's range holds C's (else B's saturation would be lost) and both
    round alike. One rounding instead of two."""

    roots = (tpu.RequantIntOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tpu.RequantIntOp, rewriter: PatternRewriter) -> None:
        inner = producer(op.input, tpu.RequantIntOp)
        if inner is None or not only_user_is(inner.output, op):
            return
        if inner.value("round_mode") != op.value("round_mode"):
            return
        middle = QuantParams.of(element(inner.output))
        if covers(middle, QuantParams.of(element(op.output))):
            requant_between(rewriter, op, inner.input, inner)


PATTERNS: list[RewritePattern] = [
    RemoveNoopCast(),
    FoldQuantRoundTrip(),
    DropWideningRoundTrip(),
    MergeRequantInt(),
]
