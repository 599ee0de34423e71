"""Float32 max and average pooling (ONNX semantics, including ceil_mode and
count_include_pad) over the separable window reduction of `pool_window`.
Max pooling only moves values, so it also runs on stored integers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpuc.kernels.arrays import Array, relu
from tpuc.kernels.executor import current
from tpuc.kernels.pool_window import padded_input, window_reduce
from tpuc.kernels.requant import NO_RELU, Relu
from tpuc.pool_geometry import PoolGeometry


@dataclass(frozen=True)
class Pooling:
    """A pooling window: kernel, strides and pads (begins then ends; empty:
    ONNX defaults), ceil_mode, whether averages count the padding, the
    fused ReLU."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...] = ()
    pads: tuple[int, ...] = ()
    ceil_mode: bool = False
    count_include_pad: bool = False
    relu: Relu = NO_RELU

    def geometry(self, x: Array) -> PoolGeometry:
        """The window geometry for x's shape (kept by the executor)."""
        key = ("pool", self.kernel, self.strides, self.pads, self.ceil_mode, x.shape)
        sizes = x.shape[x.ndim - len(self.kernel) :]
        return current().memo(
            key, lambda: PoolGeometry(self.kernel, self.strides, self.pads, self.ceil_mode, sizes)
        )


def fused_relu(p: Pooling, y: Array) -> Array:
    return relu(y, p.relu.limit) if p.relu.on else y


def max_pool(p: Pooling, x: Array) -> Array:
    g = p.geometry(x)
    spatial = tuple(range(x.ndim - len(g.kernel), x.ndim))
    if g.is_global():
        return fused_relu(p, x.max(axis=spatial, keepdims=True))
    out = current().empty(x.shape[: x.ndim - len(g.kernel)] + tuple(g.out))
    return fused_relu(p, window_reduce(padded_input(x, g, -np.inf), g, np.maximum, out))


def avg_pool(p: Pooling, x: Array) -> Array:
    g = p.geometry(x)
    spatial = tuple(range(x.ndim - len(g.kernel), x.ndim))
    if g.is_global():
        mean = x.mean(axis=spatial, keepdims=True, dtype=np.float64)
        return fused_relu(p, mean.astype(np.float32))
    out = current().empty(x.shape[: x.ndim - len(g.kernel)] + tuple(g.out))
    y = window_reduce(padded_input(x, g, 0.0), g, np.add, out)
    counts = g.counts(p.count_include_pad)
    if counts.min() == counts.max():  # no window overlaps the padding: one divisor
        y /= counts.flat[0]
    else:  # per pixel, as rows of the flattened output (fast for numpy)
        rows = y.reshape(-1, counts.size)
        rows /= counts.reshape(-1)
    return fused_relu(p, y)
