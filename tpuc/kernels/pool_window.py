"""Pooling windows reduced separably (max or sum), on a `PoolGeometry`:
one vectorised ufunc call per kernel tap and axis over the flat padded
input. Shared by the TOP pooling kernels and the integer average pool."""

from __future__ import annotations

import math

import numpy as np

from tpuc.kernels.arrays import Array
from tpuc.kernels.conv_plan import pad_spatial, padded_shape
from tpuc.kernels.executor import current
from tpuc.kernels.pool_geometry import PoolGeometry


def window_reduce(xp: Array, g: PoolGeometry, ufunc: np.ufunc, out: Array) -> Array:
    """ufunc-reduce every pooling window of the padded input xp into `out`,
    separably, one spatial axis after the other (first to last).

    Along an axis, the window at every position is reduced over the *flat*
    array: tap t is the contiguous slice shifted by t rows of that axis, so
    each ufunc call is one long contiguous loop (numpy is several times
    slower over many short strided rows). Windows that would wrap into the
    next row are computed and dropped: the strided pick of the windows that
    exist (every stride-th start) is a cheap copy into the next buffer."""
    n = len(g.kernel)
    rt = current()
    src = np.ascontiguousarray(xp)
    for i in range(n):
        axis = xp.ndim - n + i
        k, s, o = g.kernel[i], g.strides[i], g.out[i]
        step = math.prod(src.shape[axis + 1 :])
        flat = src.reshape(-1)
        span = flat.size - (k - 1) * step
        red = rt.scratch("pool_taps", src.shape)
        acc = red.reshape(-1)[:span]
        ufunc(flat[:span], flat[step : step + span], out=acc) if k > 1 else np.copyto(
            acc, flat[:span]
        )
        for t in range(2, k):
            ufunc(acc, flat[t * step : t * step + span], out=acc)
        starts = (slice(None),) * axis + (slice(0, (o - 1) * s + 1, s),)
        shape = src.shape[:axis] + (o,) + src.shape[axis + 1 :]
        src = out if i == n - 1 else rt.scratch(f"pool_axis{i % 2}", shape)
        np.copyto(src, red[starts])
    return out


def padded_input(x: Array, g: PoolGeometry, value: float) -> Array:
    """x with the padding the windows read, in a scratch buffer."""
    if not any(g.begins) and not any(g.read_ends):
        return x
    shape = padded_shape(x, g.begins, g.read_ends)
    buf, clean = current().bordered(("pool", *g.begins, *g.read_ends), shape, value)
    return pad_spatial(x, g.begins, g.read_ends, value, out=buf, border=not clean)
