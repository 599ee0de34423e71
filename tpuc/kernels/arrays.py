"""Array helpers every kernel family shares: the float32 view of an operand
and the ReLU clamp (BLAS-speed, in place), with no IR in sight."""

from __future__ import annotations

from typing import Any

import numpy as np

Array = np.ndarray


def f32(x: Any) -> Array:
    """As a float32 array, copying only when needed."""
    return np.asarray(x, dtype=np.float32)


def relu(x: Array, limit: float | None, out: Array | None = None) -> Array:
    """max(x, 0), capped at `limit` when it is >= 0; into `out` (default: x)."""
    if out is None:
        out = x
    if out.dtype != np.float32:
        return np.clip(x, 0.0, limit if limit is not None and limit >= 0 else None, out=out)
    src, dst = x, out
    if x.flags.c_contiguous and out.flags.c_contiguous:
        src, dst = x.reshape(-1), out.reshape(-1)
    # numpy's max against a scalar is ~4x slower than against an array: use
    # a shared read-only row of zeros (calloc'd pages cost no memory).
    np.maximum(src, _filled(0.0, dst.shape[-1] if dst.ndim else 1), out=dst)
    if limit is not None and limit >= 0:
        np.minimum(dst, _filled(limit, dst.shape[-1] if dst.ndim else 1), out=dst)
    return out


_FILLED: dict[float, Array] = {}


def _filled(value: float, size: int) -> Array:
    """A read-only float32 vector of `size` copies of value (grown on demand)."""
    buf = _FILLED.get(value)
    if buf is None or buf.size < size:
        buf = np.zeros(size, np.float32) if value == 0 else np.full(size, value, np.float32)
        buf.flags.writeable = False
        _FILLED[value] = buf
    return buf[:size]


def axis_of(axis: int, rank: int) -> int:
    """A possibly negative axis -> its index in [0, rank)."""
    return axis + rank if axis < 0 else axis
