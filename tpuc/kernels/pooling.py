"""Float32 max and average pooling (ONNX semantics, including ceil_mode and
count_include_pad) over the separable window reduction of `pool_window`.
Max pooling only moves values, so it also runs on stored integers.

`half_global_avg` is BM1684X's F16/BF16 global average pooling, which
rounds to the half type at every step (measured on the vendor's chip model)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpuc.kernels.arrays import Array, relu
from tpuc.kernels.executor import current
from tpuc.kernels.pool_geometry import PoolGeometry
from tpuc.kernels.pool_window import padded_input, window_reduce
from tpuc.kernels.requant import NO_RELU, Relu


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


HALF_LANES = 32  # the chip's global average: 32-element chunks of a plane, as [16, 2]


def half_global_applies(p: Pooling, x: Array) -> bool:
    """Whether `half_global_avg` computes this pooling: a global window over
    at most 32 elements, or over a power of two of them (other sizes above
    32 chunk otherwise on the chip: not measured yet)."""
    g = p.geometry(x)
    n = int(np.prod(x.shape[x.ndim - len(g.kernel) :]))
    return g.is_global() and (n <= HALF_LANES or (n & (n - 1) == 0))


def half_global_avg(p: Pooling, x: Array, rounder: Callable[[Array], Array]) -> Array:
    """BM1684X's F16/BF16 global average pooling, bit for bit (measured on
    the chip model for 3x3, 4x4, 5x5, 8x8 and 16x16 planes): with r the
    rounding to the half type (to nearest even) and s = r(1/n), each element
    becomes r(x·s); the plane, zero-padded to A = ⌈n/32⌉ chunks of 32 and
    viewed as [A, 16, 2], is summed chunk after chunk, then over the 16 rows
    one after another, then its two columns, every sum rounded by r."""
    g = p.geometry(x)
    lead = x.shape[: x.ndim - len(g.kernel)]
    n = int(np.prod(x.shape[len(lead) :]))
    scale = rounder(np.float32(1.0 / n))
    flat = rounder(np.asarray(x, np.float32).reshape(*lead, n) * scale)
    chunks = -(-n // HALF_LANES)
    padded = np.zeros((*lead, chunks * HALF_LANES), np.float32)
    padded[..., :n] = flat
    t = padded.reshape(*lead, chunks, HALF_LANES // 2, 2)
    acc = t[..., 0, :, :]
    for a in range(1, chunks):
        acc = rounder(acc + t[..., a, :, :])
    row = acc[..., 0, :]
    for b in range(1, HALF_LANES // 2):
        row = rounder(row + acc[..., b, :])
    y = rounder(row[..., 0] + row[..., 1]).reshape(*lead, *(1,) * len(g.kernel))
    return fused_relu(p, y.astype(np.float32))
