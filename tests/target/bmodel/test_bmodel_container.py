"""The bmodel container: round trip, determinism, checks on damaged files,
and the published field ids of the schema."""

from __future__ import annotations

import hashlib
import re
import struct

import pytest

from tpuc.base.errors import TpucError
from tpuc.target.bmodel import (
    DTYPE_CODES,
    HEADER_SIZE,
    BModel,
    CmdGroup,
    CpuParam,
    Location,
    Net,
    NetParameter,
    SubNet,
    TensorDesc,
    bmodel_time,
    load_bmodel_file,
    read_bmodel,
    write_bmodel,
)
from tpuc.target.bmodel.schema import schema

COEFF = bytes(range(256)) * 33 + b"\x07" * 100  # 8548 bytes
BDC = hashlib.sha512(b"bdc").digest() * 2  # 128 bytes of "commands"
GDMA = b"\xab\xcd" * 48
CPU_PARAM = struct.pack("<iif", 3, 1, 0.5)  # a TopK-like parameter record
ALL_DTYPES = ("f32", "f16", "bf16", "i8", "u8", "i16", "u16", "i32", "u32")


def _tensor(i: int, dtype: str, shape=(1, 3, 4, 4), scale=1.0, zp=0) -> TensorDesc:
    size = 48 * {"f32": 4, "i32": 4, "u32": 4, "f16": 2, "bf16": 2, "i16": 2, "u16": 2}.get(
        dtype, 1
    )
    return TensorDesc(f"t{i}_{dtype}", dtype, shape, 0x1_0000_3000 + 0x1000 * i, size, scale, zp)


def sample_model() -> BModel:
    """Two nets' worth of structure in one net: a TPU subnet, a CPU subnet,
    a last TPU subnet; every dtype; shared (identical) command bytes."""
    tensors = [_tensor(i, dtype) for i, dtype in enumerate(ALL_DTYPES)]
    tensors[3] = _tensor(3, "i8", scale=0.0625, zp=0)
    tensors[4] = _tensor(4, "u8", (2, 5), scale=0.125, zp=128)
    tensors[5] = _tensor(5, "i16", (), scale=0.5, zp=-3)
    group_a = CmdGroup(BDC, GDMA, 2, 3, len(BDC), len(GDMA))
    group_b = CmdGroup(BDC[::-1], GDMA, 1, 3, len(BDC), len(GDMA))  # same gdma bytes
    subnets = [
        SubNet(0, "TPU", [group_a], [], tensors[:1], tensors[1:3], [1]),
        SubNet(1, "CPU", [], [CpuParam(7, CPU_PARAM)], tensors[2:3], tensors[3:4], [2]),
        SubNet(2, "TPU", [group_b], [], tensors[3:4], tensors[4:], []),
    ]
    param = NetParameter(
        inputs=tensors[:1],
        outputs=tensors[4:],
        ctx_addr=0x1_0000_3000,
        ctx_size=0x9000,
        coeff_addr=0x1_0000_0000,
        coeff=COEFF,
        cmd_groups=[group_a, group_b],
        subnets=subnets,
        coeff_locations=[Location("conv_w", 0, 4096), Location("conv_b", 4096, 16)],
    )
    return BModel("bm1684x", [Net("net0", [param])], version="0.1.0", time="2026-11-21 18:03:07")


def _header(data: bytes) -> tuple[int, ...]:
    return struct.unpack_from("<16I", data)


def test_round_trip_equal():
    model = sample_model()
    data = write_bmodel(model)
    back = read_bmodel(data, "m.bmodel")
    assert back == model
    assert back.chip == "BM1684X"
    param = back.nets[0].parameters[0]
    assert [s.mode for s in param.subnets] == ["TPU", "CPU", "TPU"]
    assert param.subnets[1].cpu_params[0].param == CPU_PARAM
    every = [*param.inputs, *param.outputs, *(t for s in param.subnets for t in s.outputs)]
    assert {t.dtype for t in every} == set(ALL_DTYPES)
    assert param.outputs[1].shape == () and param.outputs[1].zero_point == -3


