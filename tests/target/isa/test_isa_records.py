"""tpuc/target/isa records, command streams and dtype mapping against byte vectors
written out by hand from docs/isa.md (never produced by the code under test)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    IntegerType,
    Signedness,
    f32,
    i32,
)

from tpuc.base.dtypes import from_storage, to_storage
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.passes.codegen.element_types import dtype_fields
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    ABSENT,
    RECORD_BYTES,
    SPACE_ABSENT,
    TENSOR_COEFF,
    TENSOR_LANES_AXIS0,
    TENSOR_LANES_AXIS1,
    TENSOR_QUANTIZED,
    TENSOR_SIGNED_INT,
    Command,
    Header,
    TensorRecord,
    contiguous_strides,
    element_bytes,
    lane_byte,
    lane_record,
    lane_window,
    split_commands,
)


def hexbytes(text: str) -> bytes:
    """Hex with spaces/newlines allowed."""
    return bytes.fromhex("".join(text.split()))


def zeros(n: int) -> bytes:
    return b"\0" * n


# --- header -------------------------------------------------------------------------


SAMPLE_HEADER = Header(
    opcode=0x0102,
    engine=1,
    cmd_id=0x0A0B0C0D,
    wait_id=7,
    n_operands=3,
    n_results=2,
    n_param_records=0x0105,
    flags=3,
    layer_id=0x11223344,
    kind=1,
)

SAMPLE_HEADER_BYTES = (
    hexbytes("02 01")  # opcode 0x0102
    + hexbytes("01 00")  # engine GDMA, reserved
    + hexbytes("0d 0c 0b 0a")  # cmd_id
    + hexbytes("07 00 00 00")  # wait_id
    + hexbytes("03 02")  # n_operands, n_results
    + hexbytes("05 01")  # n_param_records 0x0105
    + hexbytes("03 00 00 00")  # flags
    + hexbytes("44 33 22 11")  # layer_id
    + hexbytes("01")  # kind
    + zeros(103)
)


def test_header_pack_bytes():
    data = SAMPLE_HEADER.pack()
    assert len(data) == RECORD_BYTES
    assert data == SAMPLE_HEADER_BYTES
    assert data[0:2] == b"\x02\x01"  # opcode, little-endian
    assert data[4:8] == b"\x0d\x0c\x0b\x0a"  # cmd_id
    assert data[14:16] == b"\x05\x01"  # n_param_records
    assert data[25:] == zeros(103)


def test_header_unpack_and_records():
    assert Header.unpack(SAMPLE_HEADER_BYTES) == SAMPLE_HEADER
    assert SAMPLE_HEADER.records == 1 + 3 + 2 + 0x105


# --- tensor record --------------------------------------------------------------------


QUANT_RECORD = TensorRecord(
    addr=0x100001040,
    dtype="i8",
    shape=(1, 3, 4),
    strides=(12, 4, 1),
    flags=TENSOR_QUANTIZED,
    scale=0.5,
    zero_point=-3,
    storage_min=-128,
    storage_max=127,
)

QUANT_RECORD_BYTES = (
    hexbytes("40 10 00 00 01 00 00 00")  # addr 0x100001040
    + hexbytes("00 02 03 01")  # space global, dtype i8 (2), rank 3, flags quantized
    + hexbytes("fd ff ff ff")  # zero point -3
    + hexbytes("00 00 00 00 00 00 e0 3f")  # scale 0.5 = 0x3FE0000000000000
    + hexbytes("80 ff ff ff 7f 00 00 00")  # storage -128 .. 127
    + hexbytes("01 00 00 00 03 00 00 00 04 00 00 00")  # shape
    + zeros(5 * 4)
    + hexbytes("0c 00 00 00 00 00 00 00 04 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00")
    + zeros(5 * 8)
)


LANE_RECORD_BYTES = (
    hexbytes("44 00 00 00 00 00 00 00")  # addr 0x44: lane 1 of 64-byte lanes, offset 4
    + hexbytes("01 02 04 08")  # space local, dtype i8, rank 4, flags TENSOR_LANES_AXIS1
    + zeros(4)  # zero point
    + hexbytes("00 00 00 00 00 00 f0 3f")  # scale 1.0
    + zeros(8)  # storage range
    + hexbytes("01 00 00 00 05 00 00 00 03 00 00 00 04 00 00 00")  # shape (1, 5, 3, 4)
    + zeros(4 * 4)
    # strides: n = 3 planes x 16, c_stride 16 (12 rounded up to EU 16 bytes), h 4, w 1
    + hexbytes("30 00 00 00 00 00 00 00 10 00 00 00 00 00 00 00")
    + hexbytes("04 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00")
    + zeros(4 * 8)
)


def test_lane_record_bytes_and_formula():
    """docs/isa.md "Memory spaces" worked example: npu 2, L 64."""
    record = lane_record(0x44, "i8", (1, 5, 3, 4), npu_num=2, lmem_bytes=64, eu_bytes=16)
    assert record.pack() == LANE_RECORD_BYTES
    assert TensorRecord.unpack(LANE_RECORD_BYTES) == record
    starts = [lane_byte(record, (0, c, 0, 0), 2, 64) for c in range(5)]
    assert starts == [0x44, 0x14, 0x54, 0x24, 0x64]
    assert lane_byte(record, (0, 3, 2, 1), 2, 64) == 0x2D
    window = lane_window(record, (0, 3, 0, 0), (1, 2, 3, 4), 2, 64)
    assert (window.addr, window.strides, window.flags) == (0x24, (48, 16, 4, 1), 8)


def test_lane_record_of_a_filter():
    """Axis 0 over the lanes, compact planes of ic/g·kh·kw; flags keep TENSOR_COEFF."""
    record = lane_record(
        0, "f16", (10, 4, 3, 3), npu_num=4, lmem_bytes=1024, axis=0, flags=TENSOR_COEFF
    )
    assert record.strides == (36, 9, 3, 1)
    assert record.pack()[11] == TENSOR_LANES_AXIS0 | TENSOR_COEFF == 0x14
    assert lane_byte(record, (5, 1, 2, 0), 4, 1024) == 1024 + (36 + 9 + 6) * 2
    assert TENSOR_LANES_AXIS1 == 8


def test_tensor_record_pack_bytes():
    data = QUANT_RECORD.pack()
    assert len(data) == RECORD_BYTES
    assert data == QUANT_RECORD_BYTES


def test_tensor_record_scale_is_f64_at_16():
    record = TensorRecord(0, "f32", (2,), scale=0.1)
    data = record.pack()
    assert data[16:24] == struct.pack("<d", 0.1)
    assert data[16:24] == hexbytes("9a 99 99 99 99 99 b9 3f")


def test_tensor_record_default_strides_and_negative_strides():
    data = TensorRecord(0x40, "bf16", (2, 3)).pack()
    assert data[9] == 8 and data[10] == 2  # dtype bf16, rank 2
    assert data[32:40] == hexbytes("02 00 00 00 03 00 00 00")
    assert data[64:80] == hexbytes("03 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00")
    reversed_view = TensorRecord(0x4C, "u8", (4,), strides=(-1,)).pack()
    assert reversed_view[64:72] == b"\xff" * 8


def test_tensor_record_unpack_identity():
    assert TensorRecord.unpack(QUANT_RECORD_BYTES) == QUANT_RECORD
    assert TensorRecord.unpack(QUANT_RECORD.pack()) == QUANT_RECORD
    scalar = TensorRecord(0x100, "f16", ())
    assert TensorRecord.unpack(scalar.pack()) == scalar
    dense = TensorRecord(0x200, "i32", (2, 3, 5))
    back = TensorRecord.unpack(dense.pack())
    assert back.strides == (15, 5, 1)  # written explicitly
    assert back.element_strides() == dense.element_strides()
    absent = TensorRecord.unpack(ABSENT.pack())
    assert absent.absent and absent.space == SPACE_ABSENT and absent.shape == ()


def test_tensor_record_errors():
    with pytest.raises(ValueError, match="rank 9"):
        TensorRecord(0, "f32", (1,) * 9).pack()
    bad = bytearray(QUANT_RECORD_BYTES)
    bad[9] = 9  # no dtype 9
    with pytest.raises(ValueError, match="dtype code 9"):
        TensorRecord.unpack(bytes(bad))


def test_contiguous_strides_and_sizes():
    assert contiguous_strides((2, 3, 4)) == (12, 4, 1)
    assert contiguous_strides((5,)) == (1,)
    assert contiguous_strides(()) == ()
    assert contiguous_strides((2, 0, 3)) == (0, 3, 1)
    sizes = {"f32": 4, "f16": 2, "bf16": 2, "i8": 1, "u8": 1, "i16": 2, "u16": 2}
    sizes |= {"i32": 4, "u32": 4}
    assert {d: element_bytes(d) for d in sizes} == sizes
    assert TensorRecord(0, "f16", (2, 3)).nbytes == 12
    assert TensorRecord(0, "f32", ()).nbytes == 4


# --- command streams ------------------------------------------------------------------


RELU_PARAMS = block_codec.encode_block(isa.TIU_SFU, isa.SfuBlock(6, float("nan"), float("nan")))


def relu_command() -> Command:
    header = Header(isa.TIU_SFU, 0, 1, 0, 1, 1, 1, layer_id=3)
    src = TensorRecord(0x100001000, "f32", (1, 4), strides=(4, 1))
    dst = TensorRecord(0x100001040, "f32", (1, 4), strides=(4, 1))
    return Command(header, [src], [dst], RELU_PARAMS)


def copy_command() -> Command:
    header = Header(0x400, 1, 1, 1, 1, 1, 0)
    src = TensorRecord(0x100001040, "f32", (4, 1), strides=(1, 4))
    return Command(header, [src], [TensorRecord(0x100001080, "f32", (4, 1), strides=(1, 1))])


def test_split_commands_parses_a_stream():
    first, second = relu_command(), copy_command()
    stream = first.pack() + second.pack()
    assert len(stream) == (4 + 3) * RECORD_BYTES
    parsed = split_commands(stream, 2, "stream")
    assert [c.header for c in parsed] == [first.header, second.header]
    assert parsed[0].operands == first.operands and parsed[0].results == first.results
    assert parsed[1].operands == second.operands and parsed[1].results == second.results
    assert parsed[0].params == RELU_PARAMS
    assert parsed[1].params == b""
    assert split_commands(b"", 0, "empty") == []


def test_split_commands_errors():
    stream = relu_command().pack()
    with pytest.raises(ValueError, match=r"^bdc: 514 bytes is not a whole number of records"):
        split_commands(stream + b"\0\0", 1, "bdc")
    with pytest.raises(ValueError, match=r"^bdc: command 0 runs past the end of the stream"):
        split_commands(stream[: 3 * RECORD_BYTES], 1, "bdc")
    with pytest.raises(ValueError, match=r"^bdc: command 1 starts past the end of the stream"):
        split_commands(stream, 2, "bdc")
    with pytest.raises(ValueError, match=r"^bdc: 128 bytes after the last of 1 commands"):
        split_commands(stream + zeros(RECORD_BYTES), 1, "bdc")


# --- IR types <-> dtype fields --------------------------------------------------------


@pytest.mark.parametrize(
    "element, fields",
    [
        (f32, {"dtype": "f32"}),
        (Float16Type(), {"dtype": "f16"}),
        (BFloat16Type(), {"dtype": "bf16"}),
        (
            UniformQuantizedType("i8", 0.5, 3),
            {
                "dtype": "i8",
                "flags": TENSOR_QUANTIZED,
                "scale": 0.5,
                "zero_point": 3,
                "storage_min": -128,
                "storage_max": 127,
            },
        ),
        (
            UniformQuantizedType("u8", 0.015, 128, storage_min=1, storage_max=255),
            {
                "dtype": "u8",
                "flags": TENSOR_QUANTIZED,
                "scale": 0.015,
                "zero_point": 128,
                "storage_min": 1,
                "storage_max": 255,
            },
        ),
        (IntegerType(8, Signedness.SIGNED), {"dtype": "i8", "flags": TENSOR_SIGNED_INT}),
        (IntegerType(8, Signedness.UNSIGNED), {"dtype": "u8", "flags": 0}),
        (i32, {"dtype": "i32", "flags": 0}),
    ],
    ids=["f32", "f16", "bf16", "quant-i8", "quant-u8", "si8", "ui8", "i32"],
)
def test_dtype_fields_round_trip(element, fields):
    assert dtype_fields(element) == fields
    record = TensorRecord(0x1000, shape=(2, 3), strides=(3, 1), **fields)
    assert TensorRecord.unpack(record.pack()) == record


def test_dtype_fields_rejects_other_types():
    with pytest.raises(ValueError, match="no device dtype"):
        dtype_fields(IntegerType(4))


def test_bf16_storage_bits():
    words = np.array([0x3F800000, 0xC0000000, 0x3E200000, 0x7F800000, 0x7EE10000], np.uint32)
    values = words.view(np.float32)
    assert values[:4].tolist() == [1.0, -2.0, 0.15625, np.inf]
    bits = np.array([0x3F80, 0xC000, 0x3E20, 0x7F80, 0x7EE1], np.uint16)
    stored = to_storage(values, "bf16")
    assert stored.dtype == np.uint16
    assert np.array_equal(stored, bits)
    back = from_storage(bits, "bf16")
    assert back.dtype == np.float32
    assert np.array_equal(back.view(np.uint32), words)


def test_f16_storage_bits():
    values = np.array([1.0, 65504.0, -0.5, 2.0**-24], np.float32)
    bits = np.array([0x3C00, 0x7BFF, 0xB800, 0x0001], np.uint16)
    stored = to_storage(values, "f16")
    assert np.array_equal(stored.view(np.uint16), bits)
    back = from_storage(bits.view(np.float16), "f16")
    assert back.dtype == np.float32
    assert np.array_equal(back, values)


def test_integer_storage():
    stored = to_storage(np.array([-128.0, 0.0, 127.0], np.float32), "i8")
    assert stored.dtype == np.int8 and stored.tobytes() == b"\x80\x00\x7f"
    coeff = from_storage(np.array([2**31 - 1, -(2**31)], np.int32), "i32", coeff=True)
    assert coeff.dtype == np.float64 and coeff.tolist() == [2**31 - 1, -(2**31)]
    assert from_storage(np.array([200], np.uint8), "u8").dtype == np.float32
