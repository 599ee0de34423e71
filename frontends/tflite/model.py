"""Reading a `.tflite` flatbuffer into plain Python records.

The `tflite` package's generated classes read the file (no TensorFlow).
Everything here fails with a one-line `TpucError` naming the file and the
tensor or op at fault, before any IR is built. Only the first subgraph is
read: TFLite's interpreter runs subgraph 0 as the model and the others only
as bodies of control-flow ops (WHILE, IF, CALL_ONCE), which tpuc does not
convert; a file with more subgraphs is refused (see docs/frontends-tflite.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tpuc.base.errors import TpucError

# TFLite TensorType -> numpy dtype (the types a constant or input can have)
DTYPES: dict[int, Any] = {
    0: np.float32,
    1: np.float16,
    2: np.int32,
    3: np.uint8,
    4: np.int64,
    6: np.bool_,
    7: np.int16,
    9: np.int8,
    10: np.float64,
    12: np.uint64,
    15: np.uint32,
    16: np.uint16,
}
TYPE_NAMES = {
    0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING", 6: "BOOL",
    7: "INT16", 8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 17: "INT4",
}  # fmt: skip


@dataclass
class TTensor:
    """One tensor of the subgraph; `data` is its constant value (dense,
    in the file's dtype and NHWC layout), None for an activation."""

    index: int
    name: str
    shape: tuple[int, ...]
    type: int
    data: np.ndarray | None
    scales: np.ndarray | None = None
    zero_points: np.ndarray | None = None
    quantized_dimension: int = 0

    @property
    def type_name(self) -> str:
        return TYPE_NAMES.get(self.type, str(self.type))

    @property
    def quantized(self) -> bool:
        return self.scales is not None and self.scales.size > 0


@dataclass
class TOperator:
    """One operator: its builtin op name (or `CUSTOM:<code>`), tensor
    indices (-1 for an absent optional input) and decoded options."""

    index: int
    op: str
    inputs: list[int]
    outputs: list[int]
    options: Any = None
    custom_code: str | None = None
    custom_options: bytes = b""

    @property
    def label(self) -> str:
        return f"#{self.index} {self.op}"


@dataclass
class TModel:
    path: str
    tensors: list[TTensor]
    operators: list[TOperator]
    inputs: list[int]
    outputs: list[int]
    subgraph_count: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    def tensor(self, index: int) -> TTensor:
        return self.tensors[index]


def _builtin_names() -> dict[int, str]:
    from tflite.BuiltinOperator import BuiltinOperator

    return {v: k for k, v in vars(BuiltinOperator).items() if not k.startswith("_")}


def _options_classes() -> dict[int, type]:
    import tflite
    from tflite.BuiltinOptions import BuiltinOptions

    out = {}
    for name, value in vars(BuiltinOptions).items():
        cls = getattr(tflite, name, None)
        if isinstance(cls, type) and hasattr(cls, "Init"):
            out[value] = cls
    return out


def load_tflite(path: str) -> TModel:
    """Parse `path`; a missing, truncated or non-TFLite file is a TpucError."""
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except FileNotFoundError as exc:
        raise TpucError(f"{path}: no such file") from exc
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise TpucError(f"{path}: not a TFLite model (no 'TFL3' flatbuffer identifier)")
    try:
        return _read(path, buf)
    except TpucError:
        raise
    except Exception as exc:  # flatbuffers raises struct.error, IndexError ... on bad offsets
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TpucError(
            f"{path}: not a valid TFLite model (truncated or corrupt: {reason})"
        ) from None


def _read(path: str, buf: bytes) -> TModel:
    from tflite.Model import Model

    model = Model.GetRootAs(buf, 0)
    count = model.SubgraphsLength()
    if count == 0:
        raise TpucError(f"{path}: not a valid TFLite model (no subgraph)")
    if count > 1:
        raise TpucError(
            f"{path}: the model has {count} subgraphs; tpuc converts single-subgraph models "
            "only (control flow: WHILE/IF/CALL_ONCE bodies are not supported)"
        )
    graph = model.Subgraphs(0)
    buffers = [model.Buffers(i) for i in range(model.BuffersLength())]
    tensors = [
        _tensor(path, graph.Tensors(i), i, buffers, buf) for i in range(graph.TensorsLength())
    ]
    names = _builtin_names()
    codes = []
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        code = max(_builtin_code(oc), int(oc.DeprecatedBuiltinCode()))
        custom = oc.CustomCode()
        codes.append((names.get(code, f"BUILTIN_{code}"), custom.decode() if custom else None))
    options = _options_classes()
    ops = [_operator(graph.Operators(i), i, codes, options) for i in range(graph.OperatorsLength())]
    inputs = [int(v) for v in graph.InputsAsNumpy()] if graph.InputsLength() else []
    outputs = [int(v) for v in graph.OutputsAsNumpy()] if graph.OutputsLength() else []
    if not outputs:
        raise TpucError(f"{path}: not a valid TFLite model (the subgraph has no outputs)")
    return TModel(path, tensors, ops, inputs, outputs, count)


def _builtin_code(oc) -> int:
    """The raw `builtin_code` field (int32, vtable slot 3). The `tflite`
    package's BuiltinCode() returns the deprecated int8 field whenever the
    new one is below 127, so an op code written with builtin_code 114
    (QUANTIZE) and deprecated_builtin_code 0, as ai-edge-quantizer writes
    it, would read as ADD; LiteRT takes max(builtin_code, deprecated)."""
    import flatbuffers

    offset = oc._tab.Offset(10)
    if offset == 0:
        return 0
    return int(oc._tab.Get(flatbuffers.number_types.Int32Flags, offset + oc._tab.Pos))


def _operator(op, index: int, codes, options) -> TOperator:
    name, custom = codes[op.OpcodeIndex()]
    if name == "CUSTOM":
        name = f"CUSTOM:{custom}"
    opts = None
    table = op.BuiltinOptions()
    cls = options.get(op.BuiltinOptionsType())
    if table is not None and cls is not None:
        opts = cls()
        opts.Init(table.Bytes, table.Pos)
    inputs = [int(v) for v in op.InputsAsNumpy()] if op.InputsLength() else []
    outputs = [int(v) for v in op.OutputsAsNumpy()] if op.OutputsLength() else []
    raw = bytes(op.CustomOptionsAsNumpy()) if op.CustomOptionsLength() else b""
    return TOperator(index, name, inputs, outputs, opts, custom, raw)


def _tensor(path: str, t, index: int, buffers, buf: bytes) -> TTensor:
    name = t.Name().decode() if t.Name() else f"tensor_{index}"
    shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
    ttype = int(t.Type())
    data = _buffer_bytes(buffers, t.Buffer(), buf)
    array = None
    if data is not None and len(data):
        dtype = DTYPES.get(ttype)
        if dtype is None:
            raise TpucError(
                f"{path}: tensor '{name}' has type {TYPE_NAMES.get(ttype, ttype)}, "
                "which tpuc cannot read"
            )
        flat = np.frombuffer(data, dtype=dtype)
        sparsity = t.Sparsity()
        if sparsity is not None:
            array = densify(path, name, flat, shape, sparsity)
        else:
            if flat.size != int(np.prod(shape, dtype=np.int64)):
                raise TpucError(
                    f"{path}: tensor '{name}' has {flat.size} values, its shape "
                    f"{list(shape)} needs {int(np.prod(shape))}"
                )
            array = flat.reshape(shape).copy()
    tensor = TTensor(index, name, shape, ttype, array)
    q = t.Quantization()
    if q is not None:
        if q.DetailsType() != 0:
            raise TpucError(
                f"{path}: tensor '{name}' has custom quantization details, "
                "which tpuc does not support"
            )
        if q.ScaleLength():
            tensor.scales = q.ScaleAsNumpy().astype(np.float64)
            zps = q.ZeroPointAsNumpy() if q.ZeroPointLength() else np.zeros(q.ScaleLength())
            tensor.zero_points = np.asarray(zps, np.int64)
            tensor.quantized_dimension = int(q.QuantizedDimension())
    return tensor


def _buffer_bytes(buffers, index: int, buf: bytes) -> bytes | None:
    if index <= 0 or index >= len(buffers):
        return None
    b = buffers[index]
    if b.DataLength():
        return b.DataAsNumpy().tobytes()
    offset, size = int(b.Offset()), int(b.Size())
    if offset > 1 and size:  # large models keep buffers after the flatbuffer
        return buf[offset : offset + size]
    return None


def _segments(dm, which: str) -> np.ndarray:
    """A DimensionMetadata's array_segments / array_indices as an int array."""
    from tflite.Int32Vector import Int32Vector
    from tflite.Uint8Vector import Uint8Vector
    from tflite.Uint16Vector import Uint16Vector

    kind = dm.ArraySegmentsType() if which == "segments" else dm.ArrayIndicesType()
    table = dm.ArraySegments() if which == "segments" else dm.ArrayIndices()
    cls = {1: Int32Vector, 2: Uint16Vector, 3: Uint8Vector}.get(kind)
    if cls is None or table is None:
        return np.zeros(0, np.int64)
    vec = cls()
    vec.Init(table.Bytes, table.Pos)
    return vec.ValuesAsNumpy().astype(np.int64) if vec.ValuesLength() else np.zeros(0, np.int64)


def densify(path: str, name: str, values: np.ndarray, shape, sparsity) -> np.ndarray:
    """TFLite's FormatConverter::SparseToDense, vectorized level by level:
    the traversal visits levels in `traversal_order` (dense levels: every
    index; CSR levels: the indices of the segment of the parent position);
    block levels refine the original dim named by `block_map`."""
    rank = len(shape)
    order = [int(v) for v in sparsity.TraversalOrderAsNumpy()]
    block_map = [int(v) for v in sparsity.BlockMapAsNumpy()] if sparsity.BlockMapLength() else []
    levels = [sparsity.DimMetadata(i) for i in range(sparsity.DimMetadataLength())]
    if len(levels) != len(order):
        raise TpucError(f"{path}: tensor '{name}': sparsity metadata does not match its order")
    block_size = [int(levels[rank + i].DenseSize()) for i in range(len(block_map))]
    idx = np.zeros((1, 0), np.int64)
    prev = np.zeros(1, np.int64)
    for dm in levels:
        if dm.Format() == 0:  # DENSE
            size = int(dm.DenseSize())
            reps = np.repeat(np.arange(len(prev)), size)
            pos = np.tile(np.arange(size), len(prev))
            idx = np.concatenate([idx[reps], pos[:, None]], axis=1)
            prev = prev[reps] * size + pos
        else:  # SPARSE_CSR
            seg, ind = _segments(dm, "segments"), _segments(dm, "indices")
            counts = seg[prev + 1] - seg[prev]
            reps = np.repeat(np.arange(len(prev)), counts)
            starts = np.repeat(seg[prev], counts)
            offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            i = starts + offsets
            idx = np.concatenate([idx[reps], ind[i][:, None]], axis=1)
            prev = i
    if len(prev) != values.size:
        raise TpucError(
            f"{path}: tensor '{name}': sparsity metadata names {len(prev)} values, "
            f"the buffer holds {values.size}"
        )
    orig = np.zeros((len(prev), rank), np.int64)
    for level in range(rank):
        orig[:, order[level]] = idx[:, level]
    for level in range(rank, len(order)):
        block = order[level] - rank
        dim = block_map[block]
        orig[:, dim] = orig[:, dim] * block_size[block] + idx[:, level]
    dense = np.zeros(shape, values.dtype)
    dense[tuple(orig.T)] = values
    return dense