def test_header_layout_and_sharing():
    data = write_bmodel(sample_model())
    magic, header_size, fb_size, bin_size, *reserved = _header(data)
    assert (magic, header_size) == (0xFF55AAEE, HEADER_SIZE)
    assert struct.pack("<I", reserved[0]) == b"TPD1"  # the digest's tag, then two digests
    assert reserved[9:] == [0] * 3
    assert len(data) == HEADER_SIZE + fb_size + bin_size
    # the coefficients come first in the blob; GDMA and group_a are stored once
    blob = data[HEADER_SIZE + fb_size :]
    assert blob.startswith(COEFF)
    assert blob.count(GDMA) == 1 and blob.count(BDC) == 1
    assert bin_size < len(COEFF) + 3 * len(BDC) + 4 * len(GDMA) + len(CPU_PARAM)


def test_deterministic():
    assert write_bmodel(sample_model()) == write_bmodel(sample_model())


def test_scale_is_stored_as_float32():
    tensor = TensorDesc("x", "i8", [1, 2], 0, 2, scale=0.1)
    assert tensor.scale == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert tensor.shape == (1, 2)


def test_empty_model_parts():
    model = BModel("cv183x", [Net("n", [NetParameter([], [])])], time="")
    assert read_bmodel(write_bmodel(model), "e.bmodel") == model


def test_truncated():
    data = write_bmodel(sample_model())
    with pytest.raises(
        TpucError,
        match=rf"m.bmodel: truncated bmodel: header says {len(data)} "
        rf"bytes, file has {len(data) - 1}$",
    ):
        read_bmodel(data[:-1], "m.bmodel")
    with pytest.raises(TpucError, match="m.bmodel: truncated bmodel: 10 bytes"):
        read_bmodel(data[:10], "m.bmodel")


def test_trailing_bytes():
    data = write_bmodel(sample_model())
    with pytest.raises(TpucError, match="m.bmodel: bmodel size mismatch"):
        read_bmodel(data + b"\0", "m.bmodel")


def test_flipped_coefficient_byte():
    data = bytearray(write_bmodel(sample_model()))
    at = data.find(COEFF) + 1000
    data[at] ^= 0x01
    with pytest.raises(
        TpucError,
        match=r"m.bmodel: net 'net0': coefficient checksum mismatch.*"
        r"the file is corrupt$",
    ):
        read_bmodel(bytes(data), "m.bmodel")


def test_bad_magic_and_header_size():
    data = bytearray(write_bmodel(sample_model()))
    bad = bytes(data[:1]) + b"\x00" + bytes(data[2:])
    with pytest.raises(TpucError, match=r"m.bmodel: not a bmodel \(magic 0xFF5500EE"):
        read_bmodel(bad, "m.bmodel")
    data[4] = 32
    with pytest.raises(TpucError, match="m.bmodel: unsupported bmodel header size 32"):
        read_bmodel(bytes(data), "m.bmodel")


def test_binary_out_of_range():
    """Shorten the blob (and the header with it): the last payload, the CPU
    parameter, now lies outside the blob."""
    data = write_bmodel(sample_model())
    _, _, fb_size, bin_size = _header(data)[:4]
    cut = data[: len(data) - 4]
    cut = struct.pack("<4I", 0xFF55AAEE, HEADER_SIZE, fb_size, bin_size - 4) + cut[16:]
    with pytest.raises(
        TpucError,
        match=r"m.bmodel: net 'net0' subnet 1 cpu param: Binary\(start="
        rf"\d+, size={len(CPU_PARAM)}\) lies outside the {bin_size - 4}-byte",
    ):
        read_bmodel(cut, "m.bmodel")


def undigested(data: bytes) -> bytearray:
    """The file without its header digest (as another writer leaves it), so
    the flatbuffer parser itself sees damaged bytes."""
    out = bytearray(data)
    out[16:HEADER_SIZE] = bytes(HEADER_SIZE - 16)
    return out


def test_broken_flatbuffer():
    data = undigested(write_bmodel(sample_model()))
    data[HEADER_SIZE : HEADER_SIZE + 4] = struct.pack("<I", 0xFFFFFF00)
    with pytest.raises(TpucError, match="m.bmodel: the bmodel flatbuffer does not parse"):
        read_bmodel(bytes(data), "m.bmodel")


def test_damaged_flatbuffer_fails_cleanly():
    """Any damaged flatbuffer byte gives a result or a TpucError, never a crash."""
    data = undigested(write_bmodel(sample_model()))
    fb_size = _header(data)[2]
    for at in range(HEADER_SIZE, HEADER_SIZE + fb_size, 3):
        damaged = bytearray(data)
        damaged[at] ^= 0xFF
        try:
            read_bmodel(bytes(damaged), "m.bmodel")
        except TpucError as exc:
            assert str(exc).startswith("m.bmodel: ") and "\n" not in str(exc)


