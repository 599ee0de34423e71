"""Add(MatMul, c) with c a constant along the last dim -> the MatMul's bias.

Exporters often emit a Linear layer as MatMul then Add; as a bias the
constant stays exact in INT8 (int32 at the product's scale) instead of being
quantized as a second int8 input.
"""

from __future__ import annotations

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tpuc.dialects import top
from tpuc.dialects.base import shape_of
from tpuc.passes.canonicalize.common import (
    absorb,
    constant,
    is_inline,
    is_none,
    new_weight,
    only_user_is,
    operand_pairs,
    producer,
    set_operand,
)


class AddIntoMatMulBias(RewritePattern):
    roots = (top.AddOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.AddOp, rewriter: PatternRewriter) -> None:
        for x, c in operand_pairs(op):
            matmul = producer(x, top.MatMulOp)
            values = constant(c)
            if matmul is None or values is None or not only_user_is(x, op):
                continue
            shape = shape_of(op.output)
            if matmul.value("do_relu") or not is_none(matmul.bias) or shape != shape_of(x):
                continue
            if not shape or values.size != shape[-1] or values.shape[-1:] != (shape[-1],):
                continue
            bias = new_weight(
                rewriter, matmul, f"{matmul.tensor_name.data}_bias",
                values.reshape(-1).astype("float32"), inline=is_inline(c),
            )  # fmt: skip
            set_operand(rewriter, matmul, 2, bias)
            if op.value("do_relu"):
                matmul.set_value("do_relu", True)
                matmul.set_value("relu_limit", op.value("relu_limit"))
            absorb(rewriter, matmul, op)
            return


PATTERNS: list[RewritePattern] = [AddIntoMatMulBias()]
