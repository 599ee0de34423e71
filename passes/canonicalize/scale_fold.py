"""Per-channel affine ops after a Scale fold into it.

A BatchNorm followed by a per-channel Mul and Add (densenet121's ONNX export:
BatchNormalization, Mul, Add, Relu) canonicalizes to Scale, Scale, Add: three
ops, three DDR passes and, in INT8, three requantizations. TPU-MLIR folds the
chain into one Scale (one depthwise 1x1 convolution after lowering); so does
this module: Scale(Scale(x, s1, b1), s2, b2) = Scale(x, s1·s2, b1·s2 + b2),
and Add(Scale(x, s, b), c) = Scale(x, s, b + c), as do MulConst and AddConst.
The inner Scale must have no other user and no fused ReLU; the result takes
the outer op's tensor name and ReLU (its calibration threshold stays valid).
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tpuc.dialects import top
from tpuc.dialects.base import TensorOp, shape_of
from tpuc.passes.canonicalize.common import (
    channel_vector,
    constant,
    is_inline,
    is_none,
    new_weight,
    only_user_is,
    operand_pairs,
    producer,
    relu_attrs,
)

Affine = tuple[np.ndarray, np.ndarray]
"""(scale, bias) per channel, float64 vectors."""


def foldable_scale(value: SSAValue, user: TensorOp) -> tuple[top.ScaleOp, Affine] | None:
    """The Scale defining `value` and its (scale, bias) per channel, if `user`
    alone reads it, it has no fused ReLU and its parameters are constants."""
    inner = producer(value, top.ScaleOp)
    if inner is None or inner.value("do_relu") or not only_user_is(inner.output, user):
        return None
    out_shape = shape_of(inner.output)
    raw_scale = constant(inner.scale)
    if raw_scale is None:
        return None
    scale = channel_vector(raw_scale, out_shape)
    if scale is None:
        return None
    bias = np.zeros_like(scale)
    if not is_none(inner.bias):
        raw_bias = constant(inner.bias)
        bias = None if raw_bias is None else channel_vector(raw_bias, out_shape)
        if bias is None:
            return None
    return inner, (scale.astype(np.float64), bias.astype(np.float64))


def replace_with_scale(
    rewriter: PatternRewriter, outer: TensorOp, inner: top.ScaleOp, affine: Affine
) -> None:
    """Replace `outer` by Scale(inner's input, affine) named like `outer`,
    with its ReLU; `inner` becomes dead and is erased by the dead-op pattern."""
    scale, bias = affine
    rank = len(shape_of(outer.output) or (1, 1, 1, 1))
    shape = (1, scale.size) + (1,) * (rank - 2)
    name = outer.tensor_name.data
    inline = is_inline(inner.scale)
    dtype = constant(inner.scale).dtype  # type: ignore[union-attr]
    values = [
        new_weight(rewriter, outer, f"{name}_{part}", array.astype(dtype).reshape(shape), inline)
        for part, array in (("scale", scale), ("shift", bias))
    ]
    new = top.ScaleOp.make([inner.input, *values], name, relu_attrs(outer), [outer.output.type])
    rewriter.replace(outer, [new])


class ScaleIntoScale(RewritePattern):
    """Scale(Scale(x, s1, b1), s2, b2) -> Scale(x, s1·s2, b1·s2 + b2)."""

    roots = (top.ScaleOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.ScaleOp, rewriter: PatternRewriter) -> None:
        found = foldable_scale(op.input, op)
        raw_scale = constant(op.scale)
        if found is None or raw_scale is None:
            return
        inner, (s1, b1) = found
        s2 = channel_vector(raw_scale, shape_of(op.output))
        b2 = np.zeros_like(s1)
        if not is_none(op.bias):
            raw = constant(op.bias)
            b2 = None if raw is None else channel_vector(raw, shape_of(op.output))
        if s2 is None or b2 is None:
            return
        replace_with_scale(rewriter, op, inner, (s1 * s2, b1 * s2 + b2))


class AddChannelIntoScale(RewritePattern):
    """Add(Scale(x, s, b), c) with c constant per channel -> Scale(x, s, b + c)."""

    roots = (top.AddOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.AddOp, rewriter: PatternRewriter) -> None:
        for x, c in operand_pairs(op):
            found = foldable_scale(x, op)
            values = constant(c)
            if found is None or values is None or shape_of(op.output) != shape_of(x):
                continue
            shift = channel_vector(values, shape_of(op.output))
            if shift is None:
                continue
            inner, (s, b) = found
            replace_with_scale(rewriter, op, inner, (s, b + shift))
            return


class MulConstIntoScale(RewritePattern):
    """MulConst(Scale(x, s, b), k) -> Scale(x, s·k, b·k)."""

    roots = (top.MulConstOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.MulConstOp, rewriter: PatternRewriter) -> None:
        found = foldable_scale(op.input, op)
        if found is None:
            return
        inner, (s, b) = found
        k = float(op.value("const_val"))
        replace_with_scale(rewriter, op, inner, (s * k, b * k))


class AddConstIntoScale(RewritePattern):
    """AddConst(Scale(x, s, b), k) -> Scale(x, s, b + k)."""

    roots = (top.AddConstOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.AddConstOp, rewriter: PatternRewriter) -> None:
        found = foldable_scale(op.input, op)
        if found is None:
            return
        inner, (s, b) = found
        replace_with_scale(rewriter, op, inner, (s, b + float(op.value("const_val"))))


PATTERNS: list[RewritePattern] = [
    ScaleIntoScale(),
    AddChannelIntoScale(),
    MulConstIntoScale(),
    AddConstIntoScale(),
]
