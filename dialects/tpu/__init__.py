"""The chip-specific TPU dialect (see `ops` for the integer conventions;
`group` and `group_attrs` for layer groups)."""

from __future__ import annotations

from xdsl.ir import Dialect

from tpuc.dialects.tpu.group import GROUP_OPS, GroupOp, LoadOp, StoreOp, YieldOp, layer_ops
from tpuc.dialects.tpu.group_attrs import GROUP_ATTRS, LocalAttr, PadsAttr, ReadAttr, SlicesAttr
from tpuc.dialects.tpu.ops import *  # noqa: F403  (the op classes)
from tpuc.dialects.tpu.ops import ACTIVE_MODES, MIRRORS, TPU_OPS, float_forms

Tpu = Dialect("tpu", [*TPU_OPS, *GROUP_OPS], GROUP_ATTRS)

__all__ = [
    "ACTIVE_MODES",
    "MIRRORS",
    "TPU_OPS",
    "GroupOp",
    "LoadOp",
    "LocalAttr",
    "PadsAttr",
    "ReadAttr",
    "SlicesAttr",
    "StoreOp",
    "Tpu",
    "YieldOp",
    "float_forms",
    "layer_ops",
]
