"""The float kernel registry and the helpers every kernel family shares.

A kernel is `fn(op, args) -> array | tuple[array, ...]`: `args` holds one
numpy array per operand (None for `top.None` operands), attributes are read
with `op.value(...)`. Kernels are registered by op class so the interpreter
dispatches with one dict lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.ir import Operation

from tpuc.registry import Registry

Array = np.ndarray
KernelResult = Array | tuple[Array, ...]
Kernel = Callable[[Any, list[Array | None]], KernelResult]

KERNELS: Registry[type[Operation], Kernel] = Registry("float kernels")


def kernel(*op_classes: type[Operation], priority: int = 0) -> Callable[[Kernel], Kernel]:
    """Register `fn` as the float kernel of each op class."""
    return KERNELS.register(*op_classes, priority=priority)


def fused_relu(op: Any, x: Array) -> Array:
    """Apply the op's fused `do_relu`/`relu_limit` in place (x is owned)."""
    if not op.value("do_relu"):
        return x
    return relu(x, op.value("relu_limit"))


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


def f32(x: Any) -> Array:
    """As a float32 array, copying only when needed."""
    return np.asarray(x, dtype=np.float32)


def as_index(x: Array) -> Array:
    """Float-valued integer indices (TOP keeps indices in float32) -> int64."""
    return np.rint(x).astype(np.int64)


def ints(op: Any, key: str, default: Sequence[int] = ()) -> list[int]:
    """An integer-list attribute, or `default` when absent or empty."""
    value = op.value(key)
    return [int(v) for v in value] if value else list(default)


def axis_of(axis: int, rank: int) -> int:
    """A possibly negative axis -> its index in [0, rank)."""
    return axis + rank if axis < 0 else axis
