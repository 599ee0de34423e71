"""ONNX forms of the TOP kernels, one rule per kernel-library function:
each writes nodes computing what that numpy kernel computes in float32.
Variants whose onnxruntime kernel differs by more than rounding (float64
transcendentals, Pow, ceil-mode pooling windows) are declined and run in
numpy."""

from __future__ import annotations

import numpy as np

from tpuc.interp.ort.graph import GraphBuilder, Tensor, export
from tpuc.kernels import activation, data, elementwise, float_conv, norm, pooling
from tpuc.kernels.requant import Relu

INT64_MAX = np.iinfo(np.int64).max


def _conv_attrs(p: float_conv.ConvAttrs, w: Tensor) -> dict:
    attrs: dict = {"kernel_shape": list(w.shape[2:]), "group": p.group}
    for key, value in (("strides", p.strides), ("dilations", p.dilations), ("pads", p.pads)):
        if value:
            attrs[key] = list(value)
    return attrs


def _names(ins) -> list[str]:
    """Operand names ("" for top.None; trailing ones dropped, as ONNX allows)."""
    names = [t.name if t is not None else "" for t in ins]
    while names and not names[-1]:
        names.pop()
    return names


@export(float_conv.conv)
def conv(p: float_conv.ConvAttrs, g: GraphBuilder, ins, outs) -> bool:
    x, w, *rest = ins
    if w.const is None:
        return False  # MLAS prepacks the filter: keep it a weight
    g.fused("Conv", _names([x, w, *rest]), p.relu, outs[0], **_conv_attrs(p, w))
    return True


@export(float_conv.deconv)
def deconv(p: float_conv.Deconv, g: GraphBuilder, ins, outs) -> bool:
    x, w, *rest = ins
    attrs = _conv_attrs(p.attrs, w)
    if p.output_padding:
        attrs["output_padding"] = list(p.output_padding)
    g.fused("ConvTranspose", _names([x, w, *rest]), p.attrs.relu, outs[0], **attrs)
    return True


@export(float_conv.matmul)
def matmul(p: float_conv.MatMul, g: GraphBuilder, ins, outs) -> bool:
    x, r, *rest = ins
    bias = rest[0] if rest else None
    right = r.name
    if p.right_transpose:
        if r.const is None:
            right = g.fresh()
            perm = list(range(len(r.shape)))
            perm[-2:] = perm[-1], perm[-2]
            g.node("Transpose", [r.name], [right], perm=perm)
        else:
            right = g.const(np.swapaxes(r.const, -1, -2))
    if bias is None:
        g.fused("MatMul", [x.name, right], p.relu, outs[0])
        return True
    product = g.fresh()
    g.node("MatMul", [x.name, right], [product])
    g.fused("Add", [product, bias.name], p.relu, outs[0])
    return True


@export(elementwise.fold)
def fold(p: elementwise.Fold, g: GraphBuilder, ins, outs) -> bool:
    """Left to right, one binary node per operand, as the numpy fold (its
    kinds are ONNX's op names)."""
    if any(t is None for t in ins):
        return False
    names = _names(ins)
    if p.coeff and any(c != 1 for c in p.coeff):
        scaled = []
        for name, c in zip(names, p.coeff, strict=True):
            scaled.append(g.fresh())
            g.node("Mul", [name, g.const(c)], [scaled[-1]])
        names = scaled
    if len(names) == 1:
        g.fused("Identity", names, p.relu, outs[0])
        return True
    acc = names[0]
    for k, name in enumerate(names[1:], start=2):
        last = k == len(names)
        step = outs[0] if last and not p.relu.on else g.fresh()
        g.node(p.kind, [acc, name], [step])
        acc = step
    if p.relu.on:
        g.relu(acc, p.relu, outs[0])
    return True


@export(elementwise.binary)
def binary(p: elementwise.Binary, g: GraphBuilder, ins, outs) -> bool:
    if p.kind not in ("Sub", "Div"):
        return False  # numpy's float32 pow and onnxruntime's differ in the last bits
    g.fused(p.kind, _names(ins), p.relu, outs[0])
    return True


@export(elementwise.const)
def const(p: elementwise.Const, g: GraphBuilder, ins, outs) -> bool:
    c = g.const(np.float32(p.value))
    operands = [c, ins[0].name] if p.reverse else [ins[0].name, c]
    g.fused(p.kind, operands, p.relu, outs[0])
    return True


@export(elementwise.scale)
def scale(p: elementwise.Scale, g: GraphBuilder, ins, outs) -> bool:
    x, s, *rest = ins
    shape = (-1,) + (1,) * (len(x.shape) - 2)
    bias = rest[0] if rest else None
    if bias is None:
        g.fused("Mul", [x.name, g.reshaped(s, shape)], p.relu, outs[0])
        return True
    product = g.fresh()
    g.node("Mul", [x.name, g.reshaped(s, shape)], [product])
    g.fused("Add", [product, g.reshaped(bias, shape)], p.relu, outs[0])
    return True


