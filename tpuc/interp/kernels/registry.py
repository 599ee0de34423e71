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

from tpuc.kernels.arrays import Array, axis_of, f32, relu  # noqa: F401  (re-exported)
from tpuc.registry import Registry

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


def as_index(x: Array) -> Array:
    """Float-valued integer indices (TOP keeps indices in float32) -> int64."""
    return np.rint(x).astype(np.int64)


def ints(op: Any, key: str, default: Sequence[int] = ()) -> list[int]:
    """An integer-list attribute, or `default` when absent or empty."""
    value = op.value(key)
    return [int(v) for v in value] if value else list(default)
