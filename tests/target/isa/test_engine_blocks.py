"""Engine-level parameter blocks (tpuc/target/isa/engine.py, block_codec.py) against hand-written
byte vectors, their round trip, the size rules, and docs/isa.md's block
tables against the struct layouts."""

from __future__ import annotations

import math
import re
import struct
from pathlib import Path

import pytest

from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import RECORD_BYTES

DOC = Path(__file__).resolve().parents[3] / "docs" / "isa.md"

REQ = isa.RequantBlock(0x12345, 7, 2, 1, -1, 0, 6.0)
REQ_BYTES = (
    "45 23 01 00  07 00 00 00"  # multiplier, rshift
    " 02 01 ff 00  00 00 00 00"  # HalfToEven, relu on, axis -1, per tensor, pad
    " 00 00 00 00 00 00 18 40"  # relu_limit 6.0
)


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


VECTORS = [
    (
        isa.TIU_ARITH,
        isa.ArithBlock(isa.ARITH_SUB, 2, (3, -2), REQ),
        "01 02 00 00  03 00 00 00  fe ff ff ff  00 00 00 00  00 00 00 00"
        + REQ_BYTES
        + " 00 00 00 00",  # term rshifts 0 (the sum shifted once): a block written before them
    ),
    (  # bm168x's Add: u8 multipliers, each term rounded by its own rshift after the requant
        isa.TIU_ARITH,
        isa.ArithBlock(isa.ARITH_ADD, 2, (197, 206), REQ, (7, 6)),
        "00 02 00 00  c5 00 00 00  ce 00 00 00  00 00 00 00  00 00 00 00"
        + REQ_BYTES
        + " 07 06 00 00",
    ),
    (
        isa.TIU_MATMUL,
        isa.MatMulBlock(1, REQ),
        "01 00 00 00 00 00 00 00" + REQ_BYTES,
    ),
    (
        isa.TIU_CVT,
        isa.CvtBlock(REQ),
        "00 00 00 00 00 00 00 00" + REQ_BYTES,
    ),
    (
        isa.TIU_REDUCE,
        isa.ReduceBlock(isa.REDUCE_MEAN, 1, 2, (2, -1), REQ),
        "01 01 02 00 00 00 00 00  02 ff 00 00 00 00 00 00" + REQ_BYTES,
    ),
    (  # ReduceMin of stored values over axis 1, reduced axes dropped
        isa.TIU_REDUCE,
        isa.ReduceBlock(isa.REDUCE_MIN, 0, 1, (1,), REQ),
        "03 00 01 00 00 00 00 00  01 00 00 00 00 00 00 00" + REQ_BYTES,
    ),
    (
        isa.TIU_POOL,
        isa.PoolBlock(isa.POOL_AVG, 1, 2, 2, 4, (3, 3), (2, 2), (1, 1, 0, 0), REQ),
        "00 01 02 02 04 00 00 00"
        " 03 00 00 00 03 00 00 00 00 00 00 00"  # kernel
        " 02 00 00 00 02 00 00 00 00 00 00 00"  # strides
        " 01 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00" + REQ_BYTES,
    ),
    (
        isa.TIU_CONV,
        isa.ConvBlock(
            isa.CONV_DEPTHWISE,
            2,
            8,
            (3, 3),
            (1, 2),
            (1, 1),
            (1, 0),
            (1, 2),
            (),
            0,
            REQ,
        ),
        "01 02 00 00  08 00 00 00"  # depthwise, 2 spatial, no output padding, group 8
        " 03 00 00 00 03 00 00 00 00 00 00 00"  # kernel
        " 01 00 00 00 02 00 00 00 00 00 00 00"  # strides
        " 01 00 00 00 01 00 00 00 00 00 00 00"  # dilations
        " 01 00 00 00 00 00 00 00 00 00 00 00"  # pad begins
        " 01 00 00 00 02 00 00 00 00 00 00 00"  # pad ends
        " 00 00 00 00 00 00 00 00 00 00 00 00" + REQ_BYTES,  # output padding
    ),
    (isa.TIU_LUT, isa.LutBlock(1), "01 00 00 00 00 00 00 00"),
    (
        isa.TIU_SFU,
        isa.SfuBlock(2, 1.0, -0.5),
        "02 00 00 00 00 00 00 00  00 00 00 00 00 00 f0 3f  00 00 00 00 00 00 e0 bf",
    ),
    (  # LayerNorm over axis -1, eps 1e-5 (0x3ee4f8b588e368f1)
        isa.TIU_NORM,
        isa.NormBlock(1, 0, -1, 0, 1e-5, 0.0, 0.0, 6.0),
        "01 00 00 00 ff ff ff ff  00 00 00 00 00 00 00 00"
        " f1 68 e3 88 b5 f8 e4 3e  00 00 00 00 00 00 00 00"
        " 00 00 00 00 00 00 00 00  00 00 00 00 00 00 18 40",
    ),
    (  # cast to BF16 via F16, round half to even
        isa.TIU_CVT,
        isa.CvtBlock(isa.RequantBlock(round_mode=2, relu_limit=0.0), isa.CVT_CAST, 2),
        "01 02 00 00 00 00 00 00  01 00 00 00 00 00 00 00"
        " 02 00 01 00 00 00 00 00  00 00 00 00 00 00 00 00",
    ),
    (  # 0.5 - x, ReLU up to 6: the docs/isa.md vector
        isa.TIU_FARITH,
        isa.FarithBlock(1, 1, 0, isa.FARITH_CONST_REVERSED, 1, (), 0.5, 6.0),
        "01 01 00 02 01 00 00 00" + " 00" * 32 + " 00 00 00 00 00 00 e0 3f 00 00 00 00 00 00 18 40",
    ),
    (  # Add of three inputs with coefficients, no ReLU
        isa.TIU_FARITH,
        isa.FarithBlock(0, 3, 3, 0, 0, (1.0, -1.0, 0.5), 0.0, 6.0),
        "00 03 03 00 00 00 00 00"
        " 00 00 00 00 00 00 f0 3f  00 00 00 00 00 00 f0 bf"
        " 00 00 00 00 00 00 e0 3f  00 00 00 00 00 00 00 00"
        " 00 00 00 00 00 00 00 00  00 00 00 00 00 00 18 40",
    ),
    (  # a float Less of two tensors (op 14)
        isa.TIU_FARITH,
        isa.FarithBlock(14, 2, 0, 0, 0, (), 0.0, 0.0),
        "0e 02 00 00 00 00 00 00" + " 00" * 32 + " 00" * 16,
    ),
    (  # ArgMin along the last axis, dropped, ties to the last index: the docs/isa.md vector
        isa.TIU_ARG,
        isa.ArgBlock(1, 0, 1, -1),
        "01 00 01 00 ff ff ff ff",
    ),
    (isa.GDMA_FILL, isa.FillBlock(0.7), "66 66 66 66 66 66 e6 3f"),  # the docs/isa.md vector
    (isa.GDMA_FILL, isa.FillBlock(-7.0), "00 00 00 00 00 00 1c c0"),  # a stored int8
    (isa.GDMA_GATHER, isa.GatherBlock(-2), "fe ff ff ff 00 00 00 00"),
    (  # CompareConst 0.3 > x (Greater, const form reversed): the docs/isa.md vector
        isa.TIU_FARITH,
        isa.FarithBlock(12, 1, 0, isa.FARITH_CONST_REVERSED, 0, (), 0.3, 0.0),
        "0c 01 00 02 00 00 00 00" + " 00" * 32 + " 33 33 33 33 33 33 d3 3f" + " 00" * 8,
    ),
    (  # an integer Max of five inputs, ReLU up to 6 (kind 1 in the header)
        isa.TIU_FARITH,
        isa.FarithBlock(3, 5, 0, 0, 1, (), 0.0, 6.0),
        "03 05 00 00 01 00 00 00" + " 00" * 32 + " 00" * 8 + " 00 00 00 00 00 00 18 40",
    ),
    (  # Sigmoid with option log: the docs/isa.md vector
        isa.TIU_SFU,
        isa.SfuBlock(2, 1.0, -0.5, 1),
        "02 01 00 00 00 00 00 00  00 00 00 00 00 00 f0 3f  00 00 00 00 00 00 e0 bf",
    ),
    (  # cubic, asymmetric, floor, exclude_outside, a = -0.5, to (4, 11) by (1.5, 2.0)
        isa.TIU_RESIZE,
        isa.ResizeBlock(2, 3, 2, 1, 2, 2, -0.5, (4, 11), (1.5, 2.0)),
        "02 03 02 01 02 02 00 00  00 00 00 00 00 00 e0 bf"
        " 04 00 00 00 0b 00 00 00"
        + " 00" * 24  # target_shape
        + " 00 00 00 00 00 00 f8 3f  00 00 00 00 00 00 00 40"
        + " 00" * 48,  # scales
    ),
    (  # bidirectional batch-first GRU, linear_before_reset, bias and initial h, hidden 5
        isa.TIU_RNN,
        isa.RnnBlock(isa.RNN_GRU, 2, 1, 1, isa.RNN_BIAS | isa.RNN_INITIAL_H, 5),
        "01 02 01 01 03 00 00 00  05 00 00 00 00 00 00 00",
    ),
    (  # a pre-quantized TFLite model's conv/matmul: round mode 4, DoubleRound
        isa.TIU_MATMUL,
        isa.MatMulBlock(0, isa.RequantBlock(1431655765, 36, 4, 0, -1, 0, 0.0)),
        "00 00 00 00 00 00 00 00"
        "55 55 55 55  24 00 00 00  04 00 ff 00  00 00 00 00  00 00 00 00 00 00 00 00",
    ),
    (  # smallest 3 along the last axis, sorted
        isa.CPU_TOPK,
        isa.TopkBlock(-1, 3, 0, 1),
        "ff ff ff ff 03 00 00 00  00 01 00 00 00 00 00 00",
    ),
]


