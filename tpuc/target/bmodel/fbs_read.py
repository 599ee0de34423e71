"""Read the bmodel flatbuffer back into tpuc.target.bmodel.model dataclasses.

A light hand-written reader over flatbuffers' `Table` accessors: `_View`
resolves a field by the slot bmodel.fbs gives it and bounds-checks every
offset first (the Python flatbuffers package trusts its input), so a
damaged file fails with one line instead of an IndexError or garbage.
Payloads are cut out of the blob with their `Binary` ranges checked, and
the coefficients are checked against their sha256.
"""

from __future__ import annotations

import hashlib
import struct

from flatbuffers import number_types as N
from flatbuffers.table import Table

from tpuc.base.dtypes import DTYPE_NAMES
from tpuc.base.errors import TpucError
from tpuc.target.bmodel.model import (
    MODE_NAMES,
    Binary,
    BModel,
    CmdGroup,
    CpuParam,
    Location,
    Net,
    NetParameter,
    SubNet,
    TensorDesc,
)
from tpuc.target.bmodel.schema import BINARY, BINARY_BYTES, SCALARS, TableSchema, schema


class _Malformed(Exception):
    """An offset or length of the flatbuffer points outside it."""


class _View:
    """One table of the flatbuffer, fields read by name through the schema."""

    __slots__ = ("buf", "table", "schema", "tables")

    def __init__(self, buf: bytes, pos: int, name: str, tables: dict[str, TableSchema]):
        _need(buf, pos, 4)
        table = Table(buf, pos)
        vtable = pos - table.Get(N.SOffsetTFlags, pos)
        _need(buf, vtable, 4)
        _need(buf, vtable, table.Get(N.VOffsetTFlags, vtable))
        self.buf, self.table, self.schema, self.tables = buf, table, tables[name], tables

    def get(self, name: str):
        """Field `name`: its scalar (or default), str, Binary, _View, list or bytes;
        None (or an empty list/bytes for vectors) when absent."""
        f = self.schema.fields[name]
        offset = self.table.Offset(4 + 2 * f.slot)
        if f.type in SCALARS:
            return self._scalar(f.type, self.table.Pos + offset) if offset else f.default
        if not offset:
            if f.required:
                raise _Malformed(f"required field {self.schema.name}.{name} is missing")
            return None if f.element is None else (b"" if f.element == "uint8" else [])
        pos = self.table.Pos + offset
        if f.type == BINARY:
            return self._binary(pos)
        if f.type == "string":
            return self._string(self._indirect(pos))
        if f.element is not None:
            return self._vector(f.element, self._indirect(pos))
        return _View(self.buf, self._indirect(pos), f.type, self.tables)

    def _scalar(self, type_name: str, pos: int):
        flags = SCALARS[type_name]
        _need(self.buf, pos, flags.bytewidth)
        return self.table.Get(flags, pos)

    def _binary(self, pos: int) -> Binary:
        _need(self.buf, pos, BINARY_BYTES)
        return Binary(self.table.Get(N.Uint64Flags, pos), self.table.Get(N.Uint64Flags, pos + 8))

    def _indirect(self, pos: int) -> int:
        _need(self.buf, pos, 4)
        return self.table.Indirect(pos)

    def _string(self, pos: int) -> str:
        length = self._scalar("uint32", pos)
        _need(self.buf, pos + 4, length)
        return bytes(self.buf[pos + 4 : pos + 4 + length]).decode("utf-8")

    def _vector(self, element: str, pos: int):
        count = self._scalar("uint32", pos)
        start = pos + 4
        if element in SCALARS:
            width = SCALARS[element].bytewidth
            _need(self.buf, start, count * width)
            if element == "uint8":
                return bytes(self.buf[start : start + count])
            return [self._scalar(element, start + i * width) for i in range(count)]
        if element == BINARY:
            _need(self.buf, start, count * BINARY_BYTES)
            return [self._binary(start + i * BINARY_BYTES) for i in range(count)]
        _need(self.buf, start, count * 4)
        return [
            _View(self.buf, self._indirect(start + i * 4), element, self.tables)
            for i in range(count)
        ]


def _need(buf: bytes, pos: int, size: int) -> None:
    if pos < 0 or size < 0 or pos + size > len(buf):
        raise _Malformed(f"{size} bytes at offset {pos} lie outside its {len(buf)} bytes")


