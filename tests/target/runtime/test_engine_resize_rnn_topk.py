"""Resize (tpu.Interp), LSTM/GRU and the CPU TopK as engine-level commands:
small ONNX models deployed for bm1684x bit-exact with the TPU interpreter,
no transitional command left, and each command's decoded record equal to
the one the interpreter builds for its op (so both make one kernel call)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import onnx
import pytest
from layer_ids import tpu_ops
from onnx import TensorProto, helper, numpy_helper
from tiny_cnn import transform_and_calibrate

from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.runtime import load_bmodel
from tpuc.target.runtime.engine import CopyStep, EngineStep
from tpuc.tools import model_deploy

node = helper.make_node


def _save(path, nodes, outputs, inits, x_shape, opset: int = 13) -> None:
    graph = helper.make_graph(
        nodes,
        path.stem,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.save(model, path)


def _const(name: str, values, dtype="f4"):
    return numpy_helper.from_array(np.asarray(values, dtype), name)


def resize_model(path) -> None:
    """A conv feeding Resizes: nearest (asymmetric/floor by 1.5 — not an
    Upsample —, align_corners/round_prefer_ceil to given sizes), linear
    (half_pixel ×2, align_corners to sizes) and cubic (pytorch_half_pixel,
    asymmetric with exclude_outside and a = −0.5)."""
    rng = np.random.default_rng(21)
    w = _const("W", rng.standard_normal((3, 2, 3, 3)) * 0.4)
    scale = [1.0, 1.0, 1.5, 1.5]
    coord = "coordinate_transformation_mode"
    resizes = [
        ("near", "scales_a", {"mode": "nearest", coord: "asymmetric", "nearest_mode": "floor"}),
        ("near_ac", "sizes_a",
         {"mode": "nearest", coord: "align_corners", "nearest_mode": "round_prefer_ceil"}),
        ("lin", "scales_b", {"mode": "linear"}),
        ("lin_ac", "sizes_a", {"mode": "linear", coord: "align_corners"}),
        ("cub", "scales_a", {"mode": "cubic", coord: "pytorch_half_pixel"}),
        ("cub_x", "sizes_b",
         {"mode": "cubic", coord: "asymmetric", "cubic_coeff_a": -0.5, "exclude_outside": 1}),
    ]  # fmt: skip
    nodes = [node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1])]
    for out, given, attrs in resizes:
        inputs = ["c", "", given] if given.startswith("scales") else ["c", "", "", given]
        nodes.append(node("Resize", inputs, [out], **attrs))
    inits = [
        w,
        _const("scales_a", scale),
        _const("scales_b", [1.0, 1.0, 2.0, 2.0]),
        _const("sizes_a", [1, 3, 7, 9], "i8"),
        _const("sizes_b", [1, 3, 4, 11], "i8"),
    ]
    _save(path, nodes, [r[0] for r in resizes], inits, (1, 2, 5, 6))


def rnn_model(path) -> None:
    """x[seq 4, batch 2, 3] -> LSTM forward with bias and initial h, c; LSTM
    bidirectional without states; GRU forward (linear_before_reset) with
    initial h; GRU bidirectional without bias or states (onnxruntime, the
    frontend's reference, runs no batch-first layout: a unit test covers it)."""
    rng = np.random.default_rng(22)
    hid, inp = 5, 3

    def weights(name, gates, dirs):
        return [
            _const(f"{name}_W", rng.standard_normal((dirs, gates * hid, inp)) * 0.5),
            _const(f"{name}_R", rng.standard_normal((dirs, gates * hid, hid)) * 0.5),
            _const(f"{name}_B", rng.standard_normal((dirs, 2 * gates * hid)) * 0.3),
            _const(f"{name}_h", rng.standard_normal((dirs, 2, hid)) * 0.5),
            _const(f"{name}_c", rng.standard_normal((dirs, 2, hid)) * 0.5),
        ]

    inits = [
        *weights("l1", 4, 1),
        *weights("l2", 4, 2),
        *weights("g1", 3, 1),
        *weights("g2", 3, 2),
    ]
    nodes = [
        node("LSTM", ["x", "l1_W", "l1_R", "l1_B", "", "l1_h", "l1_c"], ["l1_y", "l1_yh", "l1_yc"],
             hidden_size=hid),
        node("LSTM", ["x", "l2_W", "l2_R"], ["l2_y", "l2_yh"], hidden_size=hid,
             direction="bidirectional"),
        node("GRU", ["x", "g1_W", "g1_R", "g1_B", "", "g1_h"], ["g1_y", "g1_yh"], hidden_size=hid,
             linear_before_reset=1),
        node("GRU", ["x", "g2_W", "g2_R"], ["g2_y"], hidden_size=hid, direction="bidirectional"),
    ]  # fmt: skip
    outputs = ["l1_y", "l1_yh", "l1_yc", "l2_y", "l2_yh", "g1_y", "g1_yh", "g2_y"]
    used = {i for n in nodes for i in n.input}
    _save(path, nodes, outputs, [i for i in inits if i.name in used], (4, 2, inp))


def topk_model(path) -> None:
    """x -> Relu r -> TopK largest (axis 1, k 2) and smallest (axis −1, k 3),
    each followed by a TPU op."""
    nodes = [
        node("Relu", ["x"], ["r"]),
        node("TopK", ["r", "k2"], ["v1", "i1"], axis=1),
        node("TopK", ["r", "k3"], ["v2", "i2"], axis=-1, largest=0),
        node("Sigmoid", ["v1"], ["s1"]),
        node("Sigmoid", ["v2"], ["s2"]),
        node("Cast", ["i1"], ["f1"], to=TensorProto.FLOAT),
        node("Cast", ["i2"], ["f2"], to=TensorProto.FLOAT),
    ]
    inits = [_const("k2", [2], "i8"), _const("k3", [3], "i8")]
    _save(path, nodes, ["s1", "f1", "s2", "f2"], inits, (1, 4, 5, 6))


MODELS = {
    "resize": (resize_model, (1, 2, 5, 6)),
    "rnn": (rnn_model, (4, 2, 3)),
    "topk": (topk_model, (1, 4, 5, 6)),
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """Each model transformed and calibrated, on first use."""
    done = {}

    def get(name):
        if name not in done:
            build, shape = MODELS[name]
            work = tmp_path_factory.mktemp(name)
            build(work / f"{name}.onnx")
            done[name] = transform_and_calibrate(work, name, shape, seed=23, samples=3)
        return done[name]

    return get


def _interpreter_record(op):
    """The record the TPU interpreter's kernel for `op` builds."""
    from tpuc.dialects import tpu
    from tpuc.interp.top_ops.registry import LIBRARY
    from tpuc.interp.tpu_ops.params import element_of_value
    from tpuc.ir.core import kind_of
    from tpuc.kernels import data
    from tpuc.kernels.requant import NO_RELU

    source = {v: k for k, v in tpu.MIRRORS.items()}[type(op)]
    record = LIBRARY[source][0](op)
    if kind_of(op) == "int":  # nearest resize on stored values
        return data.Stored(record, NO_RELU, element_of_value(op.results[0]))
    return record


def deploy_and_check(work, name: str, mode: str, tmp_path) -> Counter:
    """Deploy (bit-exact check against the interpreter), then: every step
    engine-level, records equal the interpreter's. Counts commands by name
    (and kind)."""

    argv = ["--mlir", str(work / f"{name}.mlir"), "--chip", "bm1684x", "--quantize", mode]
    argv += ["--test_input", str(work / f"{name}_in_f32.npz")]
    argv += ["--model", str(tmp_path / f"{name}.bmodel")]
    if mode == "INT8":
        argv += ["--calibration_table", str(work / f"{name}_cali_table")]
    assert model_deploy.run(argv) == 0  # fails unless bmodel == TPU interpreter bit for bit
    ops = tpu_ops(tmp_path, f"{name}_*_tpu.mlir")
    rows = json.loads(next(tmp_path.glob(f"{name}_*_tensor_location.json")).read_text())
    names: dict[int, str] = {}
    for row in rows["tensors"]:  # a layer's first result names its op
        names.setdefault(row["layer_id"], row["name"])
    seen = Counter()
    for _, steps in load_bmodel(tmp_path / f"{name}.bmodel").subnets:
        for step in steps:
            assert isinstance(step, EngineStep | CopyStep), step.what  # nothing transitional
            if isinstance(step, CopyStep) or step.name not in ("TIU_RESIZE", "TIU_RNN", "CPU_TOPK"):
                continue
            op = ops[names[step.command.header.layer_id]]
            assert step.record == _interpreter_record(op), op.name
            seen[step.name, step.command.header.kind] += 1
    return seen


@pytest.mark.parametrize("mode", ["F32", "F16", "INT8"])
def test_resize_modes_bit_exact(prepared, tmp_path, mode):
    seen = deploy_and_check(prepared("resize"), "resize", mode, tmp_path)
    if mode == "INT8":  # the nearest ones on stored integers, the others in float
        assert seen == {("TIU_RESIZE", 1): 2, ("TIU_RESIZE", 0): 4}, seen
    else:
        assert seen == {("TIU_RESIZE", 0): 6}, seen


@pytest.mark.parametrize("mode", ["F32", "F16", "INT8"])
def test_lstm_gru_bit_exact(prepared, tmp_path, mode):
    seen = deploy_and_check(prepared("rnn"), "rnn", mode, tmp_path)
    assert seen == {("TIU_RNN", 0): 4}, seen


@pytest.mark.parametrize("mode", ["F32", "F16", "INT8"])
def test_topk_cpu_commands_bit_exact(prepared, tmp_path, mode):
    from tpuc.target.bmodel import load_bmodel_file

    seen = deploy_and_check(prepared("topk"), "topk", mode, tmp_path)
    assert seen == {("CPU_TOPK", 0): 2}, seen
    param = load_bmodel_file(tmp_path / "topk.bmodel").nets[0].parameters[0]
    cpu = [p for s in param.subnets if s.mode == "CPU" for p in s.cpu_params]
    assert [p.op_type for p in cpu] == [isa.CPU_TOPK] * 2


# --- commands built directly ----------------------------------------------------------------

START = 0x1_0000_0000


def _device():
    from tpuc.target.runtime.device import Device

    dev = Device("bm1684x", START, 1 << 20, npu_num=4, lmem_bytes=1024)
    dev.allocate("activations", START, 1 << 16)
    return dev


def test_batch_first_gru_equals_the_interpreter():
    """A bidirectional batch-first GRU (linear_before_reset, bias, initial h)
    in f16: the record and every stored result equal the interpreter's."""
    from xdsl.dialects.builtin import TensorType, f16

    from tpuc.dialects import top, tpu
    from tpuc.interp.top_ops.rnn import recurrent_record
    from tpuc.interp.tpu_interpreter import tpu_kernel_for
    from tpuc.passes.address_assign import set_address
    from tpuc.passes.codegen.engine_rules import engine_commands
    from tpuc.target.runtime.engine import engine_step

    rng = np.random.default_rng(31)
    batch, seq, inp, hid = 2, 3, 4, 5
    shapes = {
        "x": (batch, seq, inp),
        "w": (2, 3 * hid, inp),
        "r": (2, 3 * hid, hid),
        "b": (2, 6 * hid),
        "h": (batch, 2, hid),
    }
    arrays = {k: (rng.standard_normal(s) * 0.5).astype(np.float16) for k, s in shapes.items()}
    dev = _device()
    region, offset, sources = dev.regions[0], 0, []
    for name, array in arrays.items():
        value = top.WeightOp.make([], name, result_types=[TensorType(f16, list(array.shape))])
        set_address(value.output, START + offset)
        region.bytes[offset : offset + array.nbytes] = array.reshape(-1).view(np.uint8)
        sources.append(value.output)
        offset += 1024
    results = [TensorType(f16, [batch, seq, 2, hid]), TensorType(f16, [batch, 2, hid])]
    attrs = dict(hidden_size=hid, bidirectional=True, batch_first=True, linear_before_reset=True)
    op = tpu.GRUOp.make(sources, "y", attrs, result_types=results, result_names=["y", "yh"])
    for i, value in enumerate(op.results):
        set_address(value, START + 8192 + 256 * i)
    (cmd,) = engine_commands(op, 0)
    assert cmd.header.opcode == isa.TIU_RNN and cmd.header.kind == 0
    block = block_codec.decode_block(isa.TIU_RNN, cmd.params)
    assert block == isa.RnnBlock(isa.RNN_GRU, 2, 1, 1, isa.RNN_BIAS | isa.RNN_INITIAL_H, hid)
    step = engine_step(cmd, dev, "x")
    assert step.record == recurrent_record(op)
    step.run()
    expected = tpu_kernel_for(op, "float")(op, [a.astype(np.float32) for a in arrays.values()])
    for i, want in enumerate(expected):
        at = 8192 + 256 * i
        got = region.bytes[at : at + want.size * 2].view(np.float16).reshape(want.shape)
        np.testing.assert_array_equal(got.astype(np.float32), want)


def _command(opcode, operands, results, block, engine=0, kind=0):
    from tpuc.target.isa.records import Command, Header

    params = block_codec.encode_block(opcode, block)
    header = Header(
        opcode, engine, 1, 0, len(operands), len(results), len(params) // 128, kind=kind
    )
    return Command(header, operands, results, params)


def _error(cmd) -> str:
    from tpuc.base.errors import TpucError
    from tpuc.target.runtime.engine import engine_step

    with pytest.raises(TpucError) as info:
        engine_step(cmd, _device(), "m.bmodel: subnet 0 TIU command 3")
    return str(info.value)


def test_malformed_commands_fail_at_load():
    from tpuc.target.isa.records import ENGINE_CPU, TensorRecord

    q = dict(flags=1, storage_min=-128, storage_max=127)
    x = TensorRecord(START, "i8", (1, 1, 2, 2), scale=0.5, **q)
    y = TensorRecord(START + 64, "i8", (1, 1, 4, 4), scale=0.25, **q)
    nearest = isa.ResizeBlock(0, 0, 0, 0, 2, 0, -0.75, (4, 4), ())
    cmd = _command(isa.TIU_RESIZE, [x], [y], nearest, kind=1)
    assert "malformed TIU_RESIZE: an integer resize whose input and result types" in _error(cmd)
    linear = isa.ResizeBlock(1, 0, 0, 0, 2, 0, -0.75, (4, 4), ())
    cmd = _command(isa.TIU_RESIZE, [x], [y], linear, kind=1)
    assert "an integer linear resize" in _error(cmd)
    f = TensorRecord(START, "f32", (1, 4))
    topk = isa.TopkBlock(-1, 2, 1, 1)
    values, indices = (
        TensorRecord(START + 64, "f32", (1, 2)),
        TensorRecord(START + 96, "f32", (1, 2)),
    )
    message = _error(_command(isa.CPU_TOPK, [f], [values, indices], topk))
    assert message == "m.bmodel: subnet 0 TIU command 3: CPU_TOPK on the wrong engine"
    sfu = isa.SfuBlock(0, 0.0, 0.0)
    message = _error(_command(isa.TIU_SFU, [f], [values], sfu, engine=ENGINE_CPU))
    assert message.endswith("TIU_SFU on the wrong engine")
    absent = TensorRecord(0, "f32", (), space=0xFF)
    rnn = [TensorRecord(START, "f32", s) for s in ((2, 1, 3), (1, 15, 3), (1, 15, 5))]
    ys = [
        TensorRecord(START + 512, "f32", (2, 1, 1, 5)),
        TensorRecord(START + 768, "f32", (1, 1, 5)),
    ]
    gru = isa.RnnBlock(isa.RNN_GRU, 1, 0, 0, isa.RNN_BIAS, 5)
    message = _error(_command(isa.TIU_RNN, [*rnn, absent, absent], ys, gru))
    assert "optional operands 0x0, the block says 0x1" in message
    two = isa.RnnBlock(isa.RNN_GRU, 2, 0, 0, 0, 5)
    message = _error(_command(isa.TIU_RNN, [*rnn, absent, absent], ys, two))
    assert "a filter of shape [1, 15, 3] for 2 directions" in message
