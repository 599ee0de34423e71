"""Ops that leave their input unchanged are removed.

A removed op's tensor name disappears. When that tensor is a function
output it must stay observable, so the op is only removed if the op that
produces its input can take its name over (it has no other user and is not
a graph input or a weight); otherwise it stays.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import TensorType, UnrankedTensorType, f32
from xdsl.ir import OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from tpuc.base.registry import Registry
from tpuc.dialects import top
from tpuc.dialects.base import TensorOp, shape_of
from tpuc.passes.canonicalize.common import absorb, can_absorb_into, is_returned, only_user_is

IDENTITY_RULES: Registry[type[TensorOp], Callable[[TensorOp], bool]] = Registry("identity rules")
"""Op class -> whether this instance returns its input unchanged."""


def identity_when(kind: type[TensorOp], priority: int = 0):
    return IDENTITY_RULES.register(kind, priority=priority)


def _in_shape(op: TensorOp) -> tuple[int, ...] | None:
    return shape_of(op.operands[0])


def _same_static_shape(op: TensorOp) -> bool:
    shape = _in_shape(op)
    return shape is not None and shape == shape_of(op.results[0])


@identity_when(top.PermuteOp)
def _permute(op: TensorOp) -> bool:
    order = op.value("order")
    return order is not None and list(order) == list(range(len(order)))


@identity_when(top.SliceOp)
def _slice(op: TensorOp) -> bool:
    """offset 0, step 1 and an end at or past the last element, on every axis."""
    shape = _in_shape(op)
    offset, ends, steps = op.value("offset"), op.value("ends"), op.value("steps")
    if shape is None or offset is None or ends is None:
        return False
    steps = steps or [1] * len(shape)
    if not len(shape) == len(offset) == len(ends) == len(steps):
        return False
    for dim, start, end, step in zip(shape, offset, ends, steps, strict=True):
        if step != 1 or slice(start, end, step).indices(dim)[:2] != (0, dim):
            return False
    return True


@identity_when(top.PadOp)
def _pad(op: TensorOp) -> bool:
    paddings = op.value("paddings")
    return paddings is not None and all(p == 0 for p in paddings)


@identity_when(top.TileOp)
def _tile(op: TensorOp) -> bool:
    tile = op.value("tile")
    return tile is not None and all(t == 1 for t in tile)


@identity_when(top.ExpandOp)
def _expand(op: TensorOp) -> bool:
    shape, target = _in_shape(op), op.value("shape")
    if shape is None or target is None:
        return _same_static_shape(op)
    try:
        return np.broadcast_shapes(shape, tuple(target)) == shape
    except ValueError:
        return False


@identity_when(top.UpsampleOp)
def _upsample(op: TensorOp) -> bool:
    return op.value("scale_h") == 1 and op.value("scale_w") == 1


@identity_when(top.MulConstOp)
def _mul_one(op: TensorOp) -> bool:
    return op.value("const_val") == 1.0 and not op.value("do_relu")


@identity_when(top.AddConstOp)
def _add_zero(op: TensorOp) -> bool:
    return op.value("const_val") == 0.0 and not op.value("do_relu")


@identity_when(top.CastOp)
def _cast_f32(op: TensorOp) -> bool:
    t = op.operands[0].type
    element = t.element_type if isinstance(t, TensorType | UnrankedTensorType) else None
    return op.value("to") == "F32" and element == f32


@identity_when(top.ReshapeOp)
def _reshape(op: TensorOp) -> bool:
    shape = _in_shape(op)
    target = op.value("shape")
    if shape is not None and target is not None and tuple(target) == shape:
        return True
    return _same_static_shape(op)


class RemoveIdentity(RewritePattern):
    @property
    def roots(self) -> tuple[type, ...]:
        """The op classes with a rule in IDENTITY_RULES."""
        return tuple(IDENTITY_RULES)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        rule = IDENTITY_RULES.get(type(op))
        if rule is None or not rule(op):
            return
        source: SSAValue = op.operands[0]
        if not is_returned(op.results[0]):
            rewriter.replace(op, [], [source])
            return
        if (
            isinstance(source, OpResult)
            and can_absorb_into(source.op)
            and len(source.op.results) == 1
            and only_user_is(source, op)
        ):
            absorb(rewriter, source.op, op)


PATTERNS: list[RewritePattern] = [RemoveIdentity()]
