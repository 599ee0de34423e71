"""The float kernel registry and the helpers every kernel family shares.

A kernel is `fn(op, args) -> array | tuple[array, ...]`: `args` holds one
numpy array per operand (None for `top.None` operands). Kernels are
registered by op class so the interpreter dispatches with one dict lookup.
Every TOP kernel is a kernel-library function on a parameter record
(`library(op_class, build, run)`): `build(op)` reads the attributes once
per op and interpreter (the executor's memo), `run(record, *args)` is the
IR-free kernel of `tpuc.kernels`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.ir import Operation

from tpuc.base.registry import Registry
from tpuc.kernels.arrays import Array, axis_of, f32, relu  # noqa: F401  (re-exported)
from tpuc.kernels.data import as_index  # noqa: F401  (re-exported)
from tpuc.kernels.executor import current
from tpuc.kernels.requant import NO_RELU, Relu

KernelResult = Array | tuple[Array, ...]
Kernel = Callable[[Any, list[Array | None]], KernelResult]

KERNELS: Registry[type[Operation], Kernel] = Registry("float kernels")


def kernel(*op_classes: type[Operation], priority: int = 0) -> Callable[[Kernel], Kernel]:
    """Register `fn` as the float kernel of each op class."""
    return KERNELS.register(*op_classes, priority=priority)


def ints(op: Any, key: str, default: Sequence[int] = ()) -> list[int]:
    """An integer-list attribute, or `default` when absent or empty."""
    value = op.value(key)
    return [int(v) for v in value] if value else list(default)


def relu_of(op: Any) -> Relu:
    """The op's fused do_relu / relu_limit as the library's record."""
    if not op.value("do_relu"):
        return NO_RELU
    return Relu(True, op.value("relu_limit"))


Build = Callable[[Any], Any]
Run = Callable[..., KernelResult]

LIBRARY: dict[type[Operation], tuple[Build, Run]] = {}
"""Op class -> (build, run) of the TOP kernels that are kernel-library
functions on parameter records (the TPU data-movement kernels reuse them)."""


def record_of(op: Any, build: Build) -> Any:
    """build(op): the op's parameter record, built once per op and
    interpreter (outside one: every call)."""
    return current().memo(("params", build, op), lambda: build(op))


def library_kernel(build: Build, run: Run) -> Kernel:
    """The kernel running `run(build(op), *args)`."""

    def kernel_(op: Any, args: list[Array | None]) -> KernelResult:
        return run(record_of(op, build), *args)

    kernel_.__doc__ = run.__doc__
    kernel_.__name__ = getattr(run, "__name__", "kernel")
    return kernel_


def library(op_class: type[Operation], build: Build, run: Run) -> None:
    """Register `run(build(op), *args)` as the float kernel of op_class."""
    LIBRARY[op_class] = (build, run)
    kernel(op_class)(library_kernel(build, run))
