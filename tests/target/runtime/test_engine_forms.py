"""Forms that used to fall back to the transitional per-op command, now
engine-level: a negative-step Slice (one GDMA MOVE with a negative stride),
float CompareConst (TIU_FARITH const form, plain and inversed), INT8
Max/Min of one shared quantized type (TIU_FARITH `kind` 1 on stored
integers, also with five inputs), float Sum/Max of five inputs (TIU_FARITH
past its four coeff slots) and INT8 Sum of five inputs (the float fallback,
as TIU_ARITH has four multiplier slots). Each mode deploys bit-exact
against the TPU interpreter with no transitional step; the new FARITH
records equal the interpreter's."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from layer_ids import group_move, layer_names, tpu_ops

from tpuc.target.runtime import load_bmodel
from tpuc.target.runtime.engine import CopyStep, EngineStep
from tpuc.tools import model_deploy, model_transform, run_calibration

SHAPE = (1, 4, 4, 4)


def forms_model(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def const(name, value):
        return numpy_helper.from_array(np.asarray(value), name)

    def ints(name, *values):
        return const(name, np.array(values, np.int64))

    node = helper.make_node
    nodes = [
        node("Slice", ["x", "m1", "big", "w", "m1"], ["s"]),  # W reversed: step -1
        node("Less", ["s", "half"], ["lt"]),  # CompareConst
        node("Greater", ["third", "x"], ["gt"]),  # CompareConst, inversed
        node("Slice", ["s", "c0", "c2", "one", "one"], ["a"]),
        node("Slice", ["s", "c2", "c4", "one", "one"], ["b"]),
        node("Max", ["a", "b"], ["m"]),
        node("Min", ["b", "a"], ["n"]),
        node("Sum", ["a", "b", "m", "n", "a"], ["sum5"]),
        node("Max", ["a", "b", "m", "n", "b"], ["max5"]),
        node("Where", ["lt", "s", "x"], ["w0"]),
        node("Where", ["gt", "w0", "x"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "forms",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE)),
            helper.make_tensor_value_info("sum5", TensorProto.FLOAT, [1, 2, 4, 4]),
            helper.make_tensor_value_info("max5", TensorProto.FLOAT, [1, 2, 4, 4]),
        ],
        [
            ints("m1", -1),
            ints("big", -100),
            ints("w", 3),
            ints("c0", 0),
            ints("c2", 2),
            ints("c4", 4),
            ints("one", 1),
            const("half", np.float32(0.5)),
            const("third", np.float32(0.3)),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)


@pytest.fixture(scope="module")
def forms(tmp_path_factory) -> Path:
    """The model transformed, and a calibration table in which Max/Min
    results share their inputs' threshold (so INT8 keeps them integer)."""
    work = tmp_path_factory.mktemp("forms")
    forms_model(work / "forms.onnx")
    rng = np.random.default_rng(21)
    np.savez(work / "in.npz", x=rng.standard_normal(SHAPE).astype(np.float32))
    argv = ["--model_name", "forms", "--model_def", str(work / "forms.onnx")]
    argv += ["--test_input", str(work / "in.npz"), "--mlir", str(work / "forms.mlir")]
    assert model_transform.run(argv) == 0
    samples = work / "samples"
    samples.mkdir()
    for i in range(4):
        np.savez(samples / f"s{i}.npz", x=rng.standard_normal(SHAPE).astype(np.float32))
    table = work / "cali"
    cali = [str(work / "forms.mlir"), "--dataset", str(samples), "-o", str(table)]
    assert run_calibration.run(cali) == 0
    lines = table.read_text().splitlines()
    shared = next(line.split()[1:] for line in lines if line.split()[:1] == ["s"])
    moved = {"a", "b", "m", "n", "max5"}
    lines = [
        " ".join([f[0], *shared]) if (f := line.split()) and f[0] in moved else line
        for line in lines
    ]
    table.write_text("\n".join(lines) + "\n")
    return work


