"""Pad, Gather and Arg on engine-level commands (GDMA_FILL + GDMA_MOVE,
GDMA_GATHER, TIU_ARG): the commands one op compiles to, run on a simulated
device, write exactly what the TPU interpreter's kernel computes for the op
(every pad mode, cropping, borders wider than the input; integer and float
gathers with negative indices; ArgMax/ArgMin with keepdims and
select_last_index), the records equal the interpreter's, and bad indices
fail with one line naming the command."""

from __future__ import annotations

import numpy as np
import pytest
from layer_ids import layer_names, tpu_ops
from xdsl.dialects.builtin import TensorType, f16, f32

from tpuc.base.errors import TpucError
from tpuc.dialects import top, tpu
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.interp.tpu_ops import TPU_KERNELS
from tpuc.interp.tpu_ops.float_ops import rounded
from tpuc.ir.core import kind_of
from tpuc.passes.address_assign import set_address
from tpuc.passes.codegen.data_rules import border_runs, border_source
from tpuc.passes.codegen.engine_rules import engine_commands
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import ENGINE_GDMA, ENGINE_TIU
from tpuc.target.runtime.device import Device
from tpuc.target.runtime.engine import CopyStep, EngineStep, engine_step

START = 0x1_0000_0000
OUT = START + 4096
Q = UniformQuantizedType("i8", 0.25, -3)
STORAGE = {"i8": np.int8, "f16": np.float16, "f32": np.float32}


def device() -> Device:
    dev = Device("bm1684x", START, 1 << 20)
    dev.allocate("activations", START, 1 << 16)
    return dev


def source(x: np.ndarray, element, name: str = "x"):
    """A weight of x's shape (its bytes are written to the device by `run`)."""
    return top.WeightOp.make([], name, result_types=[TensorType(element, list(x.shape))]).output


def run(op, inputs: list[np.ndarray], dtype: str) -> tuple[list, np.ndarray]:
    """Compile `op` (operands at START, START + 2048; result at OUT), run its
    commands on a fresh device; (steps, the result's stored values)."""
    dev = device()
    region = dev.regions[0]
    for i, (value, array) in enumerate(zip(op.operands, inputs, strict=True)):
        set_address(value, START + 2048 * i)
        raw = array.reshape(-1).view(np.uint8)
        region.bytes[2048 * i : 2048 * i + raw.size] = raw
    set_address(op.results[0], OUT)
    steps = [engine_step(cmd, dev, f"cmd {i}") for i, cmd in enumerate(engine_commands(op, 0))]
    for step in steps:
        step.run()
    shape = op.results[0].type.get_shape()
    count = int(np.prod(shape))
    width = np.dtype(STORAGE[dtype]).itemsize
    got = region.bytes[OUT - START : OUT - START + count * width].view(STORAGE[dtype])
    return steps, got.reshape(shape)


def interpreter(op, inputs: list[np.ndarray]) -> np.ndarray:
    kernel = TPU_KERNELS.get((type(op), kind_of(op)))
    if kernel is None:  # a float TPU op runs its TOP kernel, rounded
        from tpuc.interp.top_ops import KERNELS

        kernel = rounded(KERNELS[type(op)])
    return np.asarray(kernel(op, [a.astype(np.float32) for a in inputs]))


# --- Pad ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap"])
@pytest.mark.parametrize("size", [1, 2, 3, 5])
@pytest.mark.parametrize("begin, end", [(0, 0), (1, 0), (0, 2), (4, 7), (11, 3)])
def test_border_sources_are_np_pads(mode, size, begin, end):
    """Runs of constant step reproduce np.pad of an index vector."""
    expected = np.pad(np.arange(size), (begin, end), mode=mode)
    got = np.full(begin + size + end, -1)
    got[begin : begin + size] = np.arange(size)
    for first, count, src, step in border_runs(mode, begin, size, end):
        assert step in (-1, 0, 1)
        for k in range(count):
            got[begin + first + k] = src + k * step
    np.testing.assert_array_equal(got, expected)


