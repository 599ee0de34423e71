"""The native rules: one function per TPU op class, as TPU-MLIR's
`Interfaces/BM1684X/<Op>.cpp` hold one `codegen_global_bm1684x` each.

A rule takes the op and the `NativeContext` and returns the `NativeCall`s
that write it (none for an op that moves no data, such as a reshape that
address-assign made in place). It raises `NotExpressible` for a form the
vendor library cannot run; codegen collects those for every op before it
writes anything. Rules live in files named for op families and register
themselves here when `load_rules` imports them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from xdsl.ir import Operation

from tpuc.base.registry import Registry
from tpuc.passes.native.context import NativeCall, NativeContext

NativeRule = Callable[[Operation, NativeContext], list[NativeCall]]
NATIVE_RULES: Registry[type[Operation], NativeRule] = Registry("native rules")

FAMILIES = (
    "binary", "conv", "matmul", "pool", "active", "cast", "data", "lut", "softmax", "norm",
    "requant", "deconv", "reduce", "select", "resize", "gather", "groupnorm",
)  # fmt: skip


def native_rule(*classes: type[Operation], priority: int = 0) -> Callable[[NativeRule], NativeRule]:
    return NATIVE_RULES.register(*classes, priority=priority)


def load_rules() -> Registry[type[Operation], NativeRule]:
    """The registry, with every family module imported (once)."""
    for family in FAMILIES:
        importlib.import_module(f"tpuc.passes.native.{family}")
    return NATIVE_RULES


__all__ = ["FAMILIES", "NATIVE_RULES", "NativeRule", "load_rules", "native_rule"]