class _Decoder:
    """Builds the dataclasses; content errors name the file."""

    def __init__(self, blob: bytes, source: str):
        self.blob = blob
        self.source = source

    def fail(self, message: str) -> TpucError:
        return TpucError(f"{self.source}: {message}")

    def payload(self, binary: Binary | None, what: str) -> bytes:
        """The blob bytes of `binary`, checked to lie inside the blob."""
        if binary is None or binary.size == 0:
            return b""
        if binary.start + binary.size > len(self.blob):
            raise self.fail(
                f"{what}: Binary(start={binary.start}, size={binary.size}) lies outside "
                f"the {len(self.blob)}-byte binary blob"
            )
        return self.blob[binary.start : binary.start + binary.size]

    def tensor(self, view: _View) -> TensorDesc:
        name = view.get("name")
        code = view.get("data_type")
        if code not in DTYPE_NAMES:
            raise self.fail(f"tensor '{name}': unknown data_type {code}")
        shapes = view.get("shape")
        return TensorDesc(
            name=name,
            dtype=DTYPE_NAMES[code],
            shape=tuple(shapes[0].get("dim")) if shapes else (),
            device_addr=view.get("device_addr"),
            size=view.get("size"),
            scale=view.get("scale"),
            zero_point=view.get("zero_point"),
        )

    def cmd_group(self, view: _View, where: str) -> CmdGroup:
        bdc = self.payload(view.get("binary_bdc"), f"{where} bdc commands")
        gdma = self.payload(view.get("binary_gdma"), f"{where} gdma commands")
        for what, data, code in (("TIU", bdc, "bdc"), ("GDMA", gdma, "gdma")):
            self.check_stream(data, view.get(f"{code}_check_code"), f"{where} {what} commands")
        return CmdGroup(
            bdc=bdc,
            gdma=gdma,
            bdc_num=view.get("bdc_num"),
            gdma_num=view.get("gdma_num"),
            bdc_cmd_byte=view.get("bdc_cmd_byte"),
            gdma_cmd_byte=view.get("gdma_cmd_byte"),
        )

    def check_stream(self, data: bytes, code: bytes, what: str) -> None:
        """A command stream against its sha256 (CmdGroup.*_check_code, a
        tpuc extension: absent in files of other writers)."""
        if code and code != hashlib.sha256(data).digest():
            raise self.fail(
                f"{what}: checksum mismatch (sha256 of the {len(data)} command bytes differs "
                "from the CmdGroup's check code): the file is corrupt"
            )

    def subnet(self, view: _View, net: str) -> SubNet:
        sid, code = view.get("id"), view.get("subnet_mode")
        where = f"net '{net}' subnet {sid}"
        if code not in MODE_NAMES:
            raise self.fail(f"{where}: unknown subnet_mode {code}")
        params = [
            CpuParam(p.get("op_type"), self.payload(p.get("binary_param"), f"{where} cpu param"))
            for p in view.get("cpu_param")
        ]
        return SubNet(
            id=sid,
            mode=MODE_NAMES[code],
            cmd_groups=[self.cmd_group(g, where) for g in view.get("cmd_group")],
            cpu_params=params,
            inputs=[self.tensor(t) for t in view.get("input_tensor")],
            outputs=[self.tensor(t) for t in view.get("output_tensor")],
            next_ids=view.get("next_subnet_ids"),
        )

    def coeff(self, view: _View | None, net: str) -> tuple[int, bytes, list[Location]]:
        """(address, bytes, locations) of a net's coefficients, checksum verified."""
        if view is None:
            return 0, b"", []
        data = self.payload(view.get("binary_coeff"), f"net '{net}' coefficients")
        if view.get("check_code") != hashlib.sha256(data).digest():
            raise self.fail(
                f"net '{net}': coefficient checksum mismatch (sha256 of the "
                f"{len(data)} coefficient bytes differs from CoeffMem.check_code): "
                "the file is corrupt"
            )
        locations = [
            Location(v.get("name"), v.get("offset"), v.get("size")) for v in view.get("location")
        ]
        for loc in locations:
            if loc.offset + loc.size > len(data):
                raise self.fail(
                    f"net '{net}': coefficient '{loc.name}' lies outside the coefficients"
                )
        return view.get("address"), data, locations

    def parameter(self, view: _View, net: str) -> NetParameter:
        address, coeff, locations = self.coeff(view.get("coeff_mem"), net)
        return NetParameter(
            inputs=[self.tensor(t) for t in view.get("input_tensor")],
            outputs=[self.tensor(t) for t in view.get("output_tensor")],
            ctx_addr=view.get("ctx_addr"),
            ctx_size=view.get("ctx_size"),
            coeff_addr=address,
            coeff=coeff,
            cmd_groups=[self.cmd_group(g, f"net '{net}'") for g in view.get("cmd_group")],
            subnets=[self.subnet(s, net) for s in view.get("sub_net")],
            coeff_locations=locations,
        )

    def model(self, root: _View) -> BModel:
        nets = []
        for view in root.get("net"):
            name = view.get("name")
            nets.append(Net(name, [self.parameter(p, name) for p in view.get("parameter")]))
        return BModel(
            chip=root.get("chip"),
            nets=nets,
            type=root.get("type"),
            version=root.get("version"),
            time=root.get("time"),
            neuron_size=root.get("neuron_size"),
        )


def decode(flatbuffer: bytes, blob: bytes, source: str) -> BModel:
    """The BModel of a flatbuffer and its blob; TpucError naming `source`
    when the flatbuffer is damaged or its content inconsistent."""
    try:
        root_pos = struct.unpack_from("<I", flatbuffer, 0)[0]
        root = _View(flatbuffer, root_pos, "Model", schema())
        return _Decoder(blob, source).model(root)
    except (_Malformed, struct.error, TypeError, IndexError, ValueError, OverflowError) as exc:
        raise TpucError(f"{source}: the bmodel flatbuffer does not parse ({exc})") from None
