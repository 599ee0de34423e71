"""TOP canonicalization: TPU-MLIR's graph simplifications, one pattern per
concept, grouped by family in the modules of this package (ReLU fusion,
folds into Conv, scalar-constant forms, reshape chains, identity removal).

Patterns are imported when the pass runs, so registering it costs nothing.
TPU modules (after lowering) also get the cast and requant patterns of
`tpu_patterns`.
Weights are read and created through `tpuc.weights`; a pattern never folds
away a tensor that a function returns. Unused `top.Weight` ops (and other
dead pure ops, but not graph inputs) are erased.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import RewritePattern


def top_patterns() -> list[RewritePattern]:
    """Every TOP canonicalization pattern, in the order they are tried."""
    from tpuc.passes.canonicalize import (
        const_binary,
        conv_fold,
        dead,
        identity,
        layer_norm,
        matmul_bias,
        relu,
        reshape,
        tpu_patterns,
    )

    return [
        *dead.PATTERNS,
        *identity.PATTERNS,
        *reshape.PATTERNS,
        *const_binary.PATTERNS,
        *conv_fold.PATTERNS,
        *relu.PATTERNS,
        *layer_norm.PATTERNS,
        *matmul_bias.PATTERNS,
        *tpu_patterns.PATTERNS,
    ]


def canonicalize(module: ModuleOp) -> bool:
    """Apply the TOP patterns to a fixpoint; True if the module changed."""
    from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker

    applier = GreedyRewritePatternApplier(top_patterns(), dce_enabled=False)
    walker = PatternRewriteWalker(applier, apply_recursively=True)
    return walker.rewrite_module(module)


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """Fuse and simplify TOP ops (ReLU into producers, BatchNorm/Scale into
    Conv, reshape chains, identities)."""

    name = "canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        canonicalize(op)
