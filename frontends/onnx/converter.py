"""ONNX model -> TOP module: the driver and the helpers converters use.

`convert_onnx` checks the whole request up front (file, input shapes,
output names, unsupported ops), then walks the needed nodes in order: a node
whose inputs are all known folds to a constant, any other node goes to its
converter in the registry. Constants become `top.Weight` ops only when a
TOP op uses them, once per name, with their bytes in the weights dict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from onnx import GraphProto, ModelProto, NodeProto
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue

from tpuc.base.errors import TpucError
from tpuc.dialects import top
from tpuc.dialects.base import PyValue, TensorOp, shape_of, tensor_type
from tpuc.dialects.top.shape_infer import infer_op_shapes
from tpuc.frontends.builder import ModuleBuilder
from tpuc.frontends.onnx import graph as g
from tpuc.frontends.onnx.folding import fold_node
from tpuc.frontends.onnx.registry import attr_dict, load_converters


def convert_onnx(
    model_path: str,
    model_name: str,
    input_shapes: Sequence[Sequence[int]] | None = None,
    output_names: Sequence[str] | None = None,
    *,
    model: ModelProto | None = None,
) -> tuple[ModuleOp, dict[str, np.ndarray]]:
    """Convert an ONNX file to a TOP_F32 module and its float32 weights.
    `model`: the file already read with `graph.load_model` (big models are
    parsed once per tool run); it is not modified."""
    if model is None:
        model = g.load_model(model_path)
    graph = model.graph
    inputs = g.graph_inputs(graph)
    shapes = g.resolve_input_shapes(model_path, inputs, input_shapes)
    outputs = list(output_names) if output_names else [o.name for o in graph.output]
    nodes = g.needed_nodes(model_path, graph, outputs)
    converters = load_converters()
    g.scan_unsupported(model_path, nodes, _initial_consts(graph), converters)
    onnx_shapes = g.infer_onnx_shapes(
        model, {v.name: s for v, s in zip(inputs, shapes, strict=True)}
    )
    cv = OnnxConverter(model_path, model, onnx_shapes)
    cv.start([(v.name, s) for v, s in zip(inputs, shapes, strict=True)])
    cv.add_initializers(graph)
    cv.convert_nodes(nodes)
    module = cv.finish(model_name, outputs)
    return module, cv.weights


def _initial_consts(graph: GraphProto) -> set[str]:
    return {t.name for t in graph.initializer}


class OnnxConverter(ModuleBuilder):
    """Conversion state: ONNX tensor name -> SSA value or constant array,
    plus the TOP ops built so far."""

    def __init__(self, path: str, model: ModelProto, onnx_shapes: dict[str, tuple[int, ...]]):
        super().__init__(_all_names(model.graph))
        self.path = path
        self.opsets = {imp.domain or "": imp.version for imp in model.opset_import}
        self.opset = g.default_opset(model)
        self.onnx_shapes = onnx_shapes
        self.values: dict[str, SSAValue] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.converters = load_converters()
        self._op_names: set[str] = set()
        self._attrs: dict[int, tuple[NodeProto, dict[str, Any]]] = {}

    # --- building the function -------------------------------------------------

    def start(self, inputs: Sequence[tuple[str, Sequence[int]]]) -> None:
        """One block argument and one `top.Input` per graph input."""
        for name, shape in inputs:
            arg = self.block.insert_arg(tensor_type(shape), len(self.block.args))
            op = top.InputOp.make([arg], self._op_name(name), result_types=[tensor_type(shape)])
            self._append(op)
            self.values[name] = op.results[0]

    def add_initializers(self, graph: GraphProto) -> None:
        for t in graph.initializer:
            self.consts[t.name] = g.tensor_array(t, self.path)

    def convert_nodes(self, nodes: Iterable[NodeProto]) -> None:
        for node in nodes:
            self.convert_node(node)

    def convert_node(self, node: NodeProto) -> None:
        """Fold the node if its inputs are known, else convert it."""
        if self._try_fold(node):
            return
        fn = self.converters.get(node.op_type) if node.domain in g.DEFAULT_DOMAINS else None
        if fn is None:
            raise self.error(node, "cannot fold it: some input is not a constant")
        fn(self, node)

    def _try_fold(self, node: NodeProto) -> bool:
        if node.domain not in g.DEFAULT_DOMAINS or node.op_type in g.NONDETERMINISTIC:
            return False
        if node.op_type in g.SHAPE_OPS:
            return self._fold_shape(node)
        names = list(node.input)
        if g.subgraphs(node) or not all(n == "" or n in self.consts for n in names):
            return False
        inputs = [self.consts[n] if n else None for n in names]
        try:
            results = fold_node(node, inputs, self.opsets)
        except Exception as exc:
            raise self.error(node, f"constant folding failed: {exc}") from exc
        for name, value in zip(node.output, results, strict=False):
            if name and value is not None:
                self.consts[name] = np.asarray(value)
        return True

    def _fold_shape(self, node: NodeProto) -> bool:
        shape = self.shape(node.input[0])
        if shape is None:
            raise self.error(node, f"the shape of '{node.input[0]}' is not static")
        if node.op_type == "Size":
            self.consts[node.output[0]] = np.array(int(np.prod(shape)), np.int64)
            return True
        attrs = self.attrs(node)
        rank = len(shape)
        start, end = attrs.get("start", 0), attrs.get("end", rank)
        start = min(max(start + rank if start < 0 else start, 0), rank)
        end = min(max(end + rank if end < 0 else end, 0), rank)
        self.consts[node.output[0]] = np.array(shape[start:end], np.int64)
        return True

    def finish(self, model_name: str, outputs: Sequence[str]) -> ModuleOp:
        """Return the requested tensors and wrap everything in a module."""
        results = [self.value(name) for name in outputs]
        self._name_outputs(results, outputs)
        return self.module(model_name, results, "ONNX")

    def _name_outputs(self, results: Sequence[SSAValue], outputs: Sequence[str]) -> None:
        """Identity-like forwarding can leave an output produced by an op
        named after another tensor: give the op the output's name."""
        wanted = set(outputs)
        for value, name in zip(results, outputs, strict=True):
            op = value.owner
            if not isinstance(op, TensorOp) or isinstance(op, top.InputOp | top.WeightOp):
                continue
            if op.result_names is not None or op.tensor_name.data in wanted:
                continue
            if name in self._op_names:  # another op holds that name
                continue
            op.attributes["name"] = StringAttr(name)
            self._op_names.add(name)

    def _append(self, op: Operation) -> None:
        self.block.add_op(op)

    # --- helpers for converters ----------------------------------------------------

    def attrs(self, node: NodeProto) -> dict[str, Any]:
        """The node's attributes as Python values (cached: converters and
        folding read them several times)."""
        cached = self._attrs.get(id(node))
        if cached is None or cached[0] is not node:
            # keep `node` alive with its entry, so that its id is not reused
            cached = self._attrs[id(node)] = (node, attr_dict(node))
        return cached[1]

    def error(self, node: NodeProto, message: str) -> TpucError:
        label = node.name or (node.output[0] if node.output else "?")
        return TpucError(f"{self.path}: node '{label}' ({node.op_type}): {message}")

    def const(self, name: str) -> np.ndarray | None:
        """The value of a tensor known at conversion time, else None."""
        return self.consts.get(name) if name else None

    def is_const(self, name: str) -> bool:
        return bool(name) and name in self.consts

    def shape(self, name: str) -> tuple[int, ...] | None:
        """Static shape of a tensor, None when unknown."""
        if name in self.consts:
            return tuple(self.consts[name].shape)
        value = self.values.get(name)
        if value is not None:
            return shape_of(value)
        return self.onnx_shapes.get(name)

    def value(self, name: str) -> SSAValue:
        """The SSA value of a tensor; a constant becomes its `top.Weight`
        the first time; an absent optional input is `top.None`."""
        if not name:
            return self.none()
        found = self.values.get(name)
        if found is not None:
            return found
        if name in self.consts:
            found = self._weight_op(name, self.consts[name])
            self.values[name] = found
            return found
        raise TpucError(f"{self.path}: tensor '{name}' is used before it is defined")

    def weight(self, base: str, array: np.ndarray) -> SSAValue:
        """A new weight derived from a constant (transposed, scaled ...)."""
        return self._weight_op(self.unique_name(base), array)

    def _weight_op(self, name: str, array: np.ndarray) -> SSAValue:
        data = self._float_weight(name, np.asarray(array))
        name = self._op_name(name)
        self.weights[name] = data
        op = top.WeightOp.make([], name, result_types=[tensor_type(data.shape)])
        self._append(op)
        return op.results[0]

    def _float_weight(self, name: str, array: np.ndarray) -> np.ndarray:
        """`array` as float32 (TOP weights are float). Integers must convert
        exactly (|v| <= 2**24 always does); strings and complex numbers have no
        float32 value."""
        if array.dtype.kind in "OSU":
            raise TpucError(
                f"{self.path}: weight '{name}' holds strings; only numeric tensors can be weights"
            )
        if array.dtype.kind not in "biuf":
            raise TpucError(
                f"{self.path}: weight '{name}' has element type {array.dtype}; "
                "only numeric (real) tensors can be weights"
            )
        data = np.asarray(array, dtype=np.float32, order="C")  # 0-d arrays stay 0-d
        if array.dtype.kind in "iu" and array.size:
            with np.errstate(invalid="ignore"):  # 2**63 rounds out of int64's range
                back = data.reshape(-1).astype(array.dtype)
            inexact = np.flatnonzero(back != array.reshape(-1))
            if inexact.size:
                value = array.reshape(-1)[inexact[0]]
                raise TpucError(
                    f"{self.path}: weight '{name}' ({array.dtype}) holds {value}, which "
                    f"float32 cannot represent exactly ({len(inexact)} such value(s))"
                )
        return data

    def bind(self, name: str, value: SSAValue | np.ndarray) -> None:
        """Make ONNX tensor `name` stand for an existing value (forwarding)."""
        if not name:
            return
        if isinstance(value, np.ndarray):
            self.consts[name] = value
        else:
            self.values[name] = value

    def emit(
        self,
        cls: type[TensorOp],
        operands: Sequence[SSAValue],
        name: str,
        attrs: Mapping[str, PyValue] | None = None,
        shape: Sequence[int] | None = None,
        result_names: Sequence[str] | None = None,
        shapes: Sequence[Sequence[int] | None] | None = None,
    ) -> TensorOp:
        """Build a TOP op producing tensor `name` (or `result_names`), with
        static result types from `shape(s)`, ONNX's inference or tpuc's
        shape rules, and bind its results to those tensor names."""
        names = list(result_names) if result_names is not None else [name]
        top_names = [self._op_name(n) for n in names]
        if shapes is None:
            shapes = [shape] if shape is not None else [None] * len(names)
        known = [
            s if s is not None else self.onnx_shapes.get(n)
            for s, n in zip(shapes, names, strict=True)
        ]
        types = [tensor_type(s) for s in known]
        op = cls.make(
            operands,
            top_names[0],
            attrs,
            result_types=types,
            result_names=top_names if result_names is not None else None,
        )
        if any(s is None for s in known):
            _infer(op)
        self._append(op)
        for n, r in zip(names, op.results, strict=True):
            self.values[n] = r
        return op

    def _op_name(self, tensor: str) -> str:
        """The TOP name for ONNX tensor `tensor`: itself, unless an op
        already took it (sibling If branches may reuse names)."""
        if tensor in self._op_names:
            tensor = self.unique_name(tensor)
        self._op_names.add(tensor)
        self._names.add(tensor)
        return tensor

    def emit_temp(
        self,
        cls: type[TensorOp],
        operands: Sequence[SSAValue],
        base: str,
        attrs: Mapping[str, PyValue] | None = None,
        shape: Sequence[int] | None = None,
    ) -> SSAValue:
        """An intermediate op tpuc adds (no ONNX tensor of that name)."""
        name = self.unique_name(base)
        self._op_names.add(name)
        types = [tensor_type(shape)]
        op = cls.make(operands, name, attrs, result_types=types)
        if shape is None:
            _infer(op)
        self._append(op)
        return op.results[0]


def _all_names(graph: GraphProto) -> set[str]:
    names = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        names.update(node.output)
        for sub in g.subgraphs(node):
            names |= _all_names(sub)
    return names


def _infer(op: Operation) -> None:
    """Fill unknown result types with tpuc's shape rules (a TpucError from
    them names an op whose operands do not fit: the model is bad)."""
    infer_op_shapes(op)