@pytest.mark.parametrize("opcode, block, text", VECTORS, ids=lambda v: str(v)[:12])
def test_block_bytes(opcode, block, text):
    expected = hexbytes(text)
    assert block_codec.block_size(opcode) == len(expected)
    data = block_codec.encode_block(opcode, block)
    assert len(data) == RECORD_BYTES  # one record, zero-padded
    assert data[: len(expected)] == expected and not any(data[len(expected) :])
    assert block_codec.decode_block(opcode, data) == block


def test_sfu_unset_parameters_are_nan():
    """GELU, tanh approximation, alpha and beta unset."""
    data = block_codec.encode_block(isa.TIU_SFU, isa.SfuBlock(8, math.nan, math.nan, 2))
    assert data[:24] == hexbytes(
        "08 02 00 00 00 00 00 00  00 00 00 00 00 00 f8 7f  00 00 00 00 00 00 f8 7f"
    )
    back = block_codec.decode_block(isa.TIU_SFU, data)
    assert (back.function, back.option) == (8, 2) and math.isnan(back.alpha)
    assert isa.SFU_FUNCTIONS[8] == "GELU" and isa.SFU_OPTIONS[2] == "tanh"


def test_requant_defaults_round_trip_nan_limit():
    block = isa.CvtBlock(isa.RequantBlock())
    back = block_codec.decode_block(isa.TIU_CVT, block_codec.encode_block(isa.TIU_CVT, block))
    assert math.isnan(back.requant.relu_limit) and back.requant.multiplier == 1


