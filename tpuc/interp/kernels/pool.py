"""Max and average pooling (ONNX semantics, including ceil_mode and
count_include_pad) over the kernel library's separable window reduction."""

from __future__ import annotations

import numpy as np

from tpuc.dialects import top
from tpuc.interp.kernels.registry import Array, fused_relu, kernel
from tpuc.kernels.executor import current
from tpuc.kernels.pool_window import padded_input, window_reduce
from tpuc.pool_geometry import PoolGeometry


def geometry(op, x: Array) -> PoolGeometry:
    """The op's pooling geometry for x's shape (computed once per run set)."""
    return current().memo((op, x.shape), lambda: PoolGeometry.of(op, x))


@kernel(top.MaxPoolOp)
def max_pool(op, args: list[Array]) -> Array:
    x = args[0]
    g = geometry(op, x)
    spatial = tuple(range(x.ndim - len(g.kernel), x.ndim))
    if g.is_global():
        return fused_relu(op, x.max(axis=spatial, keepdims=True))
    out = current().empty(x.shape[: x.ndim - len(g.kernel)] + tuple(g.out))
    return fused_relu(op, window_reduce(padded_input(x, g, -np.inf), g, np.maximum, out))


@kernel(top.AvgPoolOp)
def avg_pool(op, args: list[Array]) -> Array:
    x = args[0]
    g = geometry(op, x)
    spatial = tuple(range(x.ndim - len(g.kernel), x.ndim))
    if g.is_global():
        mean = x.mean(axis=spatial, keepdims=True, dtype=np.float64)
        return fused_relu(op, mean.astype(np.float32))
    out = current().empty(x.shape[: x.ndim - len(g.kernel)] + tuple(g.out))
    y = window_reduce(padded_input(x, g, 0.0), g, np.add, out)
    counts = g.counts(bool(op.value("count_include_pad")))
    if counts.min() == counts.max():  # no window overlaps the padding: one divisor
        y /= counts.flat[0]
    else:  # per pixel, as rows of the flattened output (fast for numpy)
        rows = y.reshape(-1, counts.size)
        rows /= counts.reshape(-1)
    return fused_relu(op, y)