def test_reflect_of_one_element_repeats_it():
    """np.pad mirrors one element onto itself (its period would be 0)."""
    assert np.pad(np.arange(1), (2, 3), mode="reflect").tolist() == [0] * 6
    assert all(border_source("reflect", u, 1) == 0 for u in range(-3, 4))


PADS = [
    ("constant", [0, 1, 2, 0, 0, 0, 1, 3]),
    ("constant", [0, 0, -1, 2, 0, 1, 0, -2]),  # crop and pad at once
    ("reflect", [0, 0, 2, 3, 0, 0, 1, 2]),
    ("reflect", [0, 1, 5, 7, 0, 0, 4, 9]),  # wider than the input: repeated mirrors
    ("edge", [0, 2, 2, 3, 1, 0, 1, 2]),
    ("wrap", [0, 0, 3, 5, 0, 0, 6, 1]),
    ("edge", [0, 0, 0, 0, 0, 0, 0, 0]),  # no border: one move
]


@pytest.mark.parametrize("mode, paddings", PADS)
@pytest.mark.parametrize("element", ["int8", "f16", "f32"])
def test_pad_equals_the_interpreter(mode, paddings, element):
    rng = np.random.default_rng(sum(paddings) + len(mode))
    if element == "int8":
        x, elem, dtype, val = rng.integers(-128, 128, (1, 2, 3, 4), np.int8), Q, "i8", -7.0
    else:
        dtype = "f16" if element == "f16" else "f32"
        x = rng.standard_normal((1, 2, 3, 4)).astype(STORAGE[dtype])
        elem, val = (f16 if dtype == "f16" else f32), 0.7
    shape = [d + b + e for d, b, e in zip(x.shape, paddings[:4], paddings[4:], strict=True)]
    attrs = dict(paddings=paddings, mode=mode, val=val)
    op = tpu.PadOp.make([source(x, elem)], "y", attrs, result_types=[TensorType(elem, shape)])
    steps, got = run(op, [x], dtype)
    expected = interpreter(op, [x])
    np.testing.assert_array_equal(got.astype(np.float32), expected)
    names = [s.name if isinstance(s, EngineStep) else "GDMA_MOVE" for s in steps]
    assert all(s.command.header.engine == ENGINE_GDMA for s in steps)
    border = any(paddings)
    assert names.count("GDMA_FILL") == (mode == "constant" and any(p > 0 for p in paddings))
    assert names[-1] == "GDMA_MOVE" and (len(names) > 1) == border


def test_fill_rounds_to_the_float_destination():
    """0.7 as f16 (the interpreter's rounded pad), −7 as the stored integer."""
    x = np.zeros((1, 2), np.float16)
    op = tpu.PadOp.make(
        [source(x, f16)], "y", dict(paddings=[0, 1, 0, 1], mode="constant", val=0.7),
        result_types=[TensorType(f16, [1, 4])],
    )  # fmt: skip
    steps, got = run(op, [x], "f16")
    assert steps[0].name == "GDMA_FILL" and steps[0].command.header.kind == 0
    assert got.tolist() == [[0.7001953125, 0.0, 0.0, 0.7001953125]]


# --- Gather ---------------------------------------------------------------------------------------


def _gather_op(x: np.ndarray, element, indices: np.ndarray, axis: int):
    shape = list(np.take(x, indices.astype(np.int64) % x.shape[axis], axis=axis).shape)
    operands = [source(x, element), source(indices, f32, "i")]
    return tpu.GatherOp.make(
        operands, "y", dict(axis=axis), result_types=[TensorType(element, shape)]
    )


