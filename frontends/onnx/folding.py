"""Evaluating ONNX nodes whose inputs are all known at conversion time.

Exporters leave shape arithmetic (Shape -> Gather -> Concat -> Reshape) and
placeholder weights (ConstantOfShape) in graphs; folding them here means the
TOP module only holds real computation. The common small ops run in numpy;
everything else goes through ONNX's reference evaluator on a one-node model,
so folding supports every standard op without a kernel of ours.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from onnx import NodeProto, helper, numpy_helper

from tpuc.base.registry import Registry
from tpuc.frontends.onnx.registry import attr_dict

Folder = Callable[[NodeProto, dict[str, Any], list[Any]], list[np.ndarray]]

FOLDERS: Registry[str, Folder] = Registry("ONNX constant folders")


def folder(*op_types: str, priority: int = 0) -> Callable[[Folder], Folder]:
    """Register a numpy evaluation of each ONNX op type."""
    return FOLDERS.register(*op_types, priority=priority)


def fold_node(node: NodeProto, inputs: Sequence[np.ndarray | None], opsets: dict[str, int]) -> list:
    """Output arrays of `node` (one per output name, None for unnamed)."""
    attrs = attr_dict(node)
    fast = FOLDERS.get(node.op_type)
    if fast is not None and node.domain in ("", "ai.onnx"):
        result = fast(node, attrs, list(inputs))
        if result is not None:
            return result
    return _reference(node, inputs, opsets)


def _reference(
    node: NodeProto, inputs: Sequence[np.ndarray | None], opsets: dict[str, int]
) -> list:
    from onnx.reference import ReferenceEvaluator

    feeds = {n: v for n, v in zip(node.input, inputs, strict=False) if n}
    graph_inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in feeds.items()
    ]
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = helper.make_graph([node], "fold", graph_inputs, outputs)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()]
    )
    model.ir_version = 8
    results = ReferenceEvaluator(model).run(None, feeds)
    it = iter(results)
    return [np.asarray(next(it)) if o else None for o in node.output]


def constant_value(attrs: dict[str, Any]) -> np.ndarray | None:
    """The tensor a Constant node (or ConstantOfShape's `value`) holds."""
    if "value" in attrs:
        return numpy_helper.to_array(attrs["value"])
    if "value_float" in attrs:
        return np.array(attrs["value_float"], np.float32)
    if "value_floats" in attrs:
        return np.array(attrs["value_floats"], np.float32)
    if "value_int" in attrs:
        return np.array(attrs["value_int"], np.int64)
    if "value_ints" in attrs:
        return np.array(attrs["value_ints"], np.int64)
    return None


@folder("Constant")
def _constant(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list | None:
    value = constant_value(attrs)
    return None if value is None else [value]


@folder("ConstantOfShape")
def _constant_of_shape(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list:
    value = constant_value(attrs)
    if value is None:
        value = np.zeros([1], np.float32)
    shape = [int(d) for d in np.asarray(inputs[0]).reshape(-1)]
    return [np.full(shape, value.reshape(-1)[0], dtype=value.dtype)]


@folder("Identity", "Dropout")
def _identity(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list | None:
    if len([o for o in node.output if o]) > 1:
        return None
    return [inputs[0]]


@folder("Unsqueeze")
def _unsqueeze(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list:
    axes = attrs.get("axes")
    if axes is None:
        axes = [int(a) for a in np.asarray(inputs[1]).reshape(-1)]
    data = np.asarray(inputs[0])
    rank = data.ndim + len(axes)
    out = data
    for a in sorted(a % rank for a in axes):
        out = np.expand_dims(out, a)
    return [out]


@folder("Squeeze")
def _squeeze(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list:
    axes = attrs.get("axes")
    if axes is None and len(inputs) > 1 and inputs[1] is not None:
        axes = [int(a) for a in np.asarray(inputs[1]).reshape(-1)]
    data = np.asarray(inputs[0])
    if axes is None:
        return [np.squeeze(data)]
    return [np.squeeze(data, axis=tuple(a % data.ndim for a in axes))]


@folder("Concat")
def _concat(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list:
    arrays = [np.asarray(x) for x in inputs]
    return [np.concatenate(arrays, axis=attrs.get("axis", 0))]


@folder("Gather")
def _gather(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list:
    data = np.asarray(inputs[0])
    axis = attrs.get("axis", 0) % max(data.ndim, 1)
    indices = np.asarray(inputs[1]).astype(np.int64)
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    return [np.take(data, indices, axis=axis)]


@folder("Reshape")
def _reshape(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list:
    data = np.asarray(inputs[0])
    shape = [int(d) for d in np.asarray(inputs[1]).reshape(-1)]
    if not attrs.get("allowzero", 0):
        shape = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return [data.reshape(shape)]


@folder("Transpose")
def _transpose(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list:
    return [np.transpose(np.asarray(inputs[0]), attrs.get("perm"))]


@folder("Cast")
def _cast(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list:
    dtype = helper.tensor_dtype_to_np_dtype(attrs["to"])
    return [np.asarray(inputs[0]).astype(dtype)]


_FLOAT_ARITH = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}


@folder("Add", "Sub", "Mul")
def _arith(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list:
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    return [_FLOAT_ARITH[node.op_type](a, b).astype(np.result_type(a, b))]


@folder("Div")
def _div(node: NodeProto, attrs: dict[str, Any], inputs: list[Any]) -> list | None:
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    if a.dtype.kind != "f":  # integer division truncates in ONNX: leave it to the reference
        return None
    return [(a / b).astype(a.dtype)]
