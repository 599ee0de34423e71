"""Field ids, types and defaults of bmodel.fbs, read from the file itself.

The writer and the reader take every slot number from here, so the .fbs
is the single source of truth; the flatc test checks that a reader
generated from the same file agrees. Only the subset of the flatbuffers
schema language that bmodel.fbs uses is understood.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from flatbuffers import number_types as N

FBS_PATH = Path(__file__).with_name("bmodel.fbs")

SCALARS: dict[str, type] = {
    "bool": N.BoolFlags,
    "int8": N.Int8Flags,
    "byte": N.Int8Flags,
    "uint8": N.Uint8Flags,
    "ubyte": N.Uint8Flags,
    "int16": N.Int16Flags,
    "short": N.Int16Flags,
    "uint16": N.Uint16Flags,
    "ushort": N.Uint16Flags,
    "int32": N.Int32Flags,
    "int": N.Int32Flags,
    "uint32": N.Uint32Flags,
    "uint": N.Uint32Flags,
    "int64": N.Int64Flags,
    "long": N.Int64Flags,
    "uint64": N.Uint64Flags,
    "ulong": N.Uint64Flags,
    "float32": N.Float32Flags,
    "float": N.Float32Flags,
    "float64": N.Float64Flags,
    "double": N.Float64Flags,
}
# the only struct of the schema: Binary {start: uint64; size: uint64}
BINARY = "Binary"
BINARY_BYTES = 16

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_BLOCK = re.compile(r"\b(table|struct)\s+(\w+)\s*\{([^}]*)\}")
_FIELD = re.compile(r"^(\w+)\s*:\s*(\[\w+\]|\w+)\s*(?:=\s*([^\s(]+))?\s*(?:\(([^)]*)\))?$")


@dataclass(frozen=True)
class Field:
    name: str
    slot: int
    type: str  # scalar name, "string", "Binary", a table name, or "[T]"
    default: int | float
    required: bool
    deprecated: bool

    @property
    def element(self) -> str | None:
        """The element type of a vector field, else None."""
        return self.type[1:-1] if self.type.startswith("[") else None


@dataclass(frozen=True)
class TableSchema:
    name: str
    fields: dict[str, Field]

    @property
    def num_slots(self) -> int:
        return 1 + max((f.slot for f in self.fields.values()), default=-1)


def _default(type_name: str, text: str | None) -> int | float:
    if type_name in ("float32", "float", "float64", "double"):
        return float(text) if text else 0.0
    return int(text) if text else 0


def _field(table: str, text: str) -> Field:
    match = _FIELD.match(text)
    if not match:
        raise ValueError(f"bmodel.fbs: table {table}: cannot parse field '{text}'")
    name, type_name, default, attrs = match.groups()
    attrs = [a.strip() for a in (attrs or "").split(",") if a.strip()]
    ids = [a.split(":")[1] for a in attrs if a.replace(" ", "").startswith("id:")]
    if len(ids) != 1:
        raise ValueError(f"bmodel.fbs: {table}.{name} has no explicit id")
    return Field(
        name=name,
        slot=int(ids[0]),
        type=type_name,
        default=_default(type_name, default),
        required="required" in attrs,
        deprecated="deprecated" in attrs,
    )


def parse_schema(text: str) -> dict[str, TableSchema]:
    """The tables of a .fbs text, fields keyed by name (structs are skipped:
    Binary is the only one and is checked to be {start, size: uint64})."""
    text = _COMMENTS.sub("", text)
    tables: dict[str, TableSchema] = {}
    for kind, name, body in _BLOCK.findall(text):
        items = [" ".join(item.split()) for item in body.split(";") if item.strip()]
        if kind == "struct":
            if name == BINARY and items != ["start:uint64", "size:uint64"]:
                raise ValueError(f"bmodel.fbs: unexpected struct {name}")
            continue  # other structs (the vendor's RelEntry) are never written
        fields = {f.name: f for f in (_field(name, item) for item in items)}
        slots = sorted(f.slot for f in fields.values())
        if slots != list(range(len(slots))):
            raise ValueError(f"bmodel.fbs: table {name}: ids are not 0..{len(slots) - 1}")
        tables[name] = TableSchema(name, fields)
    return tables


@cache
def schema(path: Path = FBS_PATH) -> dict[str, TableSchema]:
    """The tables of tpuc/target/bmodel/bmodel.fbs (or of another bmodel schema: the
    vendor's, for native bmodels)."""
    return parse_schema(Path(path).read_text(encoding="utf-8"))
