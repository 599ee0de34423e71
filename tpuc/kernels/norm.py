"""Float32 normalizations and softmax on records.

Statistics are accumulated in float64 so long reductions do not drift from
onnxruntime's results; outputs are float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpuc.kernels.arrays import Array, axis_of, f32, relu
from tpuc.kernels.executor import current
from tpuc.kernels.requant import NO_RELU, Relu


@dataclass(frozen=True)
class BatchNorm:
    """x · γ/sqrt(var + eps) + (β − mean · γ/sqrt(var + eps)) per channel."""

    eps: float = 1e-5
    relu: Relu = NO_RELU


@dataclass(frozen=True)
class LayerNorm:
    """Statistics over the axes from `axis` on."""

    axis: int = -1
    eps: float = 1e-5


@dataclass(frozen=True)
class InstanceNorm:
    """Statistics per (batch, channel)."""

    eps: float = 1e-5


@dataclass(frozen=True)
class GroupNorm:
    """Statistics per (batch, group)."""

    groups: int
    eps: float = 1e-5


@dataclass(frozen=True)
class LRN:
    """x / (bias + alpha/size · Σ x² over a window of `size` channels)^beta."""

    size: int
    alpha: float = 1e-4
    beta: float = 0.75
    bias: float = 1.0


@dataclass(frozen=True)
class Softmax:
    axis: int
    log: bool = False


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


def batch_norm(
    p: BatchNorm, x: Array, mean: Array, var: Array, gamma: Array | None, beta: Array | None
) -> Array:
    shape = channel_shape(x)
    inv = 1.0 / np.sqrt(var.astype(np.float64) + p.eps)
    if gamma is not None:
        inv = inv * gamma
    shift = -mean * inv
    if beta is not None:
        shift = shift + beta
    args = (x, mean, var, gamma, beta)
    y = np.multiply(x, f32(inv).reshape(shape), out=current().output(x.shape, args, (0,)))
    y += f32(shift).reshape(shape)
    return relu(y, p.relu.limit) if p.relu.on else y


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


def layer_norm(p: LayerNorm, x: Array, weight: Array | None, bias: Array | None) -> Array:
    axis = axis_of(p.axis, x.ndim)
    y = normalize(x, tuple(range(axis, x.ndim)), p.eps)
    return affine(y, weight, bias, None)


def instance_norm(p: InstanceNorm, x: Array, weight: Array | None, bias: Array | None) -> Array:
    y = normalize(x, tuple(range(2, x.ndim)), p.eps)
    return affine(y, weight, bias, channel_shape(x))


def group_norm(p: GroupNorm, x: Array, weight: Array | None, bias: Array | None) -> Array:
    """Statistics per (batch, group); weight/bias per channel (a per-group
    vector, as in opset-18 GroupNormalization, is repeated over its channels)."""
    groups = p.groups
    n, c = x.shape[:2]
    grouped = x.reshape(n, groups, -1)
    y = normalize(grouped, (2,), p.eps).reshape(x.shape)
    weight, bias = (per_channel(v, c, groups) for v in (weight, bias))
    return affine(y, weight, bias, channel_shape(x))


def per_channel(v: Array | None, channels: int, groups: int) -> Array | None:
    if v is None or v.size == channels:
        return v
    return np.repeat(v.reshape(groups), channels // groups)


def lrn(p: LRN, x: Array) -> Array:
    """ONNX LRN: x / (bias + alpha/size * sum of squares over a channel window)^beta."""
    size = p.size
    sq = np.square(x.astype(np.float64))
    before = (size - 1) // 2  # ONNX: floor((size-1)/2) before, ceil after
    channels = sq.shape[1]
    padded = np.zeros((sq.shape[0], channels + size - 1) + sq.shape[2:])
    padded[:, before : before + channels] = sq
    window = sum(padded[:, i : i + channels] for i in range(size))
    denom = (p.bias + p.alpha / size * window) ** p.beta
    return f32(x / denom)


def softmax(p: Softmax, x: Array) -> Array:
    axis = axis_of(p.axis, x.ndim)
    shifted = x - x.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    total = e.sum(axis=axis, keepdims=True)
    if p.log:
        return f32(shifted - np.log(total))
    e /= total
    return f32(e)
