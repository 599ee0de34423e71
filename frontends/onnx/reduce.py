"""Reductions: Reduce*, ArgMax/ArgMin and TopK.

Axes come from the attribute (older opsets) or a constant input (ReduceSum
from 13, all reductions from 18); they are stored non-negative and sorted.
"""

from __future__ import annotations

from onnx import NodeProto

from tpuc.dialects import top
from tpuc.frontends.onnx.converter import OnnxConverter
from tpuc.frontends.onnx.elementwise import forward
from tpuc.frontends.onnx.registry import converter
from tpuc.frontends.onnx.shape_ops import const_ints, input_shape


@converter(*top.ReduceOp.MODES)
def convert_reduce(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    attrs = cv.attrs(node)
    rank = len(shape)
    axes = const_ints(cv, node, "axes", 1, "axes")
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            forward(cv, node)
            return
        axes = list(range(rank))
    axes = sorted({a % rank for a in axes})
    keep = bool(attrs.get("keepdims", 1))
    out = [1 if i in axes else d for i, d in enumerate(shape) if keep or i not in axes]
    params = {"axes": axes, "keepdims": keep, "mode": node.op_type}
    cv.emit(top.ReduceOp, [cv.value(node.input[0])], node.output[0], params, shape=out)


@converter("ArgMax", "ArgMin")
def convert_arg(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    attrs = cv.attrs(node)
    axis = int(attrs.get("axis", 0)) % len(shape)
    keep = bool(attrs.get("keepdims", 1))
    out = [1 if i == axis else d for i, d in enumerate(shape) if keep or i != axis]
    params = {
        "axis": axis,
        "keepdims": keep,
        "mode": node.op_type,
        "select_last_index": bool(attrs.get("select_last_index", 0)),
    }
    cv.emit(top.ArgOp, [cv.value(node.input[0])], node.output[0], params, shape=out)


@converter("TopK")
def convert_topk(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    attrs = cv.attrs(node)
    axis = int(attrs.get("axis", -1)) % len(shape)
    k = const_ints(cv, node, "k", 1, "K")
    if not k:
        raise cv.error(node, "K is required")
    out = [k[0] if i == axis else d for i, d in enumerate(shape)]
    names = [
        o or cv.unique_name(f"{node.output[0] or node.name}_{i}") for i, o in enumerate(node.output)
    ]
    params = {
        "axis": axis,
        "K": k[0],
        "largest": bool(attrs.get("largest", 1)),
        "sorted": bool(attrs.get("sorted", 1)),
    }
    x = cv.value(node.input[0])
    cv.emit(top.TopKOp, [x], names[0], params, result_names=names, shapes=[out, out])