@pytest.mark.parametrize("axis, indices", [(0, [-1, 0, 1]), (1, [[-1, 2], [0, -3]]), (-1, [3, -4])])
@pytest.mark.parametrize("element", ["int8", "f16"])
def test_gather_equals_the_interpreter(axis, indices, element):
    from tpuc.kernels import data

    rng = np.random.default_rng(2)
    if element == "int8":
        x, elem, dtype = rng.integers(-128, 128, (2, 3, 4), np.int8), Q, "i8"
    else:
        x, elem, dtype = rng.standard_normal((2, 3, 4)).astype(np.float16), f16, "f16"
    idx = np.array(indices, np.float32)
    op = _gather_op(x, elem, idx, axis)
    steps, got = run(op, [x, idx], dtype)
    (step,) = steps
    assert step.name == "GDMA_GATHER" and step.command.header.engine == ENGINE_GDMA
    expected = stored_gather_record(op) if element == "int8" else data.Gather(axis)
    assert step.record == expected
    np.testing.assert_array_equal(got.astype(np.float32), interpreter(op, [x, idx]))


def stored_gather_record(op):
    """The interpreter's record of an integer Gather (TOP's, on stored values)."""
    from tpuc.interp.tpu_ops.params import element_of_value
    from tpuc.kernels import data
    from tpuc.kernels.requant import NO_RELU

    return data.Stored(data.Gather(int(op.value("axis"))), NO_RELU, element_of_value(op.results[0]))


def test_gather_index_out_of_range_names_the_command():
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    idx = np.array([0, 2], np.float32)
    op = _gather_op(x, Q, idx, 0)
    bad = np.array([0, 3], np.float32)  # compiled with good indices, run with a bad one
    with pytest.raises(TpucError) as info:
        run(op, [x, bad], "i8")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("cmd 0 (GDMA_GATHER) failed: gather index out of range [-2, 2)")


# --- Arg ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", isa.ARG_MODES)
@pytest.mark.parametrize(
    "axis, keepdims, last", [(1, True, False), (-1, False, True), (0, False, False)]
)
def test_arg_equals_the_interpreter(mode, axis, keepdims, last):
    from tpuc.interp.top_ops.reduce import arg_record

    x = np.random.default_rng(3).integers(-2, 3, (2, 3, 4)).astype(np.float16)  # many ties
    shape = list(x.shape)
    if keepdims:
        shape[axis] = 1
    else:
        del shape[axis]
    attrs = dict(mode=mode, axis=axis, keepdims=keepdims, select_last_index=last)
    op = tpu.ArgOp.make([source(x, f16)], "y", attrs, result_types=[TensorType(f32, shape)])
    (step,), got = run(op, [x], "f32")
    assert step.name == "TIU_ARG" and step.command.header.engine == ENGINE_TIU
    assert step.command.header.kind == 0 and step.record == arg_record(op)
    np.testing.assert_array_equal(got, interpreter(op, [x]))


def test_integer_arg_is_not_an_engine_command():
    x = np.zeros((2, 3), np.int8)
    attrs = dict(mode="ArgMax", axis=1, keepdims=True, select_last_index=False)
    op = tpu.ArgOp.make([source(x, Q)], "y", attrs, result_types=[TensorType(f32, [2, 1])])
    assert engine_commands(op, 0) is None


def test_copy_steps_are_moves():
    """The pad's moves are plain copies (the simulator's CopyStep)."""
    x = np.zeros((1, 2), np.int8)
    op = tpu.PadOp.make(
        [source(x, Q)], "y", dict(paddings=[0, 1, 0, 1], mode="edge", val=0.0),
        result_types=[TensorType(Q, [1, 4])],
    )  # fmt: skip
    steps, _ = run(op, [x], "i8")
    assert [type(s) for s in steps] == [CopyStep] * 3


# --- end to end: an ONNX model deployed in INT8, F16 and F32 ----------------------------------


