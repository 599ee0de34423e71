"""Any bmodel as a tree of its schema's tables, read and written whole.

model_tool works on files it did not write and must keep every field,
including those tpuc's dataclasses do not model (the vendor schema's
`core_num`, `ctx_sizes`, `cascade`, `cpuop_module` …). So it reads the
flatbuffer generically, as TPU-MLIR's model_tool does with flatbuffers'
reflection: each table becomes a dict of the fields present in the file
(absent fields stay absent), each `Binary` a `Payload` holding its bytes
cut out of the blob. Writing walks the same tree through the same schema
and lays every payload out again in a fresh blob (identical payloads
once), so nets and stages from several files can be moved between trees
without any address bookkeeping.

Two kinds of file share the container: tpuc's own ("tpuc", tpuc's schema,
16-byte aligned payloads, a digest in the header's reserved bytes) and the
chip's native ones ("B", the vendor's schema, 4 KiB-aligned payloads and
blob, zero reserved bytes). `BmodelTree.kind` keeps which one a tree is.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from tpuc.base.errors import TpucError
from tpuc.target.bmodel.container import _DIGEST, _HEADER, DIGEST_TAG, HEADER_SIZE, MAGIC
from tpuc.target.bmodel.container import payload_digest as _digest
from tpuc.target.bmodel.fbs_read import _Malformed, _View
from tpuc.target.bmodel.fbs_write import BLOB_ALIGN, _Blob, _FlatWriter
from tpuc.target.bmodel.native import NATIVE_TYPE, PAYLOAD_ALIGN, model_type
from tpuc.target.bmodel.schema import BINARY, FBS_PATH, SCALARS, Field, TableSchema, schema

TPUC_TYPE = "tpuc"  # Model.type of tpuc's own bmodels


@dataclass(frozen=True)
class Payload:
    """The bytes a `Binary` of the file pointed at; `start` is where they lay
    in the blob read (0 for payloads made in memory)."""

    data: bytes
    start: int = 0

    def __repr__(self) -> str:
        return f"Payload({len(self.data)} bytes at {self.start})"


@dataclass
class BmodelTree:
    """A whole bmodel: its kind ("tpuc" or "B"), schema tables and root table."""

    kind: str
    tables: dict[str, TableSchema]
    root: dict
    blob_size: int = 0
    flatbuffer_size: int = 0

    @property
    def native(self) -> bool:
        return self.kind == NATIVE_TYPE

    @property
    def nets(self) -> list[dict]:
        return self.root.get("net", [])


def read_tree(data: bytes, source: str, native_fbs: Path | None) -> BmodelTree:
    """The tree of the bmodel bytes `data` (file `source`). A native bmodel
    needs the vendor schema `native_fbs`; None refuses it with a hint."""
    if len(data) < HEADER_SIZE:
        raise TpucError(f"{source}: not a bmodel ({len(data)} bytes, shorter than its header)")
    magic, header_size, fb_size, bin_size = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise TpucError(f"{source}: not a bmodel (magic 0x{magic:08X}, expected 0x{MAGIC:08X})")
    if header_size != HEADER_SIZE or HEADER_SIZE + fb_size + bin_size != len(data):
        raise TpucError(
            f"{source}: damaged bmodel: its header says {HEADER_SIZE + fb_size + bin_size} "
            f"bytes, the file has {len(data)}"
        )
    kind = model_type(data)
    if kind == NATIVE_TYPE:
        if native_fbs is None:
            raise TpucError(
                f"{source}: a native bmodel; its schema comes with the vendor component "
                "(`tpuc-vendor fetch` once)"
            )
        tables = schema(Path(native_fbs))
    elif kind == TPUC_TYPE:
        tables = schema(FBS_PATH)
    else:
        raise TpucError(f"{source}: unknown bmodel type {kind!r} (neither tpuc's nor native)")
    buf = data[HEADER_SIZE : HEADER_SIZE + fb_size]
    blob = data[HEADER_SIZE + fb_size :]
    try:
        root_view = _View(buf, struct.unpack_from("<I", buf, 0)[0], "Model", tables)
        root = _Reader(blob, source).table(root_view)
    except (_Malformed, struct.error, IndexError, ValueError, UnicodeDecodeError) as exc:
        raise TpucError(f"{source}: the bmodel flatbuffer does not parse ({exc})") from None
    return BmodelTree(kind, tables, root, len(blob), fb_size)


class _Reader:
    """Turns _Views into dicts, Binaries into Payloads (range-checked)."""

    def __init__(self, blob: bytes, source: str):
        self.blob, self.source = blob, source

    def payload(self, start: int, size: int, where: str) -> Payload:
        if start + size > len(self.blob):
            raise TpucError(
                f"{self.source}: {where}: Binary(start={start}, size={size}) lies outside "
                f"the {len(self.blob)}-byte blob"
            )
        return Payload(bytes(self.blob[start : start + size]), start)

    def table(self, view: _View) -> dict:
        values = {}
        for f in view.schema.fields.values():
            if f.deprecated or not view.table.Offset(4 + 2 * f.slot):
                continue
            values[f.name] = self.field(view, f)
        return values

    def field(self, view: _View, f: Field):
        where = f"{view.schema.name}.{f.name}"
        _known(f, view.tables, where)
        value = view.get(f.name)
        if f.type == BINARY:
            return self.payload(value.start, value.size, where)
        if f.element == BINARY:
            return [self.payload(b.start, b.size, where) for b in value]
        if isinstance(value, _View):
            return self.table(value)
        if isinstance(value, list) and value and isinstance(value[0], _View):
            return [self.table(v) for v in value]
        return value


def _known(f: Field, tables: dict[str, TableSchema], where: str) -> None:
    """Only tables, scalars, strings and Binary can be copied field by field."""
    kind = f.element or f.type
    if f.element == "string":  # no bmodel schema has one; _View reads none
        kind = "[string]"
    if kind in SCALARS or kind in tables or kind in (BINARY, "string"):
        return
    raise TpucError(f"bmodel field {where} of type {f.type} is not supported by model_tool")


# --- writing -----------------------------------------------------------------------------


def write_tree(tree: BmodelTree) -> bytes:
    """The .bmodel bytes of `tree`: its kind's payload alignment, header and
    (for tpuc's own) digest."""
    w = _FlatWriter(tree.tables)
    blob = _Blob(PAYLOAD_ALIGN if tree.native else BLOB_ALIGN)
    root = _Writer(w, blob).table("Model", tree.root)
    w.builder.Finish(root)
    flatbuffer = bytes(w.builder.Output())
    if tree.native:  # the blob starts 4 KiB-aligned in the file, as the vendor's tools expect
        flatbuffer += bytes(-(HEADER_SIZE + len(flatbuffer)) % PAYLOAD_ALIGN)
    header = bytearray(_HEADER.pack(MAGIC, HEADER_SIZE, len(flatbuffer), len(blob.data)))
    if not tree.native:
        _DIGEST.pack_into(header, 16, DIGEST_TAG, _digest(flatbuffer), _digest(bytes(blob.data)))
    return bytes(header) + flatbuffer + bytes(blob.data)


class _Writer:
    """Children first (strings, vectors, tables, payloads), then the table."""

    def __init__(self, w: _FlatWriter, blob: _Blob):
        self.w, self.blob = w, blob

    def table(self, name: str, values: dict) -> int:
        fields = self.w.tables[name].fields
        ready = {key: self.value(fields[key], value) for key, value in values.items()}
        return self.w.table(name, ready)

    def value(self, f: Field, value):
        if f.type in SCALARS:
            return value
        if f.type == BINARY:
            return self.blob.add(value.data)
        if f.type == "string":
            return self.w.string(value)
        if f.element is None:
            return self.table(f.type, value)
        if f.element == "uint8":
            return self.w.bytes(value)
        if f.element in SCALARS:
            return self.w.scalars(f.element, value)
        if f.element == BINARY:
            return self._binaries([self.blob.add(p.data) for p in value])
        return self.w.offsets([self.table(f.element, v) for v in value])

    def _binaries(self, binaries: list) -> int:
        """A vector of Binary structs (16 bytes each, 8-aligned)."""
        builder = self.w.builder
        builder.StartVector(16, len(binaries), 8)
        for binary in reversed(binaries):
            builder.Prep(8, 16)
            builder.PrependUint64(binary.size)
            builder.PrependUint64(binary.start)
        return builder.EndVector()


__all__ = ["TPUC_TYPE", "BmodelTree", "Payload", "read_tree", "write_tree"]
