"""ReLU fusion: a trailing ReLU (or a Clip at [0, max], i.e. ReLU6) becomes
`do_relu`/`relu_limit` on the op that produces its input.

The fused op takes the ReLU's tensor name, as TPU-MLIR does: the pre-ReLU
tensor no longer exists and the post-ReLU name stays comparable.

A pre-quantized module (`module.pre_quantized`, set by the TFLite frontend)
keeps a standalone ReLU: there the tensor between producer and ReLU has its
own scale and zero point in the model, and the model's runtime requantizes
twice (to that scale, then to the ReLU's); one fused requantization rounds
differently in about a third of the elements, and the difference grows with
depth. Activations fused in the model itself reach TOP already fused.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from tpuc.base.registry import Registry
from tpuc.dialects import top
from tpuc.dialects.base import TensorOp
from tpuc.dialects.traits import FusesRelu, with_trait
from tpuc.passes.canonicalize.common import (
    absorb,
    is_pre_quantized,
    merged_limit,
    only_user_is,
    producer,
)

FUSES_RELU = with_trait(top.TOP_OPS, FusesRelu)
"""Ops whose kernels apply `do_relu`/`relu_limit` to their output."""

RELU_LIMIT: Registry[type[TensorOp], Callable[[TensorOp], float | None]] = Registry("relu limit")
"""Op class -> the ReLU upper limit it amounts to (None: not a ReLU)."""


def relu_limit_of(kind: type[TensorOp], priority: int = 0):
    return RELU_LIMIT.register(kind, priority=priority)


@relu_limit_of(top.ReluOp)
def _relu(op: TensorOp) -> float | None:
    return float(op.value("relu_limit"))


@relu_limit_of(top.ClipOp)
def _clip(op: TensorOp) -> float | None:
    """Clip(0, max) is ReLU6-style; an absent max leaves it unbounded."""
    low, high = op.value("min"), op.value("max")
    if low is None or low != 0.0:
        return None
    if high is None:
        return -1.0
    return float(high) if high > 0 else None


class FuseRelu(RewritePattern):
    """relu(producer(x)) -> producer(x) {do_relu, relu_limit}."""

    @property
    def roots(self) -> tuple[type, ...]:
        """The op classes with a rule in RELU_LIMIT."""
        return tuple(RELU_LIMIT)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        rule = RELU_LIMIT.get(type(op))
        if rule is None:
            return
        limit = rule(op)
        if limit is None:
            return
        former = producer(op.operands[0], FUSES_RELU)
        if former is None or not only_user_is(former.results[0], op):
            return
        if is_pre_quantized(op):
            return
        if former.value("do_relu"):
            limit = merged_limit(float(former.value("relu_limit")), limit)
        former.set_value("do_relu", True)
        former.set_value("relu_limit", limit)
        absorb(rewriter, former, op)


PATTERNS: list[RewritePattern] = [FuseRelu()]
