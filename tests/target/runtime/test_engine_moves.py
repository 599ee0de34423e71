"""Engine commands for data movement, stored-value reductions and float
selection in the simulator: Tile/Expand/Depth2Space as strided GDMA copies,
integer ReduceMax/Min on TIU_REDUCE, float Compare/Where/PRelu on TIU_FARITH;
each decoded record equals the TPU interpreter's and nothing is left to a
per-op command."""

from collections import Counter

import numpy as np
import pytest
from layer_ids import group_move, layer_names, tpu_ops
from tiny_cnn import prepared  # noqa: F401

from tpuc.target.isa import engine as isa
from tpuc.target.runtime import load_bmodel
from tpuc.target.runtime.device import Device
from tpuc.target.runtime.engine import CopyStep, EngineStep, engine_step
from tpuc.tools import model_deploy

START = 0x1_0000_0000


def device() -> Device:
    dev = Device("bm1684x", START, 1 << 20, npu_num=4, lmem_bytes=1024)
    dev.allocate("activations", START, 4096)
    return dev


# --- Tile / Expand / Depth2Space as one strided GDMA copy ---------------------------------


def moves_model(path) -> None:
    """A conv whose output is tiled, broadcast and rearranged (tpu.Tile,
    tpu.Expand, tpu.Depth2Space both ways)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("f4") * 0.3, "W")
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
        node("Tile", ["c", "reps"], ["t"]),
        node("MaxPool", ["c"], ["r"], kernel_shape=[1, 4], strides=[1, 4]),
        node("Expand", ["r", "shape"], ["e"]),
        node("DepthToSpace", ["c"], ["d"], blocksize=2),
        node("DepthToSpace", ["c"], ["d2"], blocksize=2, mode="CRD"),
        node("SpaceToDepth", ["c"], ["s"], blocksize=2),
        node("ReduceMax", ["c"], ["rmax"], axes=[1], keepdims=1),
        node("ReduceMin", ["c"], ["rmin"], axes=[2, 3], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "moves",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [
            helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 8, 4, 12]),
            helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 4, 4, 5]),
            helper.make_tensor_value_info("d", TensorProto.FLOAT, [1, 1, 8, 8]),
            helper.make_tensor_value_info("d2", TensorProto.FLOAT, [1, 1, 8, 8]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 16, 2, 2]),
            helper.make_tensor_value_info("rmax", TensorProto.FLOAT, [1, 1, 4, 4]),
            helper.make_tensor_value_info("rmin", TensorProto.FLOAT, [1, 4]),
        ],
        [
            w,
            numpy_helper.from_array(np.array([1, 2, 1, 3], np.int64), "reps"),
            numpy_helper.from_array(np.array([2, 1, 1, 5], np.int64), "shape"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)


@pytest.fixture(scope="module")
def moves_mlir(tmp_path_factory):
    from tiny_cnn import transform_and_calibrate

    work = tmp_path_factory.mktemp("moves")
    moves_model(work / "moves.onnx")
    return transform_and_calibrate(work, "moves", (1, 3, 4, 4), seed=9, samples=4)


@pytest.mark.parametrize("mode", ["INT8", "F16"])
def test_tile_expand_depth2space_are_strided_copies_bit_exact(moves_mlir, tmp_path, mode):
    from tpuc.dialects import tpu
    from tpuc.interp.top_ops.reduce import reduction_record

    argv = ["--mlir", str(moves_mlir / "moves.mlir"), "--chip", "bm1684x", "--quantize", mode]
    argv += ["--test_input", str(moves_mlir / "moves_in_f32.npz")]
    argv += ["--model", str(tmp_path / "moves.bmodel")]
    if mode == "INT8":
        argv += ["--calibration_table", str(moves_mlir / "moves_cali_table")]
    assert model_deploy.run(argv) == 0  # fails unless bmodel == TPU interpreter bit for bit
    ops = tpu_ops(tmp_path, "moves_*_tpu.mlir")
    names = layer_names(tmp_path, "moves_*_final.mlir")
    moved = Counter()
    program = load_bmodel(tmp_path / "moves.bmodel")
    for _, steps in program.subnets:
        for step in steps:
            op = ops[names[step.command.header.layer_id]]
            assert isinstance(step, EngineStep | CopyStep), step.what  # nothing transitional
            if isinstance(step, CopyStep):
                moved[type(op).__name__] += 1
            elif step.name == "TIU_REDUCE":
                moved[op.value("mode")] += 1
                if mode == "F16":  # the interpreter's float kernel: TOP's, rounded
                    assert step.record == reduction_record(op), op.name
    assert moved[tpu.TileOp.__name__] == 1 and moved[tpu.ExpandOp.__name__] == 1, moved
    assert moved[tpu.Depth2SpaceOp.__name__] == 3, moved  # DCR, CRD and SpaceToDepth
    assert moved["ReduceMax"] == 1 and moved["ReduceMin"] == 1, moved


# --- integer ReduceMax / ReduceMin on TIU_REDUCE (stored values) --------------------------------


@pytest.mark.parametrize("mode", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axes, keepdims", [([2], True), ([1, 2], False)])
def test_stored_reduce_equals_the_interpreter(mode, axes, keepdims):
    from xdsl.dialects.builtin import TensorType

    from tpuc.dialects import top, tpu
    from tpuc.dialects.quant import UniformQuantizedType
    from tpuc.interp.top_ops.reduce import reduction_record
    from tpuc.interp.tpu_ops import TPU_KERNELS
    from tpuc.interp.tpu_ops.data_ops import element_of_value
    from tpuc.ir.core import kind_of
    from tpuc.kernels import data
    from tpuc.kernels.requant import NO_RELU
    from tpuc.passes.address_assign import set_address
    from tpuc.passes.codegen.engine_rules import engine_commands

    x = np.random.default_rng(4).integers(-128, 128, (1, 3, 4), np.int8)
    q = UniformQuantizedType("i8", 0.25, -3)
    out_shape = [d for i, d in enumerate(x.shape) if i not in axes or keepdims]
    out_shape = [1 if i in axes else d for i, d in enumerate(x.shape)] if keepdims else out_shape
    source = top.WeightOp.make([], "x", result_types=[TensorType(q, list(x.shape))]).output
    attrs = dict(mode=mode, axes=axes, keepdims=keepdims)
    op = tpu.ReduceOp.make([source], "y", attrs, result_types=[TensorType(q, out_shape)])
    set_address(op.operands[0], START)
    set_address(op.results[0], START + 64)
    (cmd,) = engine_commands(op, 0)
    assert cmd.header.opcode == isa.TIU_REDUCE
    dev = device()
    region = dev.regions[0]
    region.bytes[0 : x.size] = x.reshape(-1).view(np.uint8)
    step = engine_step(cmd, dev, "x")
    kernel = TPU_KERNELS[(tpu.ReduceOp, kind_of(op))]
    interpreter = data.Stored(reduction_record(op), NO_RELU, element_of_value(op.results[0]))
    assert step.record == interpreter
    step.run()
    got = region.bytes[64 : 64 + int(np.prod(out_shape))].view(np.int8).astype(np.float32)
    expected = kernel(op, [x.astype(np.float32)])
    np.testing.assert_array_equal(got, np.asarray(expected).reshape(-1))


@pytest.mark.parametrize("mode", isa.REDUCE_FUNCTIONS)
def test_float_reduce_equals_the_interpreter(mode):
    from xdsl.dialects.builtin import TensorType, f16

    from tpuc.dialects import top, tpu
    from tpuc.interp.top_ops.reduce import reduction_record
    from tpuc.interp.tpu_ops import TPU_KERNELS
    from tpuc.ir.core import kind_of
    from tpuc.passes.address_assign import set_address
    from tpuc.passes.codegen.engine_rules import engine_commands

    x = np.random.default_rng(6).uniform(0.1, 2.0, (1, 3, 4)).astype(np.float16)
    source = top.WeightOp.make([], "x", result_types=[TensorType(f16, [1, 3, 4])]).output
    attrs = dict(mode=mode, axes=[2], keepdims=True)
    op = tpu.ReduceOp.make([source], "y", attrs, result_types=[TensorType(f16, [1, 3, 1])])
    set_address(op.operands[0], START)
    set_address(op.results[0], START + 64)
    (cmd,) = engine_commands(op, 0)
    assert cmd.header.opcode == isa.TIU_REDUCE and cmd.header.kind == 0
    dev = device()
    region = dev.regions[0]
    region.bytes[0 : x.nbytes] = x.reshape(-1).view(np.uint8)
    step = engine_step(cmd, dev, "x")
    assert step.record == reduction_record(op)
    step.run()
    got = region.bytes[64:70].view(np.float16).astype(np.float32)
    expected = TPU_KERNELS[(tpu.ReduceOp, kind_of(op))](op, [x.astype(np.float32)])
    np.testing.assert_array_equal(got, np.asarray(expected).reshape(-1))


# --- float Compare, Where, PRelu on TIU_FARITH --------------------------------------------------


def select_model(path) -> None:
    """x -> PRelu (per-channel slope) -> Less than x -> Where (tpu.PRelu,
    tpu.Compare, tpu.Where)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(11)
    node = helper.make_node
    nodes = [
        node("PRelu", ["x", "slope"], ["p"]),
        node("Less", ["p", "h"], ["lt"]),
        node("Where", ["lt", "p", "h"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "select",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4]),
            helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 3, 4, 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])],
        [numpy_helper.from_array(rng.uniform(0.1, 0.5, (3, 1, 1)).astype("f4"), "slope")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)


