"""Shape-only ops become one Reshape: Flatten, Squeeze and Unsqueeze with a
static result shape turn into Reshape (as in TPU-MLIR), and a Reshape of a
Reshape reads the original tensor directly."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tpuc.base.registry import Registry
from tpuc.dialects import top
from tpuc.dialects.base import TensorOp, shape_of
from tpuc.passes.canonicalize.common import producer, set_operand

Shape = tuple[int, ...]

RESHAPE_RULES: Registry[type[TensorOp], Callable[[TensorOp, Shape], Shape]] = Registry(
    "reshape rules"
)
"""Op class -> its result shape given the input shape."""


def reshape_rule(kind: type[TensorOp], priority: int = 0):
    return RESHAPE_RULES.register(kind, priority=priority)


def _axes(axes: Sequence[int] | None, rank: int) -> list[int]:
    return sorted(a + rank if a < 0 else a for a in axes or [])


@reshape_rule(top.FlattenOp)
def _flatten(op: TensorOp, shape: Shape) -> Shape:
    rank = len(shape)
    start, end = _axes([op.value("start_dim"), op.value("end_dim")], rank) if rank else (0, 0)
    start, end = (start, end) if start <= end else (end, start)
    return shape[:start] + (math.prod(shape[start : end + 1]),) + shape[end + 1 :]


@reshape_rule(top.SqueezeOp)
def _squeeze(op: TensorOp, shape: Shape) -> Shape:
    axes = _axes(op.value("axes"), len(shape)) or [i for i, d in enumerate(shape) if d == 1]
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@reshape_rule(top.UnsqueezeOp)
def _unsqueeze(op: TensorOp, shape: Shape) -> Shape:
    axes = _axes(op.value("axes"), len(shape) + len(op.value("axes") or []))
    out = list(shape)
    for axis in axes:
        out.insert(axis, 1)
    return tuple(out)


class ShapeOpToReshape(RewritePattern):
    """Flatten / Squeeze / Unsqueeze -> Reshape to the same static shape.
    The result type is kept (shape-infer owns types); only the `shape`
    attribute is computed when the result is not typed yet."""

    @property
    def roots(self) -> tuple[type, ...]:
        """The op classes with a rule in RESHAPE_RULES."""
        return tuple(RESHAPE_RULES)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        rule = RESHAPE_RULES.get(type(op))
        if rule is None:
            return
        out = shape_of(op.results[0])
        if out is None:
            in_shape = shape_of(op.operands[0])
            if in_shape is None:
                return
            out = rule(op, in_shape)
        new = top.ReshapeOp.make(
            [op.operands[0]], op.tensor_name.data, {"shape": list(out)}, [op.results[0].type]
        )
        rewriter.replace(op, [new])


class ReshapeOfReshape(RewritePattern):
    """Reshape(Reshape(x)) -> Reshape(x): the outer shape does not depend on
    the inner one (its -1 resolves from the element count)."""

    roots = (top.ReshapeOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.ReshapeOp, rewriter: PatternRewriter) -> None:
        inner = producer(op.input, top.ReshapeOp)
        if inner is None:
            return
        set_operand(rewriter, op, 0, inner.input)


PATTERNS: list[RewritePattern] = [ShapeOpToReshape(), ReshapeOfReshape()]
