"""The table of ONNX node converters, keyed by ONNX op_type.

Each family module (nn, elementwise, shape_ops, ...) fills the table with
`@converter("Conv")`; the driver looks nodes up here, so adding an op is one
decorated function and no driver change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tpuc.base.registry import Registry

if TYPE_CHECKING:
    from onnx import NodeProto

    from tpuc.frontends.onnx.converter import OnnxConverter

ConverterFn = Callable[["OnnxConverter", "NodeProto"], None]

CONVERTERS: Registry[str, ConverterFn] = Registry("ONNX converters")


def converter(*op_types: str, priority: int = 0) -> Callable[[ConverterFn], ConverterFn]:
    """Register `fn` as the converter of each ONNX op type given."""
    return CONVERTERS.register(*op_types, priority=priority)


def load_converters() -> Registry[str, ConverterFn]:
    """Import every family module once so that the table is complete."""
    from tpuc.frontends.onnx import (  # noqa: F401
        control,
        elementwise,
        nn,
        reduce,
        resize,
        rnn,
        shape_ops,
    )

    return CONVERTERS


def attr_dict(node: NodeProto) -> dict[str, Any]:
    """A node's attributes as Python values (strings decoded)."""
    from onnx import helper

    out: dict[str, Any] = {}
    for a in node.attribute:
        value = helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode() for v in value]
        out[a.name] = value
    return out