@pytest.mark.parametrize("mode", ["INT8", "F16"])
def test_float_compare_where_prelu_on_farith(tmp_path, mode):
    from tpuc.dialects import tpu
    from tpuc.interp.top_ops.registry import LIBRARY
    from tpuc.tools import model_transform, run_calibration

    select_model(tmp_path / "select.onnx")
    rng = np.random.default_rng(12)

    def sample():
        return {k: rng.standard_normal((1, 3, 4, 4)).astype(np.float32) for k in ("x", "h")}

    np.savez(tmp_path / "in.npz", **sample())
    argv = ["--model_name", "select", "--model_def", str(tmp_path / "select.onnx")]
    argv += ["--test_input", str(tmp_path / "in.npz"), "--mlir", str(tmp_path / "select.mlir")]
    assert model_transform.run(argv) == 0
    argv = ["--mlir", str(tmp_path / "select.mlir"), "--chip", "bm1684x", "--quantize", mode]
    argv += ["--test_input", str(tmp_path / "select_in_f32.npz")]
    argv += ["--model", str(tmp_path / "select.bmodel")]
    if mode == "INT8":
        samples = tmp_path / "samples"
        samples.mkdir()
        for i in range(4):
            np.savez(samples / f"s{i}.npz", **sample())
        table = str(tmp_path / "cali")
        cali = [str(tmp_path / "select.mlir"), "--dataset", str(samples), "-o", table]
        assert run_calibration.run(cali) == 0
        argv += ["--calibration_table", table]
    assert model_deploy.run(argv) == 0  # fails unless bmodel == TPU interpreter bit for bit
    if mode != "F16":
        return
    ops = tpu_ops(tmp_path, "select_*_tpu.mlir")
    names = layer_names(tmp_path, "select_*_final.mlir")
    seen = Counter()
    for _, steps in load_bmodel(tmp_path / "select.bmodel").subnets:
        for step in steps:
            assert isinstance(step, EngineStep | CopyStep), step.what  # nothing transitional
            if group_move(step):
                continue
            op = ops[names[step.command.header.layer_id]]
            if step.name == "TIU_FARITH":
                source = {v: k for k, v in tpu.MIRRORS.items()}[type(op)]
                assert step.record == LIBRARY[source][0](op), op.name
                seen[type(op).__name__] += 1
    assert seen == Counter({"PReluOp": 1, "CompareOp": 1, "WhereOp": 1}), seen
