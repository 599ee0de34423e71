"""Layer groups in the bmodel: the pipelined loop of each group as commands,
run by the simulator bit-exactly against the TPU interpreter (model_deploy
checks that when given test inputs)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from resblock import SHAPE as RESBLOCK_SHAPE
from resblock import resblock_model
from tiny_cnn import prepared, transform_and_calibrate  # noqa: F401

from tpuc.base.errors import TpucError
from tpuc.ir.module_io import load_module
from tpuc.passes.codegen.bmodel_builder import synced_phases
from tpuc.passes.layer_group.attach import module_groups
from tpuc.target.bmodel import load_bmodel_file, write_bmodel
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    ENGINE_GDMA,
    ENGINE_TIU,
    SPACE_LOCAL,
    Command,
    Header,
    split_commands,
)
from tpuc.target.runtime import load_bmodel
from tpuc.target.runtime.engine import CopyStep, EngineStep
from tpuc.tools import model_deploy


def deploy(work: Path, name: str, out: Path, chip: str, mode: str, *extra: str) -> Path:
    """model_deploy with the simulator check; the folder of its outputs."""
    argv = ["--mlir", str(work / f"{name}.mlir"), "--chip", chip, "--quantize", mode]
    argv += ["--calibration_table", str(work / f"{name}_cali_table")]
    argv += ["--test_input", str(work / "in.npz"), "--tolerance", "0.5,0.3"]
    argv += ["--model", str(out / f"{name}.bmodel"), *extra]
    assert model_deploy.run(argv) == 0
    return out


def final(out: Path):
    module, _ = load_module(next(out.glob("*_final.mlir")))
    return module


def group_plans(module) -> list[dict]:
    """Each tpu.Group of a module (read back from `_final.mlir`): its ops'
    names and slice counts."""
    return [
        {
            "ops": [op.attributes["name"].data for op in g.layers()],
            **dict(zip("nhw", g.secs, strict=True)),
        }
        for g in module_groups(module)
    ]


def streams(bmodel: Path) -> list[Command]:
    group = load_bmodel_file(bmodel).nets[0].parameters[0].subnets[0].cmd_groups[0]
    tiu = split_commands(group.bdc, group.bdc_num, "tiu")
    return tiu + split_commands(group.gdma, group.gdma_num, "gdma")


def test_phases_wait_for_the_previous_phase_only():
    def cmd(engine):
        return Command(Header(isa.GDMA_MOVE, engine, 0, 0, 0, 0, 0), [], [])

    phases = [[cmd(ENGINE_TIU), cmd(ENGINE_GDMA), cmd(ENGINE_GDMA)], [cmd(ENGINE_TIU)]]
    phases += [[cmd(ENGINE_GDMA), cmd(ENGINE_TIU)]]
    ids = [(c.header.engine, c.header.cmd_id, c.header.wait_id) for c in synced_phases(phases)]
    # phase 1: both engines free; phase 2: TIU waits for GDMA 2; phase 3: for TIU 2 / GDMA 2
    assert ids == [
        (ENGINE_TIU, 1, 0),
        (ENGINE_GDMA, 1, 0),
        (ENGINE_GDMA, 2, 0),
        (ENGINE_TIU, 2, 2),
        (ENGINE_GDMA, 3, 2),
        (ENGINE_TIU, 3, 2),
    ]


@pytest.mark.parametrize("mode", ["INT8", "F16"])
def test_tiny_cnn_in_one_group(prepared, tmp_path, mode):  # noqa: F811
    out = deploy(prepared, "cnn", tmp_path, "bm1684x", mode)
    module = final(out)
    (plan,) = group_plans(module)
    assert plan["ops"][1:] == ["r1", "r2", "s", "p"] and plan["h"] == 1
    program = load_bmodel(out / "cnn.bmodel")
    steps = [s for _, subnet in program.subnets for s in subnet]
    assert all(isinstance(s, EngineStep | CopyStep) for s in steps)
    local = [s for s in steps if any(r.space == SPACE_LOCAL for r in s.command.results)]
    opcodes = {s.command.header.opcode for s in local}
    assert {isa.GDMA_LOAD, isa.TIU_CONV, isa.TIU_POOL} <= opcodes
    # only the group's input and output (and the global layers') tensors live in DDR
    names = {
        row["name"] for row in json.loads(next(out.glob("*_location.json")).read_text())["tensors"]
    }
    assert {"r1", "r2", "s"}.isdisjoint(names) and {"x", "p"} <= names
    whole = deploy(prepared, "cnn", tmp_path / "global", "bm1684x", mode, "--disable_layer_group")
    sizes = [int(m.attributes["module.neuron_size"].value.data) for m in (module, final(whole))]
    assert sizes[0] < sizes[1]


def test_the_sync_ids_order_every_dependency(prepared, tmp_path):  # noqa: F811
    """The same group's commands with no waits: the loader finds a TIU and a
    GDMA command touching the same local bytes unordered."""
    out = deploy(prepared, "cnn", tmp_path, "bm1684x", "INT8")
    model = load_bmodel_file(out / "cnn.bmodel")
    group = model.nets[0].parameters[0].subnets[0].cmd_groups[0]
    unsynced = []
    for stream, count in ((group.bdc, group.bdc_num), (group.gdma, group.gdma_num)):
        commands = split_commands(stream, count, "stream")
        for cmd in commands:
            cmd.header = dataclasses.replace(cmd.header, wait_id=0)
        unsynced.append(b"".join(c.pack() for c in commands))
    group.bdc, group.gdma = unsynced
    (tmp_path / "unsynced.bmodel").write_bytes(write_bmodel(model))
    with pytest.raises(TpucError, match="no wait_id orders them"):
        load_bmodel(tmp_path / "unsynced.bmodel")


@pytest.fixture(scope="module")
def resblock(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("resblock")
    resblock_model(work / "resblock.onnx")
    return transform_and_calibrate(work, "resblock", RESBLOCK_SHAPE, seed=3, samples=4)


@pytest.mark.parametrize(
    "chip, mode", [("bm1684x", "INT8"), ("bm1684x", "F16"), ("cv183x", "INT8")]
)
def test_resblock_bit_exact(resblock, tmp_path, chip, mode):
    out = deploy(resblock, "resblock", tmp_path, chip, mode)
    plans = group_plans(final(out))
    assert sum(len(p["ops"]) for p in plans) >= 6


def sliced_model(path: Path, batch: int = 1) -> Path:
    """x[1,8,160,160] -> Conv 3x3 p1 + Relu -> MaxPool 3x3 s2 p1 -> depthwise
    Conv 3x3 p1 -> Add(pool) -> Conv 3x3 s2 pads (0,0,1,1) -> AvgPool 2x2 s2
    ceil -> Conv 1x1: big enough on cv183x (32 KiB lanes) to slice H."""
    rng = np.random.default_rng(5)
    inits = []

    def init(name, shape, scale=0.3):
        inits.append(
            numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)
        )
        return name

    node = helper.make_node
    nodes = [
        node("Conv", ["x", init("w1", (16, 8, 3, 3)), init("b1", (16,))], ["c1"], pads=[1] * 4),
        node("Relu", ["c1"], ["r1"]),
        node("MaxPool", ["r1"], ["m1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4),
        node(
            "Conv",
            ["m1", init("w2", (16, 1, 3, 3)), init("b2", (16,))],
            ["c2"],
            pads=[1] * 4,
            group=16,
        ),  # fmt: skip
        node("Add", ["c2", "m1"], ["s"]),
        node(
            "Conv",
            ["s", init("w3", (32, 16, 3, 3)), init("b3", (32,))],
            ["c3"],
            pads=[0, 0, 1, 1],
            strides=[2, 2],
        ),  # fmt: skip
        node("AveragePool", ["c3"], ["a"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        node("Conv", ["a", init("w4", (8, 32, 1, 1)), init("b4", (8,))], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "sliced",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, 160, 160])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def sliced(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("sliced")
    sliced_model(work / "sliced.onnx")
    return transform_and_calibrate(work, "sliced", (1, 8, 160, 160), seed=4, samples=4)


@pytest.mark.parametrize("mode", ["INT8", "BF16"])
def test_h_slices_on_small_lanes_bit_exact(sliced, tmp_path, mode):
    out = deploy(sliced, "sliced", tmp_path, "cv183x", mode)
    plans = group_plans(final(out))
    assert max(p["h"] for p in plans) > 1
    convs = [
        c
        for c in streams(out / "sliced.bmodel")
        if c.header.opcode == isa.TIU_CONV and c.results[0].space == SPACE_LOCAL
    ]
    first = min(c.header.layer_id for c in convs)  # the 3x3 pad-1 conv on x
    pads = [
        block_codec.decode_block(isa.TIU_CONV, c.params)
        for c in convs
        if c.header.layer_id == first
    ]
    assert len(pads) > 1
    # top padding only on the slice at row 0, bottom only on the last
    assert [b.pad_begins[0] for b in pads] == [1] + [0] * (len(pads) - 1)
    assert [b.pad_ends[0] for b in pads] == [0] * (len(pads) - 1) + [1]


@pytest.fixture(scope="module")
def batched(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("batched")
    sliced_model(work / "sliced.onnx", batch=4)
    return transform_and_calibrate(work, "sliced", (4, 8, 160, 160), seed=4, samples=2)


def test_n_slices_bit_exact(batched, tmp_path):
    out = deploy(batched, "sliced", tmp_path, "cv183x", "INT8")
    plans = group_plans(final(out))
    assert max(p["n"] for p in plans) > 1 and max(p["h"] for p in plans) > 1


def test_opt_1_and_disabled(sliced, tmp_path):
    greedy = group_plans(
        final(deploy(sliced, "sliced", tmp_path / "1", "cv183x", "INT8", "--opt", "1"))
    )
    assert greedy
    none = final(
        deploy(sliced, "sliced", tmp_path / "0", "cv183x", "INT8", "--disable_layer_group")
    )
    assert group_plans(none) == []
