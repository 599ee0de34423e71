"""Integer sums over windows or axes with requant: average pooling and
ReduceSum/ReduceMean. The lowering folds each divisor into the multiplier,
so these only sum (q − Z_in) exactly and requantize per tensor."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpuc.kernels.arrays import Array, axis_of
from tpuc.kernels.element import Element
from tpuc.kernels.executor import current
from tpuc.kernels.pool_geometry import PoolGeometry
from tpuc.kernels.pool_window import padded_input, window_reduce
from tpuc.kernels.requant import Requant, centered, requant_output


@dataclass(frozen=True)
class Pool:
    """A pooling window: kernel, strides, pads (begins then ends), ceil_mode."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    pads: tuple[int, ...]
    ceil_mode: bool
    input: Element
    requant: Requant

    def geometry(self, x: Array) -> PoolGeometry:
        """The window geometry for x's shape (kept by the executor)."""
        key = ("pool", self.kernel, self.strides, self.pads, self.ceil_mode, x.shape)
        sizes = x.shape[x.ndim - len(self.kernel) :]
        return current().memo(
            key, lambda: PoolGeometry(self.kernel, self.strides, self.pads, self.ceil_mode, sizes)
        )


@dataclass(frozen=True)
class Reduce:
    """Sum over `axes` (empty: every axis, the ONNX default)."""

    axes: tuple[int, ...]
    keepdims: bool
    input: Element
    requant: Requant


def avg_pool(p: Pool, x: Array) -> Array:
    """Σ_window (q − Z_in), padding contributing 0, requantized per tensor."""
    xc = centered(x, p.input, np.float32)
    g = p.geometry(xc)
    spatial = tuple(range(x.ndim - len(g.kernel), x.ndim))
    if g.is_global():
        acc = xc.sum(axis=spatial, keepdims=True, dtype=np.float64)
    else:
        out = np.empty(x.shape[: x.ndim - len(g.kernel)] + tuple(g.out), np.float32)
        acc = window_reduce(padded_input(xc, g, 0.0), g, np.add, out)  # < 2^24: exact
    return requant_output(p.requant, acc)


def reduce_sum(p: Reduce, x: Array) -> Array:
    """Σ (q − Z_in) over the axes (ReduceSum and ReduceMean)."""
    axes = tuple(sorted({axis_of(a, x.ndim) for a in (p.axes or range(x.ndim))}))
    acc = centered(x, p.input, np.float64).sum(axis=axes, keepdims=p.keepdims)
    return requant_output(p.requant, acc)
