"""Reading an ONNX graph before conversion: loading, input shapes, the part
of the graph the requested outputs need, static shapes from ONNX's own
inference, and the up-front scan for unsupported ops.

Everything here fails with a one-line `TpucError` naming the file and the
input, tensor or op at fault, before any IR is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import GraphProto, ModelProto, NodeProto, helper

from tpuc.base.errors import TpucError, UnsupportedOpsError

DEFAULT_DOMAINS = ("", "ai.onnx")

# element types stored two to a byte in raw_data
_PACKED_4BIT = {
    getattr(onnx.TensorProto, name)
    for name in ("INT4", "UINT4", "FLOAT4E2M1")
    if hasattr(onnx.TensorProto, name)
}

# Ops whose result is not a function of their inputs: never folded.
NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike"}

# Ops that fold to a constant as soon as their input's shape is static.
SHAPE_OPS = {"Shape", "Size"}


def load_model(path: str) -> ModelProto:
    """`onnx.load` with a one-line error for a missing, truncated or corrupt file."""
    try:
        model = onnx.load(path)
    except FileNotFoundError as exc:
        raise TpucError(f"{path}: no such file") from exc
    except Exception as exc:  # protobuf raises DecodeError and friends
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TpucError(f"{path}: not a valid ONNX model ({reason})") from exc
    if not model.HasField("graph") or not model.graph.output:
        raise TpucError(f"{path}: not a valid ONNX model (no graph or no graph outputs)")
    return model


def tensor_array(tensor: onnx.TensorProto, path: str) -> np.ndarray:
    """The numpy value of an initializer; data that does not match the dims is
    a TpucError naming the tensor (numpy_helper raises a bare ValueError).
    STRING tensors load as object arrays: they fail only if used as a weight."""
    from onnx import numpy_helper

    count = _numel(tensor.dims)
    if tensor.HasField("raw_data"):
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
        packed = tensor.data_type in _PACKED_4BIT
        expected = (count + 1) // 2 if packed else count * itemsize
        if len(tensor.raw_data) != expected:
            raise TpucError(
                f"{path}: initializer '{tensor.name}' has {len(tensor.raw_data)} bytes of data, "
                f"its dims {list(tensor.dims)} need {expected}"
            )
    try:
        return numpy_helper.to_array(tensor)
    except (ValueError, TypeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TpucError(f"{path}: initializer '{tensor.name}' cannot be read ({reason})") from None


def default_opset(model: ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in DEFAULT_DOMAINS:
            return imp.version
    return 1


def graph_inputs(graph: GraphProto) -> list[onnx.ValueInfoProto]:
    """Real inputs: graph inputs that are not initializers (old exporters
    list every weight as an input too)."""
    inits = {t.name for t in graph.initializer}
    return [v for v in graph.input if v.name not in inits]


def _declared_dims(value: onnx.ValueInfoProto) -> list[int | None] | None:
    """Declared dims, None for a dynamic one; None if the rank is unknown."""
    tt = value.type.tensor_type
    if not tt.HasField("shape"):
        return None
    return [
        d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in tt.shape.dim
    ]


def resolve_input_shapes(
    path: str, inputs: Sequence[onnx.ValueInfoProto], input_shapes: Sequence[Sequence[int]] | None
) -> list[list[int]]:
    """The static shape of each graph input: the user's override, else the
    declared shape, which must then be fully static."""
    if input_shapes is not None and len(input_shapes) != len(inputs):
        names = ", ".join(v.name for v in inputs)
        raise TpucError(
            f"{path}: {len(input_shapes)} input shape(s) given for {len(inputs)} graph input(s) "
            f"({names})"
        )
    shapes: list[list[int]] = []
    for i, value in enumerate(inputs):
        declared = _declared_dims(value)
        if input_shapes is not None:
            shape = [int(d) for d in input_shapes[i]]
            if declared is not None and len(declared) != len(shape):
                raise TpucError(
                    f"{path}: input '{value.name}' has rank {len(declared)} but the given "
                    f"shape {shape} has rank {len(shape)}"
                )
            if any(d <= 0 for d in shape):
                raise TpucError(f"{path}: input '{value.name}': shape {shape} must be positive")
            shapes.append(shape)
            continue
        if declared is None or any(d is None for d in declared):
            shown = "?" if declared is None else [d if d is not None else "?" for d in declared]
            raise TpucError(
                f"{path}: input '{value.name}' has dynamic shape {shown}; "
                "pass its shape with --input_shapes"
            )
        shapes.append([int(d) for d in declared])  # type: ignore[arg-type]
    return shapes


def subgraphs(node: NodeProto) -> list[GraphProto]:
    out: list[GraphProto] = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def node_inputs(node: NodeProto) -> list[str]:
    """Explicit inputs plus the outer-scope names its subgraphs read."""
    names = [n for n in node.input if n]
    for g in subgraphs(node):
        names.extend(outer_names(g))
    return names


def outer_names(graph: GraphProto) -> list[str]:
    """Names a subgraph reads from enclosing scopes."""
    local = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    used: list[str] = []
    for node in graph.node:
        used.extend(n for n in node_inputs(node) if n not in local)
        local.update(node.output)
    used.extend(o.name for o in graph.output if o.name not in local)
    return list(dict.fromkeys(used))


def needed_nodes(path: str, graph: GraphProto, outputs: Sequence[str]) -> list[NodeProto]:
    """Nodes the `outputs` depend on, in a topological order."""
    producer: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        for o in node.output:
            if o:
                producer[o] = i
    known = set(producer) | {v.name for v in graph.input} | {t.name for t in graph.initializer}
    unknown = [o for o in outputs if o not in known]
    if unknown:
        raise TpucError(f"{path}: unknown output name(s): {', '.join(unknown)}")
    order: list[int] = []
    state: dict[int, int] = {}  # 1: visiting, 2: done
    for out in outputs:
        _visit(path, graph, producer, out, state, order)
    return [graph.node[i] for i in order]


def _visit(
    path: str,
    graph: GraphProto,
    producer: dict[str, int],
    tensor: str,
    state: dict[int, int],
    order: list[int],
) -> None:
    """Iterative post-order DFS (deep graphs overflow Python's recursion)."""
    start = producer.get(tensor)
    if start is None or state.get(start) == 2:
        return
    stack: list[tuple[int, Iterable[str]]] = [(start, iter(node_inputs(graph.node[start])))]
    state[start] = 1
    while stack:
        index, pending = stack[-1]
        for name in pending:
            dep = producer.get(name)
            if dep is None or state.get(dep) == 2:
                continue
            if state.get(dep) == 1:
                raise TpucError(f"{path}: the graph has a cycle through tensor '{name}'")
            state[dep] = 1
            stack.append((dep, iter(node_inputs(graph.node[dep]))))
            break
        else:
            stack.pop()
            state[index] = 2
            order.append(index)


def op_key(node: NodeProto) -> str:
    return node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"


def scan_unsupported(
    path: str, nodes: Sequence[NodeProto], consts: Iterable[str], converters: dict[str, Any]
) -> None:
    """Raise `UnsupportedOpsError` listing every op type that can be neither
    converted nor folded to a constant."""
    missing: dict[str, list[str]] = {}
    _scan(nodes, set(consts), converters, missing)
    if missing:
        raise UnsupportedOpsError(path, missing)


def _scan(
    nodes: Sequence[NodeProto],
    const: set[str],
    converters: dict[str, Any],
    missing: dict[str, list[str]],
) -> None:
    for node in nodes:
        for g in subgraphs(node):
            inner = const | {t.name for t in g.initializer}
            _scan(list(g.node), inner, converters, missing)
        foldable = node.domain in DEFAULT_DOMAINS and node.op_type not in NONDETERMINISTIC
        inputs_const = all(n in const for n in node_inputs(node))
        folds = foldable and (inputs_const or node.op_type in SHAPE_OPS)
        if folds:
            const.update(o for o in node.output if o)
        if folds or (node.domain in DEFAULT_DOMAINS and node.op_type in converters):
            continue
        missing.setdefault(op_key(node), []).append(node.name or node.output[0])


def infer_onnx_shapes(
    model: ModelProto, shapes: dict[str, list[int]]
) -> dict[str, tuple[int, ...]]:
    """Static shapes ONNX's shape inference finds once the inputs are fixed.
    Runs on a light copy: large initializers and Constant nodes become typed
    inputs (inference only needs their shapes) and stale shapes stored in the
    file are dropped.
    Empty on failure: tpuc's own shape rules take over then."""
    try:
        inferred = onnx.shape_inference.infer_shapes(
            _light_copy(model, shapes), strict_mode=False, data_prop=True
        )
    except Exception:
        return {}
    found: dict[str, tuple[int, ...]] = {}
    _collect_shapes(inferred.graph, found)
    for node in model.graph.node:
        big = _big_constant(node)
        if big is not None:
            found[node.output[0]] = tuple(big.dims)
    return found


def _light_copy(model: ModelProto, shapes: dict[str, list[int]]) -> ModelProto:
    src = model.graph
    graph = onnx.GraphProto(name=src.name)
    outputs = {o.name for o in src.output}
    for node in src.node:  # big Constant nodes (paddle2onnx's weights) become typed inputs too
        big = _big_constant(node)
        if big is None or node.output[0] in outputs:
            graph.node.append(node)
        else:
            graph.input.append(
                onnx.helper.make_tensor_value_info(node.output[0], big.data_type, big.dims)
            )
    graph.output.extend(onnx.helper.make_empty_tensor_value_info(o.name) for o in src.output)
    for value in graph_inputs(src):
        copy = graph.input.add()
        copy.CopyFrom(value)
        if value.name in shapes:
            _set_dims(copy, shapes[value.name])
    for t in src.initializer:
        small = t.data_type != onnx.TensorProto.FLOAT and _numel(t.dims) <= 4096
        if small:
            graph.initializer.append(t)
        else:
            graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    light = onnx.ModelProto(ir_version=max(model.ir_version, 4), graph=graph)
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    return light


def _big_constant(node: NodeProto) -> onnx.TensorProto | None:
    """The value of a Constant node too big for shape inference to need it
    (more than 4096 elements), else None."""
    if node.op_type != "Constant" or node.domain not in DEFAULT_DOMAINS or len(node.output) != 1:
        return None
    for a in node.attribute:
        if a.name == "value" and a.type == onnx.AttributeProto.TENSOR and _numel(a.t.dims) > 4096:
            return a.t
    return None


def _numel(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _set_dims(value: onnx.ValueInfoProto, dims: Sequence[int]) -> None:
    shape = value.type.tensor_type.shape
    del shape.dim[:]
    for d in dims:
        shape.dim.add().dim_value = int(d)


def _collect_shapes(graph: GraphProto, found: dict[str, tuple[int, ...]]) -> None:
    for value in list(graph.value_info) + list(graph.output):
        dims = _declared_dims(value)
        if dims is not None and all(d is not None for d in dims):
            found[value.name] = tuple(dims)  # type: ignore[arg-type]
    for node in graph.node:
        for g in subgraphs(node):
            _collect_shapes(g, found)
