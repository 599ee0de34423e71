"""docs/isa.md says what tpuc/target/isa does: every opcode with its number, the
dtype codes, and header/tensor field offsets, sizes and types that read the
right values out of packed records."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from tpuc.target.isa import engine as isa
from tpuc.target.isa import records
from tpuc.target.isa.records import DTYPES, MAX_RANK, RECORD_BYTES, Header, TensorRecord

DOC = Path(__file__).resolve().parents[3] / "docs" / "isa.md"

TYPE_FORMATS = {
    "u8": "B",
    "u16": "H",
    "u32": "I",
    "i32": "i",
    "u64": "Q",
    "f64": "d",
    "u32[8]": "8I",
    "i64[8]": "8q",
}
"""The doc's type names -> struct codes."""


def section(title: str) -> str:
    """The doc's text from a heading to the next heading of any level."""
    text = DOC.read_text()
    match = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#)", text, re.S | re.M)
    assert match, f"docs/isa.md has no section '{title}'"
    return match.group(1)


def field_rows(title: str) -> list[tuple[int, int, str, str]]:
    """(offset, size, type, field) of the first table of a record section."""
    rows = []
    for line in section(title).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].isdigit():
            rows.append((int(cells[0]), int(cells[1]), cells[2], cells[3]))
    return rows


def struct_offsets(fmt: str) -> list[tuple[int, int, str]]:
    """(offset, size, code) of every item of a struct format; pads as `<size>x`."""
    out, prefix = [], fmt[0]
    for count, code in re.findall(r"(\d*)([a-zA-Z?])", fmt[1:]):
        item = f"{count}{code}"
        size = struct.calcsize(fmt[0] + item)
        out.append((struct.calcsize(prefix), size, f"{size}x" if code == "x" else item))
        prefix += item
    return out


def doc_layout(title: str) -> list[tuple[int, int, str]]:
    return [(o, s, TYPE_FORMATS.get(t, f"{s}x")) for o, s, t, _ in field_rows(title)]


@pytest.mark.parametrize(
    "title, packer", [("Header record", records._HEADER), ("Tensor record", records._TENSOR)]
)
def test_field_offsets_match_struct(title, packer):
    assert doc_layout(title) == struct_offsets(packer.format)
    rows = field_rows(title)
    assert rows[-1][0] + rows[-1][1] == RECORD_BYTES
    assert f"`{packer.format}`" in section(title)


def read_field(data: bytes, offset: int, type_name: str):
    fmt = "<" + TYPE_FORMATS[type_name]
    values = struct.unpack_from(fmt, data, offset)
    return values if len(values) > 1 else values[0]


def test_header_fields_read_back():
    header = Header(0x13F, 2, 70000, 65539, 5, 3, 513, flags=3, layer_id=123456, kind=1)
    data = header.pack()
    for offset, _, type_name, name in field_rows("Header record"):
        if name == "reserved":
            assert data[offset] == 0
            continue
        assert read_field(data, offset, type_name) == getattr(header, name), name


def test_tensor_fields_read_back():
    record = TensorRecord(
        0x1_2345_6789,
        "u8",
        (2, 3, 5),
        strides=(-15, 5, 1),
        space=1,
        flags=5,
        scale=0.0123,
        zero_point=-7,
        storage_min=1,
        storage_max=255,
    )
    pad = (0,) * (MAX_RANK - 3)
    expected = {
        "addr": record.addr,
        "space": 1,
        "dtype": DTYPES["u8"],
        "rank": 3,
        "flags": 5,
        "zero_point": -7,
        "scale": 0.0123,
        "storage_min": 1,
        "storage_max": 255,
        "shape": (2, 3, 5, *pad),
        "strides": (-15, 5, 1, *pad),
    }
    data = record.pack()
    rows = field_rows("Tensor record")
    assert [name for *_, name in rows] == list(expected)
    for offset, _, type_name, name in rows:
        assert read_field(data, offset, type_name) == expected[name], name


def opcode_cells() -> list[tuple[int, str]]:
    text = section("Engine-level commands")
    cells = re.findall(r"\|\s*0x([0-9A-Fa-f]+)\s*\|\s*`([\w.]+)`", text)
    return [(int(code, 16), name) for code, name in cells]


def test_every_opcode_is_documented():
    documented = opcode_cells()
    names = [name for _, name in documented]
    assert len(names) == len(set(names)), "an opcode is listed twice"
    table = {name: code for code, name in documented}
    assert table == isa.ENGINE_OPCODES


def test_dtype_codes_documented():
    rows = {}
    for line in section("Dtypes").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            rows[cells[1]] = (int(cells[0]), int(cells[2]))
    assert rows == {name: (code, records.element_bytes(name)) for name, code in DTYPES.items()}
