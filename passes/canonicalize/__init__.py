"""TOP canonicalization: TPU-MLIR's graph simplifications, one pattern per
concept, grouped by family in the modules of this package (ReLU fusion,
folds into Conv, scalar-constant forms, reshape chains, identity removal).

Each pattern names the op classes it rewrites (`roots`); those classes
declare `HasCanonicalizationPatterns` in their traits, and the pass asks
each op's trait for its patterns (the ones rooted at its class, in the
order of `top_patterns`), after the dead-op pattern every op gets. Patterns
are imported when first asked for, so registering the pass costs nothing.
TPU modules (after lowering) also get the cast and requant patterns of
`tpu_patterns`.
Weights are read and created through `tpuc.ir.weights`; a pattern never folds
away a tensor that a function returns. Unused `top.Weight` ops (and other
dead pure ops, but not graph inputs) are erased.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriter, RewritePattern
from xdsl.traits import HasCanonicalizationPatternsTrait


def top_patterns() -> list[RewritePattern]:
    """Every pattern rooted at an op class, in the order they are tried
    (dead-op erasure, tried first on every op, is not among them)."""
    from tpuc.passes.canonicalize import (
        const_binary,
        conv_fold,
        identity,
        layer_norm,
        matmul_bias,
        relu,
        reshape,
        scale_fold,
        tpu_patterns,
    )

    return [
        *identity.PATTERNS,
        *reshape.PATTERNS,
        *const_binary.PATTERNS,
        *conv_fold.PATTERNS,
        *scale_fold.PATTERNS,
        *relu.PATTERNS,
        *layer_norm.PATTERNS,
        *matmul_bias.PATTERNS,
        *tpu_patterns.PATTERNS,
    ]


@cache
def patterns_rooted_at(op_class: type[Operation]) -> tuple[RewritePattern, ...]:
    """The patterns that rewrite ops of `op_class`, in `top_patterns` order
    (what its `HasCanonicalizationPatterns` trait returns)."""
    return tuple(p for p in top_patterns() if op_class in p.roots)  # type: ignore[attr-defined]


class OpCanonicalization(RewritePattern):
    """Try the patterns the op's class declares, in order, until one rewrites."""

    def __init__(self) -> None:
        self.appliers: dict[type[Operation], GreedyRewritePatternApplier | None] = {}

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        from tpuc.passes.canonicalize.common import is_requant_point

        if is_requant_point(op):  # a pre-quantized model's requantization stays
            return
        kind = type(op)
        if kind not in self.appliers:
            self.appliers[kind] = _applier(kind)
        applier = self.appliers[kind]
        if applier is not None:
            applier.match_and_rewrite(op, rewriter)


def _applier(kind: type[Operation]) -> GreedyRewritePatternApplier | None:
    """The op class's declared patterns as one applier (None: it has none)."""
    patterns = [
        pattern
        for trait in kind.get_traits_of_type(HasCanonicalizationPatternsTrait)
        for pattern in trait.get_patterns(kind)
    ]
    return GreedyRewritePatternApplier(patterns, dce_enabled=False) if patterns else None


def canonicalize(module: ModuleOp) -> bool:
    """Apply the patterns to a fixpoint; True if the module changed."""
    from xdsl.pattern_rewriter import PatternRewriteWalker

    from tpuc.passes.canonicalize import dead

    applier = GreedyRewritePatternApplier([*dead.PATTERNS, OpCanonicalization()], dce_enabled=False)
    walker = PatternRewriteWalker(applier, apply_recursively=True)
    return walker.rewrite_module(module)


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """Fuse and simplify TOP ops (ReLU into producers, BatchNorm/Scale into
    Conv, reshape chains, identities)."""

    name = "canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        canonicalize(op)