def _deploy(forms: Path, out: Path, mode: str) -> None:
    argv = ["--mlir", str(forms / "forms.mlir"), "--chip", "bm1684x", "--quantize", mode]
    argv += ["--test_input", str(forms / "forms_in_f32.npz")]
    argv += ["--model", str(out / "forms.bmodel")]
    if mode == "INT8":
        argv += ["--calibration_table", str(forms / "cali")]
    assert model_deploy.run(argv) == 0  # fails unless bmodel == TPU interpreter bit for bit


def _steps(out: Path):
    """(step, its TPU op) of every command of the deployed bmodel."""

    ops = tpu_ops(out, "forms_*_tpu.mlir")
    names = layer_names(out, "forms_*_final.mlir")
    for _, steps in load_bmodel(out / "forms.bmodel").subnets:
        for step in steps:
            if not group_move(step):
                yield step, ops[names[step.command.header.layer_id]]


def _interpreter_record(op):
    """The record the TPU interpreter builds for a FARITH op of this test."""
    import dataclasses

    from tpuc.dialects import tpu
    from tpuc.interp.top_ops.registry import LIBRARY
    from tpuc.interp.tpu_ops.params import element_of_value, relu_of
    from tpuc.ir.core import kind_of
    from tpuc.kernels import data
    from tpuc.kernels.requant import NO_RELU

    source = {v: k for k, v in tpu.MIRRORS.items()}[type(op)]
    record = LIBRARY[source][0](op)
    if kind_of(op) != "int":
        return record
    move = dataclasses.replace(record, relu=NO_RELU)
    return data.Stored(move, relu_of(op), element_of_value(op.results[0]))


@pytest.mark.parametrize("mode", ["INT8", "F16", "BF16", "F32"])
def test_forms_deploy_on_engine_commands(forms, tmp_path, mode):
    _deploy(forms, tmp_path, mode)
    seen = Counter()
    for step, op in _steps(tmp_path):
        assert isinstance(step, EngineStep | CopyStep), step.what  # nothing transitional
        if isinstance(step, EngineStep) and step.name == "TIU_FARITH":
            if op.name in ("tpu.CompareConst", "tpu.Max", "tpu.Min"):
                assert step.record == _interpreter_record(op), op.name
                kind = "int" if step.command.header.kind else "float"
                seen[op.name, kind, len(step.command.operands)] += 1
        elif isinstance(step, CopyStep) and op.name == "tpu.Slice":
            seen["slice", min(step.command.operands[0].element_strides())] += 1
    assert seen["slice", -1] == 1, seen  # the reversed W axis
    if mode != "INT8":  # INT8: the compares became lookup tables
        assert seen["tpu.CompareConst", "float", 1] == 2, seen
        assert seen["tpu.Max", "float", 5] == 1, seen
    else:
        assert seen["tpu.Max", "int", 2] == seen["tpu.Min", "int", 2] == 1, seen
        assert seen["tpu.Max", "int", 5] == 1, seen


def test_int8_sum_of_five_inputs_stays_float(forms, tmp_path):
    """TIU_ARITH has four multiplier slots: the INT8 lowering leaves a wider
    Add to the float fallback, which TIU_FARITH runs."""
    _deploy(forms, tmp_path, "INT8")
    adds = [
        (step.name, step.command.header.kind)
        for step, op in _steps(tmp_path)
        if op.name == "tpu.Add" and len(op.operands) == 5
    ]
    assert adds == [("TIU_FARITH", 0)], adds


# --- a qtable mixed-precision Concat ------------------------------------------------------


