"""Per-channel affine ops after a Conv fold into its filter and bias.

BatchNorm becomes a Scale (y = x*s + b per channel); a Scale, MulConst,
AddConst or an Add of a per-channel constant right after a Conv (which has
no other user and no fused ReLU) is folded into new filter and bias weights:
w' = w*s (per output channel), b' = b*s + t. The Conv takes the folded op's
tensor name and fused ReLU. Old weights become dead and are erased.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from tpuc.dialects import top
from tpuc.dialects.base import TensorOp, shape_of
from tpuc.passes.canonicalize.common import (
    absorb,
    channel_vector,
    constant,
    is_inline,
    is_none,
    new_weight,
    none_value,
    only_user_is,
    operand_pairs,
    producer,
    relu_attrs,
    set_operand,
    take_relu,
)


def foldable_conv(value: SSAValue, user: TensorOp) -> top.ConvOp | None:
    """The Conv defining `value` if `user` alone reads it and its filter and
    bias are constants; a Conv with a fused ReLU cannot take more."""
    conv = producer(value, top.ConvOp)
    if conv is None or conv.value("do_relu") or not only_user_is(conv.output, user):
        return None
    if constant(conv.filter) is None:
        return None
    if not is_none(conv.bias) and constant(conv.bias) is None:
        return None
    return conv


def per_out_channel(values: np.ndarray, channels: int) -> np.ndarray | None:
    """A scalar or one value per output channel, as a vector of `channels`."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    if flat.size not in (1, channels):
        return None
    return np.broadcast_to(flat, (channels,)).copy()


def fold_into_conv(
    rewriter: PatternRewriter,
    conv: top.ConvOp,
    absorbed: TensorOp,
    scale: np.ndarray,
    shift: np.ndarray,
) -> None:
    """conv(x)*scale + shift (per output channel) as one Conv named like
    `absorbed`, which it replaces."""
    filt = constant(conv.filter)
    assert filt is not None
    channels = filt.shape[0]
    scale_v = per_out_channel(scale, channels)
    shift_v = per_out_channel(shift, channels)
    if scale_v is None or shift_v is None:
        return
    name = absorbed.tensor_name.data
    inline = is_inline(conv.filter)
    if np.any(scale_v != 1):
        new_filter = filt * scale_v.reshape((channels,) + (1,) * (filt.ndim - 1))
        value = new_weight(rewriter, conv, f"{name}_filter", new_filter, inline)
        set_operand(rewriter, conv, 1, value)
    has_bias = not is_none(conv.bias)
    if has_bias or np.any(shift_v != 0):
        bias = constant(conv.bias) if has_bias else np.zeros(channels)
        assert bias is not None
        new_bias = (bias.reshape(-1) * scale_v + shift_v).reshape(bias.shape)
        value = new_weight(rewriter, conv, f"{name}_bias", new_bias, inline)
        set_operand(rewriter, conv, 2, value)
    take_relu(conv, absorbed)
    absorb(rewriter, conv, absorbed)


class BatchNormToScale(RewritePattern):
    """BatchNorm -> Scale with s = gamma/sqrt(var+eps), b = beta - mean*s
    (a Scale after a Conv then folds into it)."""

    roots = (top.BatchNormOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.BatchNormOp, rewriter: PatternRewriter) -> None:
        mean, var = constant(op.mean), constant(op.variance)
        if mean is None or var is None:
            return
        gamma = np.ones_like(mean) if is_none(op.gamma) else constant(op.gamma)
        beta = np.zeros_like(mean) if is_none(op.beta) else constant(op.beta)
        if gamma is None or beta is None:
            return
        scale = gamma.reshape(-1) / np.sqrt(var.reshape(-1) + float(op.value("epsilon")))
        bias = beta.reshape(-1) - mean.reshape(-1) * scale
        rank = len(shape_of(op.input) or shape_of(op.output) or (1, 1, 1, 1))
        shape = (1, scale.size) + (1,) * (rank - 2)
        name = op.tensor_name.data
        inline = is_inline(op.mean)
        scale_value = new_weight(rewriter, op, f"{name}_scale", scale.reshape(shape), inline)
        bias_value = new_weight(rewriter, op, f"{name}_shift", bias.reshape(shape), inline)
        new = top.ScaleOp.make(
            [op.input, scale_value, bias_value], name, relu_attrs(op), [op.output.type]
        )
        rewriter.replace(op, [new])


class ScaleIntoConv(RewritePattern):
    roots = (top.ScaleOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.ScaleOp, rewriter: PatternRewriter) -> None:
        conv = foldable_conv(op.input, op)
        scale = constant(op.scale)
        shift = np.zeros(1) if is_none(op.bias) else constant(op.bias)
        if conv is None or scale is None or shift is None:
            return
        fold_into_conv(rewriter, conv, op, scale, shift)


class MulConstIntoConv(RewritePattern):
    roots = (top.MulConstOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.MulConstOp, rewriter: PatternRewriter) -> None:
        conv = foldable_conv(op.input, op)
        if conv is None:
            return
        fold_into_conv(rewriter, conv, op, np.array([op.value("const_val")]), np.zeros(1))


class AddConstIntoConv(RewritePattern):
    roots = (top.AddConstOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.AddConstOp, rewriter: PatternRewriter) -> None:
        conv = foldable_conv(op.input, op)
        if conv is None:
            return
        fold_into_conv(rewriter, conv, op, np.ones(1), np.array([op.value("const_val")]))


class AddChannelIntoConv(RewritePattern):
    """Add(conv, c) with c constant per output channel -> conv bias + c."""

    roots = (top.AddOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.AddOp, rewriter: PatternRewriter) -> None:
        for x, c in operand_pairs(op):
            conv = foldable_conv(x, op)
            values = constant(c)
            if conv is None or values is None or shape_of(op.output) != shape_of(x):
                continue
            shift = channel_vector(values, shape_of(op.output))
            if shift is not None:
                fold_into_conv(rewriter, conv, op, np.ones(1), shift)
                return


class MulChannelToScale(RewritePattern):
    """Mul(x, c) with c constant per channel ([C,1,1], [1,C,1,1]) -> Scale."""

    roots = (top.MulOp,)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: top.MulOp, rewriter: PatternRewriter) -> None:
        if len(op.inputs) != 2:
            return
        for x, c in (op.inputs, op.inputs[::-1]):
            values = constant(c)
            if values is None or constant(x) is not None or values.size == 1:
                continue
            out_shape = shape_of(op.output)
            if out_shape != shape_of(x) or channel_vector(values, out_shape) is None:
                continue
            bias = none_value(rewriter, op)
            new = top.ScaleOp.make(
                [x, c, bias], op.tensor_name.data, relu_attrs(op), [op.output.type]
            )
            rewriter.replace(op, [new])
            return


PATTERNS: list[RewritePattern] = [
    BatchNormToScale(),
    MulChannelToScale(),
    ScaleIntoConv(),
    MulConstIntoConv(),
    AddConstIntoConv(),
    AddChannelIntoConv(),
]