def select_model(path) -> None:
    """A conv whose output is padded (constant, reflect, edge), gathered
    with negative indices on axes 0 and 1, and arg-maxed/-minned."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("f4") * 0.3, "W")
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
        node("Pad", ["c", "pads", "cval"], ["pc"], mode="constant"),
        node("Pad", ["c", "pads2"], ["pr"], mode="reflect"),
        node("Pad", ["c", "pads2"], ["pe"], mode="edge"),
        node("Gather", ["c", "i0"], ["g0"], axis=0),
        node("Gather", ["c", "i1"], ["g1"], axis=1),
        node("ArgMax", ["c"], ["am"], axis=1, keepdims=1),
        node("ArgMin", ["c"], ["an"], axis=3, keepdims=0, select_last_index=1),
    ]
    outputs = [("pc", [1, 5, 7, 7]), ("pr", [1, 4, 7, 9]), ("pe", [1, 4, 7, 9])]
    outputs += [("g0", [2, 4, 4, 4]), ("g1", [1, 2, 2, 4, 4])]
    graph = helper.make_graph(
        nodes,
        "select",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs]
        + [
            helper.make_tensor_value_info("am", TensorProto.INT64, [1, 1, 4, 4]),
            helper.make_tensor_value_info("an", TensorProto.INT64, [1, 4, 4]),
        ],
        [
            w,
            numpy_helper.from_array(np.array([0, 1, 2, 0, 0, 0, 1, 3], np.int64), "pads"),
            numpy_helper.from_array(np.array(0.7, np.float32), "cval"),
            numpy_helper.from_array(np.array([0, 0, 2, 3, 0, 0, 1, 2], np.int64), "pads2"),
            numpy_helper.from_array(np.array([-1, 0], np.int64), "i0"),
            numpy_helper.from_array(np.array([[-1, 2], [0, -4]], np.int64), "i1"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)


@pytest.fixture(scope="module")
def select_mlir(tmp_path_factory):
    from tiny_cnn import transform_and_calibrate

    work = tmp_path_factory.mktemp("select")
    select_model(work / "select.onnx")  # model_transform checks TOP against onnxruntime
    return transform_and_calibrate(work, "select", (1, 3, 4, 4), seed=5, samples=4)


def _interpreter_record(op):
    """The record the TPU interpreter's kernel builds for a Gather or an Arg."""
    from tpuc.interp.top_ops.reduce import arg_record
    from tpuc.kernels import data

    if isinstance(op, tpu.ArgOp):
        return arg_record(op)
    if kind_of(op) == "int":
        return stored_gather_record(op)
    return data.Gather(int(op.value("axis")))


@pytest.mark.parametrize("mode", ["INT8", "F16", "F32"])
def test_pad_gather_arg_deploy_bit_exact(select_mlir, tmp_path, mode):
    from collections import Counter

    from tpuc.target.runtime import load_bmodel
    from tpuc.tools import model_deploy

    argv = ["--mlir", str(select_mlir / "select.mlir"), "--chip", "bm1684x", "--quantize", mode]
    argv += ["--test_input", str(select_mlir / "select_in_f32.npz")]
    argv += ["--model", str(tmp_path / "select.bmodel")]
    if mode == "INT8":
        argv += ["--calibration_table", str(select_mlir / "select_cali_table")]
    assert model_deploy.run(argv) == 0  # fails unless bmodel == TPU interpreter bit for bit
    ops = tpu_ops(tmp_path, "select_*_tpu.mlir")
    names = layer_names(tmp_path, "select_*_final.mlir")
    seen = Counter()
    for _, steps in load_bmodel(tmp_path / "select.bmodel").subnets:
        for step in steps:
            assert isinstance(step, EngineStep | CopyStep), step.what  # nothing transitional
            op = ops[names[step.command.header.layer_id]]
            name = step.name if isinstance(step, EngineStep) else "GDMA_MOVE"
            seen[type(op).__name__, name] += 1
            if name in ("GDMA_GATHER", "TIU_ARG"):
                assert step.record == _interpreter_record(op), op.name
                assert step.command.header.kind == int(kind_of(op) == "int")
    # constant: fill + move; reflect and edge: a move and one per border (2 axes x 2 sides)
    assert seen["PadOp", "GDMA_FILL"] == 1 and seen["PadOp", "GDMA_MOVE"] == 1 + 5 + 5, seen
    assert seen["GatherOp", "GDMA_GATHER"] == 2 and seen["ArgOp", "TIU_ARG"] == 2, seen