def mixed_model(path: Path) -> None:
    """x -> Conv -> (Sigmoid: u8 table | Relu, kept F16 by the qtable | x)
    -> Concat: an INT8 Concat of three quantized types, one through a Cast
    from F16. The Sigmoid is an output too: read by the Concat alone, it
    would take the Concat's (i8) range (concat_scale.py)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(31)
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w", "bias"], ["c"], pads=[1, 1, 1, 1]),
        node("Sigmoid", ["c"], ["sg"]),
        node("Relu", ["c"], ["r"]),
        node("Mul", ["r", "r"], ["rr"]),
        node("Concat", ["sg", "rr", "x"], ["y"], axis=1),
    ]
    weights = [
        numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype("f4") * 0.3, "w"),
        numpy_helper.from_array(rng.standard_normal(4).astype("f4") * 0.1, "bias"),
    ]
    graph = helper.make_graph(
        nodes,
        "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12, 4, 4]),
            helper.make_tensor_value_info("sg", TensorProto.FLOAT, [1, 4, 4, 4]),
        ],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)


def test_qtable_mixed_concat_on_engine_commands(tmp_path):
    from tpuc.dialects import tpu
    from tpuc.ir.core import element_of

    mixed_model(tmp_path / "mixed.onnx")
    rng = np.random.default_rng(32)
    np.savez(tmp_path / "in.npz", x=rng.standard_normal(SHAPE).astype(np.float32))
    argv = ["--model_name", "forms", "--model_def", str(tmp_path / "mixed.onnx")]
    argv += ["--test_input", str(tmp_path / "in.npz"), "--mlir", str(tmp_path / "m.mlir")]
    assert model_transform.run(argv) == 0
    samples = tmp_path / "samples"
    samples.mkdir()
    for i in range(4):
        np.savez(samples / f"s{i}.npz", x=rng.standard_normal(SHAPE).astype(np.float32))
    table = str(tmp_path / "cali")
    assert (
        run_calibration.run([str(tmp_path / "m.mlir"), "--dataset", str(samples), "-o", table]) == 0
    )
    (tmp_path / "qtable").write_text("r F16\nrr F16\n")
    argv = ["--mlir", str(tmp_path / "m.mlir"), "--chip", "bm1684x", "--quantize", "INT8"]
    argv += ["--calibration_table", table, "--quantize_table", str(tmp_path / "qtable")]
    argv += ["--test_input", str(tmp_path / "forms_in_f32.npz")]
    argv += ["--model", str(tmp_path / "forms.bmodel")]
    assert model_deploy.run(argv) == 0  # fails unless bmodel == TPU interpreter bit for bit
    concat_inputs, results = None, set()
    for step, op in _steps(tmp_path):
        assert isinstance(step, EngineStep | CopyStep), step.what  # nothing transitional
        results |= {str(element_of(v)) for v in op.results}
        if isinstance(op, tpu.ConcatOp):
            concat_inputs = {str(element_of(v)).split(":")[0] for v in op.operands}
            assert step.name == "TIU_CVT", step.name
    assert concat_inputs is not None and len(concat_inputs) == 2, concat_inputs  # i8 and u8
    assert "f16" in results, results  # the qtable's layers ran in F16


def test_rank5_tile_past_max_rank_is_copies(tmp_path):
    """np.tile of a rank-5 tensor, every axis repeated: the (r, d) copy
    shape has 10 axes, more than a record holds; it deploys as GDMA copies."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    reps = numpy_helper.from_array(np.array([2, 3, 2, 2, 2], np.int64), "r")
    graph = helper.make_graph(
        [helper.make_node("Tile", ["x", "r"], ["y"])],
        "tile5",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 2, 2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6, 4, 4, 6])],
        [reps],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, tmp_path / "tile5.onnx")
    x = np.random.default_rng(41).standard_normal((2, 2, 2, 2, 3)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    argv = ["--model_name", "forms", "--model_def", str(tmp_path / "tile5.onnx")]
    argv += ["--test_input", str(tmp_path / "in.npz"), "--mlir", str(tmp_path / "t.mlir")]
    assert model_transform.run(argv) == 0
    argv = ["--mlir", str(tmp_path / "t.mlir"), "--chip", "bm1684x", "--quantize", "F16"]
    argv += ["--test_input", str(tmp_path / "forms_in_f32.npz")]
    argv += ["--model", str(tmp_path / "forms.bmodel")]
    assert model_deploy.run(argv) == 0  # fails unless bmodel == TPU interpreter bit for bit
    tiles = [step for step, op in _steps(tmp_path) if op.name == "tpu.Tile"]
    assert tiles and all(isinstance(step, CopyStep) for step in tiles), tiles
    assert len(tiles) == 4  # two leading axes past MAX_RANK: one copy per index
