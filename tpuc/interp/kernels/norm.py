"""Normalizations and softmax.

Statistics are accumulated in float64 so long reductions do not drift from
onnxruntime's results; outputs are float32.
"""

from __future__ import annotations

import numpy as np

from tpuc.dialects import top
from tpuc.interp.kernels.registry import Array, axis_of, f32, fused_relu, kernel
from tpuc.kernels.executor import current


def channel_shape(x: Array) -> tuple[int, ...]:
    """Shape that broadcasts a per-channel vector along axis 1."""
    return (-1,) + (1,) * (x.ndim - 2)


def normalize(x: Array, axes: tuple[int, ...], eps: float) -> Array:
    """(x - mean) / sqrt(var + eps) over `axes`, statistics in float64."""
    xd = x.astype(np.float64)
    mean = xd.mean(axis=axes, keepdims=True)
    xd -= mean
    var = np.mean(xd * xd, axis=axes, keepdims=True)
    xd /= np.sqrt(var + eps)
    return xd


@kernel(top.BatchNormOp)
def batch_norm(op, args: list[Array | None]) -> Array:
    x, mean, var, gamma, beta = args
    shape = channel_shape(x)
    inv = 1.0 / np.sqrt(var.astype(np.float64) + op.value("epsilon"))
    if gamma is not None:
        inv = inv * gamma
    shift = -mean * inv
    if beta is not None:
        shift = shift + beta
    y = np.multiply(x, f32(inv).reshape(shape), out=current().output(x.shape, args, (0,)))
    y += f32(shift).reshape(shape)
    return fused_relu(op, y)


def affine(
    y: Array, weight: Array | None, bias: Array | None, shape: tuple[int, ...] | None
) -> Array:
    """y * weight + bias; `shape` aligns a per-channel vector, None leaves
    numpy's trailing-dims broadcasting (LayerNorm)."""
    if weight is not None:
        y = y * (weight if shape is None else weight.reshape(shape))
    if bias is not None:
        y = y + (bias if shape is None else bias.reshape(shape))
    return f32(y)


@kernel(top.LayerNormOp)
def layer_norm(op, args: list[Array | None]) -> Array:
    x, weight, bias = args
    axis = axis_of(op.value("axis"), x.ndim)
    y = normalize(x, tuple(range(axis, x.ndim)), op.value("eps"))
    return affine(y, weight, bias, None)


@kernel(top.InstanceNormOp)
def instance_norm(op, args: list[Array | None]) -> Array:
    x, weight, bias = args
    y = normalize(x, tuple(range(2, x.ndim)), op.value("eps"))
    return affine(y, weight, bias, channel_shape(x))


@kernel(top.GroupNormOp)
def group_norm(op, args: list[Array | None]) -> Array:
    """Statistics per (batch, group); weight/bias per channel (a per-group
    vector, as in opset-18 GroupNormalization, is repeated over its channels)."""
    x, weight, bias = args
    groups = int(op.value("num_groups"))
    n, c = x.shape[:2]
    grouped = x.reshape(n, groups, -1)
    y = normalize(grouped, (2,), op.value("eps")).reshape(x.shape)
    weight, bias = (per_channel(v, c, groups) for v in (weight, bias))
    return affine(y, weight, bias, channel_shape(x))


def per_channel(v: Array | None, channels: int, groups: int) -> Array | None:
    if v is None or v.size == channels:
        return v
    return np.repeat(v.reshape(groups), channels // groups)


@kernel(top.LRNOp)
def lrn(op, args: list[Array]) -> Array:
    """ONNX LRN: x / (bias + alpha/size * sum of squares over a channel window)^beta."""
    x = args[0]
    size = int(op.value("size"))
    sq = np.square(x.astype(np.float64))
    before = (size - 1) // 2  # ONNX: floor((size-1)/2) before, ceil after
    channels = sq.shape[1]
    padded = np.zeros((sq.shape[0], channels + size - 1) + sq.shape[2:])
    padded[:, before : before + channels] = sq
    window = sum(padded[:, i : i + channels] for i in range(size))
    denom = (op.value("bias") + op.value("alpha") / size * window) ** op.value("beta")
    return f32(x / denom)


@kernel(top.SoftmaxOp)
def softmax(op, args: list[Array]) -> Array:
    x = args[0]
    axis = axis_of(op.value("axis"), x.ndim)
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    total = e.sum(axis=axis, keepdims=True)
    if op.value("log"):
        return f32(shifted - np.log(total))
    e /= total
    return f32(e)