@pytest.mark.parametrize(
    "opcode, params, needle",
    [
        (
            isa.TIU_ARITH,
            bytes(2 * RECORD_BYTES),
            "parameter block of 256 bytes, TIU_ARITH takes 128",
        ),
        (isa.TIU_CONV, b"", "parameter block of 0 bytes"),
        (isa.GDMA_MOVE, bytes(RECORD_BYTES), "has no parameter block"),
        (isa.TIU_REDUCE, bytes([0, 0, 9]) + bytes(125), "axes count 9 exceeds"),
        (isa.TIU_SFU, bytes([27]) + bytes(127), "unknown TIU_SFU function code 27"),
        (isa.TIU_FARITH, bytes([19]) + bytes(127), "unknown TIU_FARITH op code 19"),
        (isa.TIU_NORM, bytes([6]) + bytes(127), "unknown TIU_NORM function code 6"),
        (isa.TIU_CVT, bytes([1, 13]) + bytes(126), "unknown TIU_CVT to code 13"),
        (isa.TIU_SFU, bytes([0, 4]) + bytes(126), "unknown TIU_SFU option code 4"),
        (isa.TIU_ARG, bytes([2]) + bytes(127), "unknown TIU_ARG mode code 2"),
        (isa.GDMA_FILL, bytes(2 * RECORD_BYTES), "GDMA_FILL takes 128"),
        (isa.TIU_RESIZE, bytes([3]) + bytes(127), "unknown TIU_RESIZE mode code 3"),
        (isa.TIU_RESIZE, bytes([0, 6]) + bytes(126), "unknown TIU_RESIZE coord_mode code 6"),
        (isa.TIU_RESIZE, bytes([0, 0, 0, 0, 9]) + bytes(123), "target_shape count 9 exceeds"),
        (isa.TIU_RNN, bytes([2, 1]) + bytes(126), "unknown TIU_RNN cell code 2"),
        (isa.TIU_RNN, bytes([0, 3]) + bytes(126), "unknown TIU_RNN directions code 3"),
        (isa.TIU_RNN, bytes([0, 1, 0, 0, 8]) + bytes(123), "unknown TIU_RNN present code 8"),
        (isa.TIU_MATMUL, bytes(16) + bytes([5]) + bytes(111), "unknown round mode code 5"),
    ],
)
def test_bad_blocks(opcode, params, needle):
    with pytest.raises(block_codec.BlockError, match=needle):
        block_codec.decode_block(opcode, params)


