"""Engine-level commands in the simulator: the records it decodes equal the
TPU interpreter's for the same ops (so both run one kernel call), every
rule-covered INT8 op of the tiny CNN compiles to engine commands, and bad
commands (unknown opcode, a block of the wrong size, a local address past
its lane, a tensor past global memory) fail with one line naming the
engine and the command index."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
from layer_ids import group_move, layer_names, tpu_ops
from tiny_cnn import prepared  # noqa: F401

from tpuc.base.errors import TpucError
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    ENGINE_GDMA,
    ENGINE_TIU,
    SPACE_LOCAL,
    TENSOR_QUANTIZED,
    Command,
    Header,
    TensorRecord,
)
from tpuc.target.runtime import load_bmodel
from tpuc.target.runtime.device import Device
from tpuc.target.runtime.engine import CopyStep, EngineStep, element_of, engine_step
from tpuc.target.runtime.program import command_name
from tpuc.tools import model_deploy

START = 0x1_0000_0000


@pytest.fixture(scope="module")
def int8_deploy(prepared, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("engine")
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "INT8"]
    argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
    argv += ["--test_input", str(prepared / "cnn_in_f32.npz"), "--model", str(out / "cnn.bmodel")]
    # global layers: a local layer's per-channel values are in local memory
    # only when it runs, so its record is complete only then
    argv += ["--disable_layer_group"]
    assert model_deploy.run(argv) == 0
    return out


def _per_channel(requant, channels: int):
    """Per-tensor values repeated per channel (the same arithmetic)."""

    def expand(values):
        return values * channels if len(values) == 1 else values

    return dataclasses.replace(
        requant, multiplier=expand(requant.multiplier), rshift=expand(requant.rshift)
    )


def test_engine_records_equal_the_interpreters(int8_deploy):
    from tpuc.interp.tpu_ops import compute, compute_conv
    from tpuc.ir.core import body_ops, main_function
    from tpuc.ir.module_io import load_module

    tpu_mlir = next(int8_deploy.glob("*_tpu.mlir"))
    module, _ = load_module(tpu_mlir)
    ops = {op.names[0]: op for op in body_ops(main_function(module).body.block) if op.names}
    names = layer_names(int8_deploy)
    builders = {
        "tpu.Conv2D": compute_conv.conv_params,
        "tpu.MatMul": compute.matmul_params,
        "tpu.Add": compute.add_params,
        "tpu.Sub": compute.add_params,
        "tpu.Mul": compute.mul_params,
        "tpu.Pool2D": compute.pool_params,
        "tpu.Reduce": compute.reduce_params,
    }
    # tpu.Lut has no record builder in the interpreter (the kernel reads the op)
    program = load_bmodel(next(int8_deploy.glob("*.bmodel")))
    kinds, checked = Counter(), 0
    for _, steps in program.subnets:
        for step in steps:
            kinds[type(step).__name__] += 1
            if not isinstance(step, EngineStep) or step.name in ("TIU_CVT", "TIU_LUT"):
                continue
            op = ops[names[step.command.header.layer_id]]
            expected = builders[op.name](op)
            got = step.record
            channels = step.command.results[0].shape[got.requant.axis]
            got = dataclasses.replace(got, requant=_per_channel(got.requant, channels))
            expected = dataclasses.replace(
                expected, requant=_per_channel(expected.requant, channels)
            )
            assert got == expected, op.name
            checked += 1
    assert checked >= 2 and kinds["EngineStep"] >= 2, kinds


# --- bad commands --------------------------------------------------------------------------


def device() -> Device:
    dev = Device("bm1684x", START, 1 << 20, npu_num=4, lmem_bytes=1024)
    dev.allocate("activations", START, 4096)
    return dev


def record(addr=START, shape=(1, 4), dtype="i8", space=0) -> TensorRecord:
    return TensorRecord(addr, dtype, shape, space=space)


def command(opcode, operands, results, params=b"", engine=ENGINE_TIU) -> Command:
    header = Header(opcode, engine, 4, 0, len(operands), len(results), len(params) // 128, kind=1)
    return Command(header, operands, results, params)


def error_of(cmd: Command) -> str:
    with pytest.raises(TpucError) as info:
        engine_step(cmd, device(), command_name("m.bmodel: subnet 0", cmd, 0))
    message = str(info.value)
    assert "\n" not in message
    return message


ADD = block_codec.encode_block(isa.TIU_ARITH, isa.ArithBlock(0, 2, (1, 1), isa.RequantBlock()))


def test_unknown_opcode():
    message = error_of(command(0x2FF, [record()], [record(START + 64)]))
    assert message == "m.bmodel: subnet 0 TIU command 3: unknown opcode 0x2ff"


def test_block_of_the_wrong_size():
    cmd = command(isa.TIU_ARITH, [record(), record()], [record(START + 64)], ADD + bytes(128))
    assert error_of(cmd) == (
        "m.bmodel: subnet 0 TIU command 3: parameter block of 256 bytes, TIU_ARITH takes 128"
    )


def test_local_address_past_the_lane():
    src = record()
    dst = record(1024 - 2, space=SPACE_LOCAL)  # 4 bytes from 2 before lane 0's end
    message = error_of(command(isa.GDMA_LOAD, [src], [dst], engine=ENGINE_GDMA))
    assert message.startswith("m.bmodel: subnet 0 GDMA command 3 result 0: local [0x3fe, 0x402)")
    assert "runs past lane 0's 1024 bytes" in message
    far = record(4 * 1024, space=SPACE_LOCAL)
    message = error_of(command(isa.GDMA_LOAD, [src], [far], engine=ENGINE_GDMA))
    assert "past the 4 NPU lanes" in message


def test_tensor_past_global_memory():
    cmd = command(isa.TIU_ARITH, [record(), record(START + 4094)], [record(START + 64)], ADD)
    message = error_of(cmd)
    assert message.startswith("m.bmodel: subnet 0 TIU command 3 operand 1: [0x100000ffe")
    assert "outside the bmodel's memory" in message


def test_load_store_round_trip_through_local_memory():
    dev = device()
    region = dev.regions[0]
    region.bytes[:4] = [1, 2, 3, 4]
    local = record(1024 + 8, space=SPACE_LOCAL)  # lane 1, offset 8
    load = command(isa.GDMA_LOAD, [record()], [local], engine=ENGINE_GDMA)
    store = command(isa.GDMA_STORE, [local], [record(START + 128)], engine=ENGINE_GDMA)
    for cmd in (load, store):
        engine_step(cmd, dev, "x").run()
    assert list(region.bytes[128:132]) == [1, 2, 3, 4]


def test_lut_runs_on_the_library():
    dev = device()
    region = dev.regions[0]
    region.bytes[0:4] = np.array([-128, -1, 0, 127], np.int8).view(np.uint8)
    table = np.arange(256, dtype=np.int32)[::-1].copy()  # 255 - index
    region.bytes[256 : 256 + 1024] = table.view(np.uint8)
    q = dict(flags=1, scale=0.5, storage_min=-128, storage_max=127)
    x = TensorRecord(START, "i8", (1, 4), **q)
    tab = TensorRecord(START + 256, "i32", (256,), flags=4)
    out = TensorRecord(START + 64, "f16", (1, 4))
    params = block_codec.encode_block(isa.TIU_LUT, isa.LutBlock(0))
    engine_step(command(isa.TIU_LUT, [x, tab], [out], params), dev, "x").run()
    assert list(region.bytes[64:72].view(np.float16)) == [255, 128, 127, 0]
    bad = block_codec.encode_block(isa.TIU_LUT, isa.LutBlock(1))
    with pytest.raises(TpucError, match="malformed TIU_LUT: a table of shape \\[256\\]"):
        engine_step(command(isa.TIU_LUT, [x, tab], [out], bad), dev, "x")


def test_arith_add_runs_on_the_library():
    dev = device()
    region = dev.regions[0]
    region.bytes[0:4] = np.array([1, -2, 3, 100], np.int8).view(np.uint8)
    region.bytes[16:20] = np.array([5, 6, -7, 100], np.int8).view(np.uint8)
    out = TensorRecord(
        START + 64, "i8", (1, 4), flags=1, scale=1.0, storage_min=-128, storage_max=127
    )
    cmd = command(isa.TIU_ARITH, [record(), record(START + 16)], [out], ADD)
    step = engine_step(cmd, dev, "x")
    assert isinstance(step, EngineStep) and step.record.inputs[0] == element_of(record())
    step.run()
    assert list(region.bytes[64:68].view(np.int8)) == [6, 4, -4, 127]


def test_max_pool_on_stored_values_with_fused_relu():
    dev = device()
    region = dev.regions[0]
    region.bytes[0:16] = np.array(
        [-5, -3, 1, 2, -9, -8, 4, 3, 7, 0, -1, -2, 6, 5, -4, -3], np.int8
    ).view(np.uint8)
    q = dict(flags=1, scale=0.1, zero_point=-2, storage_min=-128, storage_max=127)
    x = TensorRecord(START, "i8", (1, 1, 4, 4), **q)
    out = TensorRecord(START + 64, "i8", (1, 1, 2, 2), **q)
    relu = isa.RequantBlock(relu=1)
    block = isa.PoolBlock(isa.POOL_MAX, 0, 2, 2, 4, (2, 2), (2, 2), (0, 0, 0, 0), relu)
    params = block_codec.encode_block(isa.TIU_POOL, block)
    engine_step(command(isa.TIU_POOL, [x], [out], params), dev, "x").run()
    # window maxima -3, 4, 7, -1; ReLU clamps at Z_out = -2
    assert list(region.bytes[64:68].view(np.int8)) == [-2, 4, 7, -1]


# --- float activations on TIU_SFU ------------------------------------------------------------


def sfu_model(path) -> None:
    """A conv feeding float activations (mirrored ops and tpu.Active modes)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype("f4") * 0.3, "W")
    m = numpy_helper.from_array(rng.standard_normal((6, 6)).astype("f4") * 0.3, "M")
    node = helper.make_node
    acts = [
        node("Sigmoid", ["c"], ["a1"]),
        node("LeakyRelu", ["c"], ["a2"], alpha=0.2),
        node("Elu", ["c"], ["a3"], alpha=0.7),
        node("HardSigmoid", ["c"], ["a4"], alpha=0.25, beta=0.4),
        node("Tanh", ["c"], ["a5"]),
        node("Exp", ["a5"], ["a6"]),
        node("Softplus", ["c"], ["a7"]),
        node("Relu", ["c"], ["a8"]),
        node("Abs", ["c"], ["a9"]),
    ]
    sums = [node("Add", [f"a{2 * i + 1}", f"a{2 * i + 2}"], [f"s{i}"]) for i in range(4)]
    nodes = [
        node("BatchNormalization", ["x", "bn_s", "bn_b", "bn_m", "bn_v"], ["xb"]),
        node("Conv", ["xb", "W"], ["c"], pads=[1, 1, 1, 1]),
        *acts,
        *sums,
        node("MatMul", ["a9", "M"], ["mm"]),
        node("Div", ["s0", "s1"], ["d"]),
        node("Max", ["d", "s2"], ["mx"]),
        node("Sub", ["half", "mx"], ["k"]),
        node("AveragePool", ["k"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        node("MaxPool", ["ap"], ["mp"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        node("Softmax", ["mp"], ["sm0"], axis=-1),
        node("Resize", ["sm0", "", "scales"], ["up"], mode="nearest"),
        node("MaxPool", ["up"], ["sm"], kernel_shape=[2, 3], strides=[2, 3]),
        node("LayerNormalization", ["sm", "g", "bt"], ["ln"], axis=-1, epsilon=1e-5),
        node("Concat", ["s0", "s1", "s2", "s3", "mm", "ln"], ["cat"], axis=1),
        node("Relu", ["cat"], ["y"]),  # fused into the concat
    ]
    graph = helper.make_graph(
        nodes,
        "sfu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24, 6, 6])],
        [
            w,
            m,
            numpy_helper.from_array(np.array(0.5, np.float32), "half"),
            numpy_helper.from_array(np.array([1, 1, 2, 3], np.float32), "scales"),
            numpy_helper.from_array(rng.standard_normal(6).astype("f4"), "g"),
            numpy_helper.from_array(rng.standard_normal(6).astype("f4"), "bt"),
            *(
                numpy_helper.from_array(v.astype("f4"), n)
                for n, v in [
                    ("bn_s", rng.standard_normal(4)),
                    ("bn_b", rng.standard_normal(4)),
                    ("bn_m", rng.standard_normal(4)),
                    ("bn_v", rng.uniform(0.5, 2.0, 4)),
                ]
            ),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)


@pytest.fixture(scope="module")
def sfu_mlir(tmp_path_factory):
    from tpuc.tools import model_transform

    work = tmp_path_factory.mktemp("sfu")
    sfu_model(work / "sfu.onnx")
    x = np.random.default_rng(5).standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.savez(work / "in.npz", x=x)
    argv = ["--model_name", "sfu", "--model_def", str(work / "sfu.onnx")]
    argv += ["--test_input", str(work / "in.npz"), "--mlir", str(work / "sfu.mlir")]
    assert model_transform.run(argv) == 0
    return work


def _interpreter_unary(op):
    """The Unary record the TPU interpreter's float kernel runs for `op`."""
    from tpuc.dialects import tpu
    from tpuc.interp.top_ops.registry import LIBRARY

    if isinstance(op, tpu.ConcatOp):  # its fused ReLU, per input
        from tpuc.kernels.activation import Unary

        limit = op.value("relu_limit")
        return Unary("Relu", None if limit is None else float(limit))
    if isinstance(op, tpu.ActiveOp):
        source = tpu.ACTIVE_MODES[op.value("mode")]
    else:
        source = {v: k for k, v in tpu.MIRRORS.items()}[type(op)]
    build, _ = LIBRARY[source]
    return build(op)


def _interpreter_float_record(op):
    """The record the TPU interpreter's float conv/matmul/arith/pool kernel runs (the TOP one's)."""
    from tpuc.dialects import top, tpu
    from tpuc.interp.top_ops.registry import LIBRARY

    if isinstance(op, tpu.CastOp):
        from tpuc.interp.tpu_ops.cast_ops import cast_params

        return cast_params(op)
    if isinstance(op, tpu.Pool2DOp):
        source = {"Max": top.MaxPoolOp, "Avg": top.AvgPoolOp}[op.value("pool_mode")]
    else:
        source = {v: k for k, v in tpu.MIRRORS.items()}[type(op)]
    build, _ = LIBRARY[source]
    return build(op)


@pytest.mark.parametrize("chip, mode", [("bm1684x", "F16"), ("bm1684x", "F32"), ("cv183x", "BF16")])
def test_float_activations_run_on_sfu_bit_exact(sfu_mlir, tmp_path, chip, mode):

    argv = ["--mlir", str(sfu_mlir / "sfu.mlir"), "--chip", chip, "--quantize", mode]
    argv += ["--test_input", str(sfu_mlir / "sfu_in_f32.npz")]
    argv += ["--model", str(tmp_path / "sfu.bmodel")]
    assert model_deploy.run(argv) == 0  # fails unless bmodel == TPU interpreter bit for bit
    ops = tpu_ops(tmp_path, f"sfu_{chip}_{mode.lower()}_tpu.mlir")
    names = layer_names(tmp_path, f"sfu_{chip}_{mode.lower()}_final.mlir")
    program = load_bmodel(tmp_path / "sfu.bmodel")
    functions = Counter()
    for _, steps in program.subnets:
        for step in steps:
            assert isinstance(step, EngineStep | CopyStep), step.what  # nothing transitional
            if group_move(step):
                continue
            if isinstance(step, CopyStep):
                functions["copies"] += 1
            elif step.name == "TIU_SFU":
                assert step.command.header.kind == 0
                op = ops[names[step.command.header.layer_id]]
                assert step.record == _interpreter_unary(op), op.name
                functions[step.record.kind] += 1
            elif isinstance(step, EngineStep):  # the float conv, matmul, arithmetic and pools
                assert step.command.header.kind == 0
                op = ops[names[step.command.header.layer_id]]
                expected = _interpreter_float_record(op)
                # bm168x F16/BF16 convs, weight matmuls, constant ops and
                # Scale: the chip's arithmetic (half_conv, half_eltwise), its
                # record wrapping the float one
                record = getattr(step.record, "attrs", step.record)
                if step.name == "TIU_CONV":
                    kernel = step.command.operands[1].shape[2:]
                    assert record.geometry(kernel) == expected.geometry(kernel)
                    assert record.relu == expected.relu
                else:
                    assert record == expected, op.name
                functions[step.name] += 1
    # every activation of the model: 9 (Relu, LeakyRelu, Sigmoid, Elu, HardSigmoid and
    # the Active modes Tanh, Exp, Softplus, Abs), the conv and the matmul
    assert functions.pop("TIU_CONV") == 1 and functions.pop("TIU_MATMUL") == 1, functions
    # the input BatchNorm as a Scale, four Adds, the Div, the Max and the reversed
    # SubConst; the three pools
    assert functions.pop("TIU_FARITH") == 8 and functions.pop("TIU_POOL") == 3, functions
    # the softmax and the layer norm; the input and output casts (F16, BF16)
    assert functions.pop("TIU_NORM") == 2, functions
    # the nearest Resize (tpu.Upsample: one stride-0 copy); the concat with its fused
    # ReLU is one SFU Relu per input
    assert functions.pop("copies") == 1 and functions.pop("Relu") == 7, functions
    # bm168x runs a half-float Sigmoid in F32 between two more casts (as TPU-MLIR does)
    casts = 0 if mode == "F32" else 2 + (2 if chip.startswith("bm168") else 0)
    assert functions.pop("TIU_CVT", 0) == casts, functions
    assert sum(functions.values()) == 8, functions


def test_sfu_rounds_to_the_result_type():
    dev = device()
    region = dev.regions[0]
    region.bytes[0:16] = np.array([0.0, 1.0, -2.0, 0.1], np.float32).view(np.uint8)
    out = TensorRecord(START + 64, "f16", (1, 4))
    params = block_codec.encode_block(
        isa.TIU_SFU, isa.SfuBlock(isa.SFU_FUNCTIONS.index("Exp"), 0.0, 0.0)
    )
    step = engine_step(command(isa.TIU_SFU, [record(dtype="f32")], [out], params), dev, "x")
    assert step.record.kind == "Exp"
    step.run()
    expected = np.exp(np.array([0.0, 1.0, -2.0, 0.1], np.float32)).astype(np.float16)
    assert np.array_equal(region.bytes[64:72].view(np.float16), expected)


# --- RequantInt / RequantIntAxis / DequantInt on TIU_CVT (rescale mode) ----------------------


@pytest.mark.parametrize(
    "cls, out, attrs",
    [
        ("RequantIntOp", ("u8", 0.5, 7), dict(multiplier=[5], rshift=[1])),
        ("RequantIntOp", ("i8", 1.0, 0), dict(multiplier=[3], rshift=[2], round_mode="HalfToEven")),
        ("RequantIntAxisOp", ("i8", 1.0, -1), dict(multiplier=[9], rshift=[3], do_relu=True)),
        ("DequantIntOp", None, dict(multiplier=[7], rshift=[4])),
    ],
)
def test_rescale_commands_equal_the_interpreter(cls, out, attrs):
    from xdsl.dialects.builtin import TensorType, f32

    from tpuc.dialects import top, tpu
    from tpuc.dialects.quant import UniformQuantizedType
    from tpuc.interp.tpu_ops import TPU_KERNELS
    from tpuc.interp.tpu_ops.cast_ops import rescale_params
    from tpuc.ir.core import kind_of
    from tpuc.passes.address_assign import set_address
    from tpuc.passes.codegen.engine_rules import engine_commands

    op_class = getattr(tpu, cls)
    x = np.array([-128, -7, -1, 0, 1, 5, 100, 127], np.int8)
    in_type = UniformQuantizedType("i8", 0.25, -3)
    out_type = f32 if out is None else UniformQuantizedType(*out)
    source = top.WeightOp.make([], "x", result_types=[TensorType(in_type, [1, 8])]).output
    op = op_class.make([source], "y", attrs, result_types=[TensorType(out_type, [1, 8])])
    set_address(op.operands[0], START)
    set_address(op.results[0], START + 64)
    (cmd,) = engine_commands(op, 0)
    assert cmd.header.opcode == isa.TIU_CVT
    dev = device()
    region = dev.regions[0]
    region.bytes[0:8] = x.view(np.uint8)
    step = engine_step(cmd, dev, "x")
    assert step.record == rescale_params(op)
    step.run()
    dtype = np.dtype({None: "float32", "i8": "int8", "u8": "uint8"}[out and out[0]])
    got = region.bytes[64 : 64 + 8 * dtype.itemsize].view(dtype).astype(np.float32)
    expected = TPU_KERNELS[(op_class, kind_of(op))](op, [x.astype(np.float32).reshape(1, 8)])
    np.testing.assert_array_equal(got, expected.reshape(-1))


def test_rescale_lists_per_channel_decline():
    from xdsl.dialects.builtin import TensorType

    from tpuc.dialects import top, tpu
    from tpuc.dialects.quant import UniformQuantizedType
    from tpuc.passes.codegen.engine_rules import engine_commands

    q = UniformQuantizedType("i8", 1.0, 0)
    source = top.WeightOp.make([], "x", result_types=[TensorType(q, [1, 2, 2])]).output
    attrs = dict(multiplier=[1, 3], rshift=[0, 1])
    op = tpu.RequantIntAxisOp.make([source], "y", attrs, result_types=[TensorType(q, [1, 2, 2])])
    assert engine_commands(op, 0) is None  # per-channel lists stay transitional


# --- TIU_ARITH with one rshift per term (bm168x's Add/Sub) -----------------------------------


def arith_on(op: int, a, b, multipliers, rshifts, relu: int = 0) -> list[int]:
    """One TIU_ARITH over two i8 rows in the simulator: its i8 result."""
    dev = device()
    region = dev.regions[0]
    n = len(a)
    region.bytes[0:n] = np.array(a, np.int8).view(np.uint8)
    region.bytes[64 : 64 + n] = np.array(b, np.int8).view(np.uint8)
    requant = isa.RequantBlock(1, 0, isa.ROUND_MODES.index("HalfUp"), relu)
    block = isa.ArithBlock(op, 2, multipliers, requant, rshifts)
    q8 = dict(flags=TENSOR_QUANTIZED, storage_min=-128, storage_max=127)
    operands = [TensorRecord(START + 64 * i, "i8", (1, n), **q8) for i in range(2)]
    out = TensorRecord(START + 128, "i8", (1, n), **q8)
    cmd = command(isa.TIU_ARITH, operands, [out], block_codec.encode_block(isa.TIU_ARITH, block))
    engine_step(cmd, dev, "x").run()
    return region.bytes[128 : 128 + n].view(np.int8).tolist()


def test_arith_rounds_each_term_by_its_own_rshift():
    """Hand-computed: term_i = (q·M_i + 2^(r_i−1)) >> r_i (half up, ties toward
    +inf), then the sum, relu, saturation. 3/2 + 12/8 is 2 + 2 = 4 here, where
    rounding the sum once gives 3."""
    a = [1, -1, 3, -3, 127, -128, 0, 5]
    b = [0, 0, 4, -4, 127, -128, 4, -12]
    # q/2 -> 1 0 2 -1 64 -64 0 3; 3q/8 -> 0 0 2 -1 48 -48 2 -4
    got = arith_on(isa.ARITH_ADD, a, b, (128, 192), (8, 9))
    assert got == [1, 0, 4, -2, 112, -112, 2, -1]
    # unshifted terms past 16 bits (±64,770) saturate
    got = arith_on(
        isa.ARITH_ADD, [127, -128, 100, -100], [127, -128, -100, 100], (255, 255), (0, 0)
    )
    assert got == [127, -128, 0, 0]


def test_arith_sub_rounds_the_subtrahend_before_its_sign():
    """Hand-computed: 2.5q half up, minus 200q/512 half up (32 -> 12.5 -> 13,
    −32 -> −12.5 -> −12); 127.5 -> 128 saturates; relu clamps at 0."""
    a = [1, -1, 3, 2, -5, 51]
    b = [0, 32, -32, 4, -4, 0]
    got = arith_on(isa.ARITH_SUB, a, b, (160, 200), (6, 9))
    assert got == [3, -15, 20, 3, -10, 127]
    got = arith_on(isa.ARITH_SUB, a, b, (160, 200), (6, 9), relu=1)
    assert got == [3, 0, 20, 3, 0, 127]
