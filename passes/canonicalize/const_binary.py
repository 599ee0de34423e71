"""Binary ops with a one-element constant become their `*Const` forms, and
back-to-back `*Const` ops merge, so later folds see one scalar op."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from tpuc.dialects import top
from tpuc.dialects.base import TensorOp, shape_of
from tpuc.passes.canonicalize.common import (
    constant,
    is_requant_point,
    producer,
    relu_attrs,
    scalar,
    set_operand,
)

CONST_FORM: dict[type[TensorOp], type[TensorOp]] = {
    top.MulOp: top.MulConstOp,
    top.AddOp: top.AddConstOp,
}


class ScalarConstToConstOp(RewritePattern):
    """Mul(x, c) / Add(x, c) with a one-element weight c -> MulConst / AddConst."""

    roots = tuple(CONST_FORM)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        const_kind = CONST_FORM.get(type(op))
        if const_kind is None or len(op.operands) != 2:
            return
        coeff = op.value("coeff") if isinstance(op, top.AddOp) else None
        if coeff is not None and any(c != 1 for c in coeff):
            return
        for x, c in (op.operands, op.operands[::-1]):
            value = scalar(constant(c), shape_of(op.results[0]), x)
            if value is None or constant(x) is not None:
                continue
            attrs = {"const_val": value, **relu_attrs(op)}
            new = const_kind.make([x], op.tensor_name.data, attrs, [op.results[0].type])
            rewriter.replace(op, [new])
            return


MERGE: dict[type[TensorOp], Callable[[float, float], float]] = {
    top.MulConstOp: lambda a, b: a * b,
    top.AddConstOp: lambda a, b: a + b,
}


class MergeConstChain(RewritePattern):
    """MulConst(MulConst(x, a), b) -> MulConst(x, a*b); AddConst likewise.
    The inner op stays if something else reads it."""

    roots = tuple(MERGE)

    def match_and_rewrite(self, op, rewriter: PatternRewriter) -> None:
        merge = MERGE.get(type(op))
        if merge is None:
            return
        inner = producer(op.operands[0], type(op))
        if inner is None or inner.value("do_relu") or is_requant_point(inner):
            return
        combined = merge(float(inner.value("const_val")), float(op.value("const_val")))
        op.set_value("const_val", combined)
        set_operand(rewriter, op, 0, inner.operands[0])


PATTERNS: list[RewritePattern] = [ScalarConstToConstOp(), MergeConstChain()]
