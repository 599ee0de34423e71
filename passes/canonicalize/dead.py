"""Dead code: ops whose results nobody reads are erased (unused weights,
folded-away constants, `top.None`), except graph inputs, which keep the
function's interface visible even when a model ignores one."""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from tpuc.dialects import top


class EraseDeadOp(RewritePattern):
    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        if isinstance(op, top.InputOp) or not is_trivially_dead(op):
            return
        rewriter.erase(op)


PATTERNS: list[RewritePattern] = [EraseDeadOp()]