def test_writer_errors():
    with pytest.raises(TpucError, match="tensor 'x': unknown bmodel dtype 'f64'"):
        TensorDesc("x", "f64", (1,), 0, 8)
    with pytest.raises(TpucError, match="subnet 3: unknown run mode 'GPU'"):
        SubNet(3, "GPU")
    model = sample_model()
    model.nets[0].parameters[0].inputs[0].device_addr = -1
    with pytest.raises(TpucError, match=r"bmodel Tensor.device_addr = -1 does not fit a uint64"):
        write_bmodel(model)


def test_file_round_trip_and_missing(tmp_path):
    path = tmp_path / "m.bmodel"
    path.write_bytes(write_bmodel(sample_model()))
    assert load_bmodel_file(path) == sample_model()
    with pytest.raises(TpucError, match=r"nope.bmodel: no such file"):
        load_bmodel_file(tmp_path / "nope.bmodel")


def test_bmodel_time(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    assert bmodel_time() == "1970-01-01 00:00:00"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1795716187")  # hand-checked with `date -u -d @...`
    assert bmodel_time() == "2026-11-26 18:03:07"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    with pytest.raises(TpucError, match="SOURCE_DATE_EPOCH='yesterday'"):
        bmodel_time()
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", bmodel_time())


def test_model_defaults():
    model = BModel("bm1688", [])
    assert model.type == "tpuc" and model.version and model.chip == "BM1688"


# Field ids of the published TPU-MLIR schema (tpu-mlir-facts.md §7 and
# include/tpu_mlir/Builder/BM168x/bmodel.fbs), written out by hand.
PUBLISHED_IDS = {
    "Model": [
        "type",
        "version",
        "time",
        "chip",
        "net",
        "neuron_size",
        "kernel_module",
        "device_num",
        "cpuop_module",
        "bmodel_type",
        "lib_backend",
    ],
    "Net": ["name", "net_static", "net_dynamic", "parameter", "cascade", "addr_mode"],
    "NetParameter": [
        "input_tensor",
        "output_tensor",
        "ctx_addr",
        "ctx_size",
        "coeff_mem",
        "is_dynamic",
        "n_dynamic",
        "h_w_dynamic",
        "cmd_group",
        "net_profile",
        "stage_ir",
        "binary_ir",
        "sub_net",
        "cpu_mem_size",
        "ctx_sizes",
        "net_stat",
        "core_num",
    ],
    "Tensor": [
        "name",
        "data_type",
        "gmem_stmode",
        "device_addr",
        "size",
        "shape",
        "mem_type",
        "scale",
        "cpu_addr",
        "pad_h",
        "zero_point",
        "hidden",
        "index",
    ],
    "CoeffMem": ["address", "check_code", "binary_coeff", "location"],
    "CmdGroup": [
        "bdc_num",
        "gdma_num",
        "binary_bdc",
        "binary_gdma",
        "bdc_cmd_byte",
        "gdma_cmd_byte",
    ],
    "SubNet": [
        "subnet_mode",
        "cmd_group",
        "cpu_param",
        "input_tensor",
        "output_tensor",
        "is_dynamic",
        "ir_offset",
        "ir_len",
        "n_dynamic",
        "h_w_dynamic",
        "id",
        "next_subnet_ids",
    ],
    "CpuParam": ["op_type", "binary_param", "cpu_const", "is_custom"],
    "Location": ["name", "offset", "size"],
    "Shape": ["dim"],
}


@pytest.mark.parametrize("table", sorted(PUBLISHED_IDS))
def test_published_field_ids(table):
    fields = schema()[table].fields
    for slot, name in enumerate(PUBLISHED_IDS[table]):
        assert fields[name].slot == slot, f"{table}.{name}"


def test_dtype_codes():
    assert DTYPE_CODES == {
        "f32": 0,
        "f16": 1,
        "i8": 2,
        "u8": 3,
        "i16": 4,
        "u16": 5,
        "i32": 6,
        "u32": 7,
        "bf16": 8,
    }


def test_checksum_is_sha256_of_coefficients():
    data = write_bmodel(sample_model())
    assert hashlib.sha256(COEFF).digest() in data
