"""Engine-level commands in the simulator: the records it decodes equal the
TPU interpreter's for the same ops (so both run one kernel call), every
rule-covered INT8 op of the tiny CNN compiles to engine commands, and bad
commands (unknown opcode, a block of the wrong size, a local address past
its lane, a tensor past global memory) fail with one line naming the
engine and the command index."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import numpy as np
import pytest
from tiny_cnn import prepared  # noqa: F401

from tpuc.errors import TpucError
from tpuc.isa import engine as isa
from tpuc.isa.records import (
    ENGINE_GDMA,
    ENGINE_TIU,
    SPACE_LOCAL,
    Command,
    Header,
    TensorRecord,
)
from tpuc.runtime import load_bmodel
from tpuc.runtime.device import Device
from tpuc.runtime.engine import EngineStep, element_of
from tpuc.runtime.executable import make_step
from tpuc.runtime.program import command_name
from tpuc.tools import model_deploy

START = 0x1_0000_0000


@pytest.fixture(scope="module")
def int8_deploy(prepared, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("engine")
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "INT8"]
    argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
    argv += ["--test_input", str(prepared / "cnn_in_f32.npz"), "--model", str(out / "cnn.bmodel")]
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
    from tpuc.interp.tpu_kernels import compute, compute_conv
    from tpuc.ir import body_ops, main_function
    from tpuc.module_io import load_module

    tpu_mlir = next(int8_deploy.glob("*_tpu.mlir"))
    module, _ = load_module(tpu_mlir)
    ops = {op.names[0]: op for op in body_ops(main_function(module).body.block) if op.names}
    rows = json.loads(next(int8_deploy.glob("*_tensor_location.json")).read_text())["tensors"]
    names = {row["layer_id"]: row["name"] for row in rows}
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
        make_step(cmd, device(), command_name("m.bmodel: subnet 0", cmd, 0))
    message = str(info.value)
    assert "\n" not in message
    return message


ADD = isa.encode_block(isa.TIU_ARITH, isa.ArithBlock(0, 2, (1, 1), isa.RequantBlock()))


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
        make_step(cmd, dev, "x").run()
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
    params = isa.encode_block(isa.TIU_LUT, isa.LutBlock(0))
    make_step(command(isa.TIU_LUT, [x, tab], [out], params), dev, "x").run()
    assert list(region.bytes[64:72].view(np.float16)) == [255, 128, 127, 0]
    bad = isa.encode_block(isa.TIU_LUT, isa.LutBlock(1))
    with pytest.raises(TpucError, match="malformed TIU_LUT: a table of shape \\[256\\]"):
        make_step(command(isa.TIU_LUT, [x, tab], [out], bad), dev, "x")


def test_arith_add_runs_on_the_library():
    dev = device()
    region = dev.regions[0]
    region.bytes[0:4] = np.array([1, -2, 3, 100], np.int8).view(np.uint8)
    region.bytes[16:20] = np.array([5, 6, -7, 100], np.int8).view(np.uint8)
    out = TensorRecord(
        START + 64, "i8", (1, 4), flags=1, scale=1.0, storage_min=-128, storage_max=127
    )
    cmd = command(isa.TIU_ARITH, [record(), record(START + 16)], [out], ADD)
    step = make_step(cmd, dev, "x")
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
    params = isa.encode_block(isa.TIU_POOL, block)
    make_step(command(isa.TIU_POOL, [x], [out], params), dev, "x").run()
    # window maxima -3, 4, 7, -1; ReLU clamps at Z_out = -2
    assert list(region.bytes[64:68].view(np.int8)) == [-2, 4, 7, -1]
