"""Build small `.tflite` files with the `tflite` package's generated
flatbuffer builders (no TensorFlow): the per-op suite's models and the bad
inputs of the frontend tests.

    data = build(tensors, ops, inputs=[0], outputs=[2])

`tensors`: T(name, shape, data=None, type=FLOAT32); `ops`: Op(name,
inputs, outputs, options=("Conv2DOptions", {"Padding": 0, ...})) or
Op("CUSTOM", ..., custom="Name", custom_options=b"...").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import flatbuffers
import numpy as np
import tflite
from tflite.BuiltinOperator import BuiltinOperator
from tflite.BuiltinOptions import BuiltinOptions

FLOAT32, FLOAT16, INT32, UINT8, INT8 = 0, 1, 2, 3, 9
NP_TYPES = {np.dtype(np.float32): FLOAT32, np.dtype(np.float16): FLOAT16,
            np.dtype(np.int32): INT32, np.dtype(np.uint8): UINT8,
            np.dtype(np.int8): INT8}  # fmt: skip


@dataclass
class T:
    name: str
    shape: list[int]
    data: np.ndarray | None = None
    type: int | None = None
    scale: list[float] | None = None  # quantization: one (per tensor) or per axis
    zero_point: list[int] | None = None
    quantized_dimension: int = 0
    custom_details: bytes = b""  # a CustomQuantization `details` table with these bytes


@dataclass
class Op:
    name: str
    inputs: list[int]
    outputs: list[int]
    options: tuple[str, dict] | None = None
    custom: str | None = None
    custom_options: bytes = b""
    extra: dict = field(default_factory=dict)


def _vector(b, start_fn, values, prepend) -> int:
    start_fn(b, len(values))
    for v in reversed(values):
        prepend(v)
    return b.EndVector()


def _options(b, options) -> tuple[int, int]:
    cls, fields = options
    getattr(tflite, f"{cls}Start")(b)
    for key, value in fields.items():
        getattr(tflite, f"{cls}Add{key}")(b, value)
    return getattr(BuiltinOptions, cls), getattr(tflite, f"{cls}End")(b)


def build(
    tensors: list[T],
    ops: list[Op],
    inputs: list[int],
    outputs: list[int],
    subgraphs: int = 1,
    deprecated_codes_only: bool = False,
    new_codes_only: bool = False,
) -> bytes:
    """The flatbuffer bytes of a one-subgraph model (repeated `subgraphs`
    times to make a multi-subgraph file). `new_codes_only`: the deprecated
    code left 0, as ai-edge-quantizer writes the ops it adds."""
    b = flatbuffers.Builder(1024)
    buffers = [0]  # buffer 0: the empty sentinel
    buffer_data: list[bytes] = [b""]
    tensor_buffers = []
    for t in tensors:
        if t.data is None:
            tensor_buffers.append(0)
            continue
        buffer_data.append(np.ascontiguousarray(t.data).tobytes())
        tensor_buffers.append(len(buffer_data) - 1)
    buffers = []
    for raw in buffer_data:
        data = b.CreateByteVector(raw) if raw else None
        tflite.BufferStart(b)
        if data is not None:
            tflite.BufferAddData(b, data)
        buffers.append(tflite.BufferEnd(b))
    codes: list[tuple[str, str | None]] = []
    for op in ops:
        if (op.name, op.custom) not in codes:
            codes.append((op.name, op.custom))
    code_offsets = []
    for name, custom in codes:
        value = getattr(BuiltinOperator, name)
        custom_off = b.CreateString(custom) if custom else None
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, 0 if new_codes_only else min(value, 127))
        if not deprecated_codes_only:
            tflite.OperatorCodeAddBuiltinCode(b, value)
        if custom_off is not None:
            tflite.OperatorCodeAddCustomCode(b, custom_off)
        tflite.OperatorCodeAddVersion(b, 1)
        code_offsets.append(tflite.OperatorCodeEnd(b))
    graphs = [
        _subgraph(b, tensors, tensor_buffers, ops, codes, inputs, outputs) for _ in range(subgraphs)
    ]
    codes_vec = _vector(
        b, tflite.ModelStartOperatorCodesVector, code_offsets, b.PrependUOffsetTRelative
    )
    graphs_vec = _vector(b, tflite.ModelStartSubgraphsVector, graphs, b.PrependUOffsetTRelative)
    buffers_vec = _vector(b, tflite.ModelStartBuffersVector, buffers, b.PrependUOffsetTRelative)
    desc = b.CreateString("tpuc test model")
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, codes_vec)
    tflite.ModelAddSubgraphs(b, graphs_vec)
    tflite.ModelAddDescription(b, desc)
    tflite.ModelAddBuffers(b, buffers_vec)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _subgraph(b, tensors, tensor_buffers, ops, codes, inputs, outputs) -> int:
    tensor_offsets = []
    for t, buf in zip(tensors, tensor_buffers, strict=True):
        name = b.CreateString(t.name)
        shape = _vector(b, tflite.TensorStartShapeVector, list(t.shape), b.PrependInt32)
        quant = _quantization(b, t) if t.scale is not None else None
        ttype = (
            t.type
            if t.type is not None
            else (NP_TYPES[np.asarray(t.data).dtype] if t.data is not None else FLOAT32)
        )
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape)
        tflite.TensorAddType(b, ttype)
        tflite.TensorAddBuffer(b, buf)
        tflite.TensorAddName(b, name)
        if quant is not None:
            tflite.TensorAddQuantization(b, quant)
        tensor_offsets.append(tflite.TensorEnd(b))
    op_offsets = []
    for op in ops:
        ins = _vector(b, tflite.OperatorStartInputsVector, op.inputs, b.PrependInt32)
        outs = _vector(b, tflite.OperatorStartOutputsVector, op.outputs, b.PrependInt32)
        opts = _options(b, op.options) if op.options else None
        custom = b.CreateByteVector(op.custom_options) if op.custom_options else None
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, codes.index((op.name, op.custom)))
        tflite.OperatorAddInputs(b, ins)
        tflite.OperatorAddOutputs(b, outs)
        if opts is not None:
            tflite.OperatorAddBuiltinOptionsType(b, opts[0])
            tflite.OperatorAddBuiltinOptions(b, opts[1])
        if custom is not None:
            tflite.OperatorAddCustomOptions(b, custom)
        op_offsets.append(tflite.OperatorEnd(b))
    t_vec = _vector(b, tflite.SubGraphStartTensorsVector, tensor_offsets, b.PrependUOffsetTRelative)
    i_vec = _vector(b, tflite.SubGraphStartInputsVector, inputs, b.PrependInt32)
    o_vec = _vector(b, tflite.SubGraphStartOutputsVector, outputs, b.PrependInt32)
    op_vec = _vector(b, tflite.SubGraphStartOperatorsVector, op_offsets, b.PrependUOffsetTRelative)
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, t_vec)
    tflite.SubGraphAddInputs(b, i_vec)
    tflite.SubGraphAddOutputs(b, o_vec)
    tflite.SubGraphAddOperators(b, op_vec)
    return tflite.SubGraphEnd(b)


def _quantization(b, t: T) -> int:
    scales = _vector(
        b, tflite.QuantizationParametersStartScaleVector, list(t.scale), b.PrependFloat32
    )
    zps = _vector(
        b,
        tflite.QuantizationParametersStartZeroPointVector,
        list(t.zero_point or [0] * len(t.scale)),
        b.PrependInt64,
    )
    details = 0
    if t.custom_details:
        data = _vector(
            b, tflite.CustomQuantizationStartCustomVector, list(t.custom_details), b.PrependUint8
        )
        tflite.CustomQuantizationStart(b)
        tflite.CustomQuantizationAddCustom(b, data)
        details = tflite.CustomQuantizationEnd(b)
    tflite.QuantizationParametersStart(b)
    if details:
        tflite.QuantizationParametersAddDetailsType(
            b, tflite.QuantizationDetails.CustomQuantization
        )
        tflite.QuantizationParametersAddDetails(b, details)
    tflite.QuantizationParametersAddScale(b, scales)
    tflite.QuantizationParametersAddZeroPoint(b, zps)
    tflite.QuantizationParametersAddQuantizedDimension(b, t.quantized_dimension)
    return tflite.QuantizationParametersEnd(b)


def one_op(
    name: str,
    x_shape: list[int],
    out_shape: list[int],
    consts: list[np.ndarray | None] = (),
    options: tuple[str, dict] | None = None,
    extra_inputs: int = 0,
    x_first: bool = True,
    **kwargs,
) -> bytes:
    """A model of one op: activation input `x` (plus `extra_inputs` more of
    x's shape), then the constants (None: an absent optional input, -1),
    one output `y`."""
    tensors = [T("x", x_shape)] + [T(f"x{i + 1}", x_shape) for i in range(extra_inputs)]
    act = list(range(len(tensors)))
    op_inputs = []
    for i, c in enumerate(consts):
        if c is None:
            op_inputs.append(-1)
            continue
        tensors.append(T(f"c{i}", list(c.shape), c))
        op_inputs.append(len(tensors) - 1)
    tensors.append(T("y", out_shape))
    ins = act + op_inputs if x_first else op_inputs + act
    ops = [Op(name, ins, [len(tensors) - 1], options, **kwargs)]
    return build(tensors, ops, act, [len(tensors) - 1])
