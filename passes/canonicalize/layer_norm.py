"""LayerNorm fusion: the decomposed form exporters emit becomes top.LayerNorm.

    d = x − ReduceMean(x, axes);  y = d / Sqrt(ReduceMean(d², axes) + eps)
    [· weight] [+ bias]

with `axes` the trailing dims. One op is faster to interpret, and INT8
lowering runs it whole in float instead of quantizing the variance path
(a tiny, skewed tensor) at every step, as TPU-MLIR's frontend does too.
"""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern
from xdsl.rewriter import InsertPoint

from tpuc.dialects import top
from tpuc.dialects.base import shape_of
from tpuc.passes.canonicalize.common import constant, none_value, only_user_is, producer


def _trailing_mean(op: top.ReduceOp | None, rank: int) -> int | None:
    """The first axis of a keepdims ReduceMean over the trailing dims."""
    if op is None or op.value("mode") != "ReduceMean" or not op.value("keepdims"):
        return None
    axes = sorted(a % rank for a in op.value("axes") or [])
    if not axes or axes != list(range(axes[0], rank)):
        return None
    return axes[0]


def _squared(value, centered) -> bool:
    pow_op = producer(value, top.PowOp)
    if pow_op is not None:
        return pow_op.value("exponent") == 2.0 and pow_op.input == centered
    mul = producer(value, top.MulOp)
    return mul is not None and len(mul.inputs) == 2 and all(v == centered for v in mul.inputs)


def _match(op: top.DivOp):
    """(x, axis, eps, ops to erase) of a decomposed LayerNorm ending in `op`."""
    sub = producer(op.lhs, top.SubOp)
    sqrt = producer(op.rhs, top.SqrtOp)
    add_eps = producer(sqrt.input, top.AddConstOp) if sqrt else None
    var = producer(add_eps.input, top.ReduceOp) if add_eps else None
    if sub is None or var is None or add_eps.value("do_relu"):
        return None
    shape = shape_of(sub.lhs)
    mean = producer(sub.rhs, top.ReduceOp)
    if shape is None or mean is None or mean.input != sub.lhs or shape_of(op.output) != shape:
        return None
    axis = _trailing_mean(mean, len(shape))
    if (
        axis is None
        or axis != _trailing_mean(var, len(shape))
        or not _squared(var.input, sub.output)
    ):
        return None
    square = var.input.owner
    if not (only_user_is(sqrt.output, op) and only_user_is(add_eps.output, sqrt)):
        return None
    if not (only_user_is(var.output, add_eps) and only_user_is(square.results[0], var)):
        return None
    if len(list(sub.output.uses)) != 2 or not only_user_is(mean.output, sub):
        return None
    return sub.lhs, axis, add_eps.value("const_val"), [sqrt, add_eps, var, square, sub, mean]


class FuseLayerNorm(RewritePattern):
    roots = (top.DivOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.DivOp, rewriter: PatternRewriter) -> None:
        found = _match(op)
        if found is None:
            return
        x, axis, eps, dead = found
        shape = shape_of(x)
        none = none_value(rewriter, op)
        norm = top.LayerNormOp.make(
            [x, none, none],
            op.tensor_name.data,
            {"axis": axis, "eps": float(eps), "normalized_shape": list(shape[axis:])},
            [op.output.type],
        )
        rewriter.replace(op, [norm])
        for gone in dead:
            rewriter.erase_op(gone)


def _affine_operand(op, norm: top.LayerNormOp):
    """The constant of Mul/Add(norm, c) when c has the normalized shape."""
    if len(op.inputs) != 2 or op.value("do_relu"):
        return None
    for value, other in (op.inputs, op.inputs[::-1]):
        if value != norm.output or not only_user_is(value, op):
            continue
        data = constant(other)
        normalized = tuple(norm.value("normalized_shape") or ())
        if data is None or not normalized or data.shape[-len(normalized) :] != normalized:
            continue
        if data.ndim <= len(normalized) or all(d == 1 for d in data.shape[: -len(normalized)]):
            return other
    return None


class LayerNormAffine(RewritePattern):
    """LayerNorm · weight → weight operand; then + bias → bias operand."""

    roots = (top.MulOp, top.AddOp)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if not isinstance(op, top.MulOp | top.AddOp) or len(op.inputs) != 2:
            return
        if isinstance(op, top.AddOp) and any(c != 1 for c in op.value("coeff") or []):
            return
        norm = next(
            (producer(v, top.LayerNormOp) for v in op.inputs if producer(v, top.LayerNormOp)), None
        )
        if norm is None:
            return
        index = 1 if isinstance(op, top.MulOp) else 2
        if not isinstance(norm.operands[index].owner, top.NoneOp):
            return
        if isinstance(op, top.MulOp) and not isinstance(norm.operands[2].owner, top.NoneOp):
            return
        value = _affine_operand(op, norm)
        if value is None:
            return
        weight = value.owner
        if weight.is_before_in_block(norm) is False:  # it must dominate the norm
            weight.detach()
            rewriter.insert_op(weight, InsertPoint.before(norm))
        norm.operands[index] = value
        norm.attributes["name"] = op.attributes["name"]
        rewriter.notify_op_modified(norm)
        rewriter.replace(op, [], [norm.output])


PATTERNS: list[RewritePattern] = [FuseLayerNorm(), LayerNormAffine()]