SAME_NAME = frozenset({"Tanh", "Abs", "Floor", "Ceil", "Sqrt", "HardSwish", "Identity"})
"""Unary kinds without parameters that are the ONNX op of that name (the
same function in float32)."""


@export(activation.unary)
def unary(p: activation.Unary, g: GraphBuilder, ins, outs) -> bool:
    x, out = ins[0].name, outs[0]
    kind = p.kind
    if kind in SAME_NAME:
        g.node(kind, [x], [out])
    elif kind == "Relu":
        g.relu(x, Relu(True, p.alpha), out)
    elif kind == "LeakyRelu":
        g.node("LeakyRelu", [x], [out], alpha=float(p.alpha))
    elif kind == "HardSigmoid":
        g.node("HardSigmoid", [x], [out], alpha=float(p.alpha), beta=float(p.beta))
    elif kind == "Sigmoid" and plain_sigmoid(p):
        g.node("Sigmoid", [x], [out])
    elif kind == "SiLU":
        gate = g.fresh()
        g.node("Sigmoid", [x], [gate])
        g.node("Mul", [x, gate], [out])
    else:
        return False
    return True


def plain_sigmoid(p: activation.Unary) -> bool:
    return p.alpha in (None, 1.0) and p.beta in (None, 0.0) and not p.option


def pool_rule(node: str):
    """The rule writing `node` (MaxPool or AveragePool) for a Pooling record."""

    def rule(p: pooling.Pooling, g: GraphBuilder, ins, outs) -> bool:
        if p.ceil_mode:
            return False  # ceil-mode windows: onnxruntime versions disagree at the edge
        attrs: dict = {"kernel_shape": list(p.kernel)}
        if p.strides:
            attrs["strides"] = list(p.strides)
        if p.pads:
            attrs["pads"] = list(p.pads)
        if node == "AveragePool":
            attrs["count_include_pad"] = int(p.count_include_pad)
        g.fused(node, [ins[0].name], p.relu, outs[0], **attrs)
        return True

    rule.__name__ = f"{node.lower()}_rule"
    return rule


export(pooling.max_pool)(pool_rule("MaxPool"))
export(pooling.avg_pool)(pool_rule("AveragePool"))


@export(data.concat)
def concat(p: data.Concat, g: GraphBuilder, ins, outs) -> bool:
    g.fused("Concat", _names(ins), p.relu, outs[0], axis=p.axis)
    return True


@export(data.reshape)
def reshape(p: data.Reshape, g: GraphBuilder, ins, outs) -> bool:
    """To the declared shape (the record's 0 and -1 already resolved)."""
    g.node("Reshape", [ins[0].name, g.ints(g.shapes[outs[0]])], [outs[0]])
    return True


@export(data.permute)
def permute(p: data.Permute, g: GraphBuilder, ins, outs) -> bool:
    g.node("Transpose", [ins[0].name], [outs[0]], perm=list(p.order))
    return True


@export(data.slice_)
def slice_(p: data.Slice, g: GraphBuilder, ins, outs) -> bool:
    x = ins[0]
    rank = len(x.shape)
    steps = p.steps or (1,) * rank
    if any(s <= 0 for s in steps):
        return False
    starts = p.offset or (0,) * rank
    ends = [INT64_MAX if e is None else e for e in (p.ends or (None,) * rank)]
    axes = list(range(rank))
    operands = [x.name, g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps)]
    g.node("Slice", operands, [outs[0]])
    return True


@export(data.upsample)
def upsample(p: data.Upsample, g: GraphBuilder, ins, outs) -> bool:
    """Nearest with integer scales: output pixel i reads floor(i / scale)."""
    x = ins[0]
    scales = [1.0] * (len(x.shape) - 2) + [float(p.scale_h), float(p.scale_w)]
    g.node(
        "Resize",
        [x.name, "", g.const(scales)],
        [outs[0]],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    return True


@export(norm.softmax)
def softmax(p: norm.Softmax, g: GraphBuilder, ins, outs) -> bool:
    g.node("LogSoftmax" if p.log else "Softmax", [ins[0].name], [outs[0]], axis=p.axis)
    return True


@export(norm.layer_norm)
def layer_norm(p: norm.LayerNorm, g: GraphBuilder, ins, outs) -> bool:
    x, weight, bias = (list(ins) + [None, None])[:3]
    axis = p.axis % len(x.shape)
    normalized = x.shape[axis:]
    scale = weight.name if weight is not None else g.const(np.ones(normalized))
    operands = [x.name, scale] + ([bias.name] if bias is not None else [])
    g.node("LayerNormalization", operands, [outs[0]], axis=axis, epsilon=p.eps)
    return True


@export(norm.lrn)
def lrn(p: norm.LRN, g: GraphBuilder, ins, outs) -> bool:
    g.node("LRN", [ins[0].name], [outs[0]], size=p.size, alpha=p.alpha, beta=p.beta, bias=p.bias)
    return True
