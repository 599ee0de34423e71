"""Max and average pooling (ONNX semantics, including ceil_mode and
count_include_pad): separable, one vectorised max/add per kernel tap and
axis over strided views of the padded input."""

from __future__ import annotations

import math

import numpy as np

from tpuc.dialects import top
from tpuc.interp.kernels.conv import pad_spatial, padded_shape
from tpuc.interp.kernels.registry import Array, fused_relu, ints, kernel
from tpuc.interp.kernels.runtime import current


class PoolGeometry:
    """Output sizes and the end padding that ceil_mode may add."""

    def __init__(self, op, x: Array):
        self.kernel = ints(op, "kernel_shape")
        n = len(self.kernel)
        self.strides = ints(op, "strides", [1] * n)
        pads = ints(op, "pads", [0] * (2 * n))
        self.begins, self.ends = pads[:n], pads[n:]
        self.sizes = x.shape[x.ndim - n :]
        ceil = bool(op.value("ceil_mode"))
        self.out = [self.out_size(i, ceil) for i in range(n)]
        self._counts: dict[bool, Array] = {}
        # padding actually read at the end (ceil_mode may need more than `ends`)
        self.read_ends = [
            max(0, (o - 1) * s + k - size - b)
            for o, s, k, size, b in zip(
                self.out, self.strides, self.kernel, self.sizes, self.begins, strict=True
            )
        ]

    def out_size(self, i: int, ceil: bool) -> int:
        span = self.sizes[i] + self.begins[i] + self.ends[i] - self.kernel[i]
        out = (-(-span // self.strides[i]) if ceil else span // self.strides[i]) + 1
        if ceil and (out - 1) * self.strides[i] >= self.sizes[i] + self.begins[i]:
            out -= 1  # the last window must start inside the input or left pad
        return out

    def counts(self, include_pad: bool) -> Array:
        """Number of elements averaged at each output position."""
        cached = self._counts.get(include_pad)
        if cached is None:
            cached = self._counts[include_pad] = self._count(include_pad)
        return cached

    def _count(self, include_pad: bool) -> Array:
        per_axis = []
        for i in range(len(self.kernel)):
            lo_bound = -self.begins[i] if include_pad else 0
            hi_bound = self.sizes[i] + (self.ends[i] if include_pad else 0)
            start = np.arange(self.out[i]) * self.strides[i] - self.begins[i]
            stop = start + self.kernel[i]
            per_axis.append(np.minimum(stop, hi_bound) - np.maximum(start, lo_bound))
        grid = per_axis[0]
        for c in per_axis[1:]:
            grid = np.multiply.outer(grid, c)
        return grid.astype(np.float32)

    def is_global(self) -> bool:
        return (
            list(self.sizes) == self.kernel
            and not any(self.begins)
            and not any(self.ends)
            and all(o == 1 for o in self.out)
        )


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


def geometry(op, x: Array) -> PoolGeometry:
    """The op's pooling geometry for x's shape (computed once per run set)."""
    return current().memo((op, x.shape), lambda: PoolGeometry(op, x))


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