def test_encode_rejects_overfull_arrays():
    with pytest.raises(block_codec.BlockError, match="multipliers has 5 values"):
        block_codec.encode_block(isa.TIU_ARITH, isa.ArithBlock(0, 5, (1,) * 5, REQ))


def test_opcodes_are_tens_and_in_their_engine_ranges():
    codes = set(isa.ENGINE_OPCODES.values())
    assert len(codes) == len(isa.ENGINE_OPCODES) and 10 <= len(codes) < 100
    assert all(0x200 <= c <= 0x2FF for c in isa.TIU_ENGINE_OPCODES)
    assert all(0x400 <= c <= 0x4FF for c in isa.GDMA_OPCODES)
    assert all(0x600 <= c <= 0x60F for c in isa.CPU_OPCODES) and isa.CPU_TOPK in isa.CPU_OPCODES


def test_resize_codes_name_the_kernels_modes():
    """Every coordinate and nearest mode of the kernel library has a code."""
    from tpuc.kernels import resize

    assert set(isa.RESIZE_COORD_MODES) == set(resize.COORD)
    assert set(isa.RESIZE_NEAREST_MODES) == set(resize.NEAREST)


# --- docs/isa.md block tables ------------------------------------------------------------

TYPE_FORMATS = {"u8": "B", "i8": "b", "u16": "H", "u32": "I", "i32": "i", "f64": "d"}


def doc_rows(title: str) -> list[tuple[int, int, str]]:
    text = DOC.read_text()
    match = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#)", text, re.S | re.M)
    assert match, f"docs/isa.md has no section '{title}'"
    rows = []
    for line in match.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].isdigit():
            kind = cells[2]
            array = re.fullmatch(r"(\w+)\[(\d+)\]", kind)
            if array:
                code = f"{array.group(2)}{TYPE_FORMATS[array.group(1)]}"
            else:
                code = TYPE_FORMATS.get(kind, f"{cells[1]}x")
            rows.append((int(cells[0]), int(cells[1]), code))
    return rows


def struct_items(fmt: str, base: int = 0) -> list[tuple[int, int, str]]:
    out, prefix = [], fmt[0]
    for count, code in re.findall(r"(\d*)([a-zA-Z?])", fmt[1:]):
        item = f"{count}{code}"
        size = struct.calcsize(fmt[0] + item)
        out.append((base + struct.calcsize(prefix), size, f"{size}x" if code == "x" else item))
        prefix += item
    return out


BLOCK_TITLES = {
    isa.TIU_CONV: "TIU_CONV block",
    isa.TIU_MATMUL: "TIU_MATMUL block",
    isa.TIU_ARITH: "TIU_ARITH block",
    isa.TIU_POOL: "TIU_POOL block",
    isa.TIU_REDUCE: "TIU_REDUCE block",
    isa.TIU_LUT: "TIU_LUT block",
    isa.TIU_CVT: "TIU_CVT block",
    isa.TIU_SFU: "TIU_SFU block",
    isa.TIU_FARITH: "TIU_FARITH block",
    isa.TIU_NORM: "TIU_NORM block",
    isa.TIU_ARG: "TIU_ARG block",
    isa.GDMA_FILL: "GDMA_FILL block",
    isa.GDMA_GATHER: "GDMA_GATHER block",
    isa.TIU_RESIZE: "TIU_RESIZE block",
    isa.TIU_RNN: "TIU_RNN block",
    isa.CPU_TOPK: "CPU_TOPK block",
}


@pytest.mark.parametrize("opcode", list(BLOCK_TITLES), ids=lambda c: isa.ENGINE_NAMES[c])
def test_block_tables_match_structs(opcode):
    layout = block_codec.BLOCKS[opcode]
    expected = struct_items(layout.fmt.format)
    if layout.requant:
        expected.append((layout.fmt.size, block_codec.REQUANT.size, "requant"))
    if layout.tail_fmt:  # fields added after the requant sub-block
        expected += struct_items(layout.tail_fmt.format, layout.size - layout.tail_fmt.size)
    rows = [(o, s, "requant" if c == f"{block_codec.REQUANT.size}x" and o == layout.fmt.size else c)
            for o, s, c in doc_rows(BLOCK_TITLES[opcode])]  # fmt: skip
    assert rows == expected


def test_requant_table_matches_struct():
    assert doc_rows("Requant sub-block") == struct_items(block_codec.REQUANT.format)


def test_every_engine_opcode_documented():
    text = DOC.read_text()
    for name, code in isa.ENGINE_OPCODES.items():
        row = re.search(rf"^\|\s*0x{code:03X}\s*\|\s*`{name}`.*\|\s*(\w+)\s*\|$", text, re.M)
        assert row, name
        size = block_codec.block_size(code)
        assert row.group(1) == (str(size) if size else "none"), name
