"""Max and average pooling (ONNX semantics, including ceil_mode and
count_include_pad): one vectorised max/add per kernel tap over strided
views of the padded input."""

from __future__ import annotations

import numpy as np

from tpuc.dialects import top
from tpuc.interp.kernels.conv import pad_spatial
from tpuc.interp.kernels.registry import Array, fused_relu, ints, kernel


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


def window_reduce(xp: Array, g: PoolGeometry, ufunc: np.ufunc) -> Array:
    """ufunc-reduce every pooling window of the padded input xp, separably:
    the last axis first (as long contiguous runs), then each outer axis."""
    n = len(g.kernel)
    acc = reduce_last_axis(xp, g.kernel[-1], g.strides[-1], g.out[-1], ufunc)
    for i in range(n - 2, -1, -1):
        axis = acc.ndim - n + i
        k, s, o = g.kernel[i], g.strides[i], g.out[i]
        lead = (slice(None),) * axis
        taps = (acc[(*lead, slice(t, t + (o - 1) * s + 1, s))] for t in range(k))
        result = np.array(next(taps))
        for view in taps:
            ufunc(result, view, out=result)
        acc = result
    return acc


def reduce_last_axis(xp: Array, k: int, s: int, o: int, ufunc: np.ufunc) -> Array:
    """Windows of k (stride s) along the last axis, [..., W] -> [..., o].

    Each tap is one flat slice of a contiguous array (rows run into each
    other; the spill-over columns are dropped at the end), so numpy loops over
    long runs instead of one short row at a time. A stride s > 1 first splits
    the axis into s phases so that every tap is unit-stride."""
    width = -(-xp.shape[-1] // s) * s
    if width != xp.shape[-1]:  # equal-width phases; the extra column is never read
        xp = np.concatenate([xp, xp[..., -1:].repeat(width - xp.shape[-1], -1)], axis=-1)
    row = width // s
    phases = [np.ascontiguousarray(xp[..., p::s]).reshape(-1) for p in range(min(s, k))]
    span = phases[0].size - (k - 1) // s
    acc = np.empty(phases[0].size, dtype=xp.dtype)
    first, rest = acc[:span], range(1, k)
    np.copyto(first, phases[0][:span])
    for t in rest:
        ufunc(first, phases[t % s][t // s : t // s + span], out=first)
    return np.ascontiguousarray(acc.reshape(xp.shape[:-1] + (row,))[..., :o])


@kernel(top.MaxPoolOp)
def max_pool(op, args: list[Array]) -> Array:
    x = args[0]
    g = PoolGeometry(op, x)
    spatial = tuple(range(x.ndim - len(g.kernel), x.ndim))
    if g.is_global():
        return fused_relu(op, x.max(axis=spatial, keepdims=True))
    xp = pad_spatial(x, g.begins, g.read_ends, value=-np.inf)
    return fused_relu(op, window_reduce(xp, g, np.maximum))


@kernel(top.AvgPoolOp)
def avg_pool(op, args: list[Array]) -> Array:
    x = args[0]
    g = PoolGeometry(op, x)
    spatial = tuple(range(x.ndim - len(g.kernel), x.ndim))
    if g.is_global():
        mean = x.mean(axis=spatial, keepdims=True, dtype=np.float64)
        return fused_relu(op, mean.astype(np.float32))
    y = window_reduce(pad_spatial(x, g.begins, g.read_ends), g, np.add)
    y /= g.counts(bool(op.value("count_include_pad")))
    return fused_relu(op, y)
