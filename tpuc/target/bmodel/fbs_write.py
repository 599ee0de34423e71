"""Write the bmodel flatbuffer and binary blob with flatbuffers' Builder.

Hand-written (no flatc-generated code): every table is ended by
`_FlatWriter.table`, which looks each field's slot, type and default up in
bmodel.fbs (tpuc/target/bmodel/schema.py). Payloads go to `_Blob`, which stores
identical byte strings once. Call order is fixed, so the same BModel always
gives the same bytes.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

import flatbuffers

from tpuc.base.dtypes import DTYPE_CODES
from tpuc.base.errors import TpucError
from tpuc.target.bmodel.model import (
    MODE_CODES,
    Binary,
    BModel,
    CmdGroup,
    CpuParam,
    Net,
    NetParameter,
    SubNet,
    TensorDesc,
)
from tpuc.target.bmodel.schema import BINARY, BINARY_BYTES, SCALARS, TableSchema, schema

BLOB_ALIGN = 16  # start of each new payload in the blob


class _Blob:
    """The binary blob: each distinct payload once, 16-byte aligned."""

    def __init__(self, align: int = BLOB_ALIGN) -> None:
        self.data = bytearray()
        self.align = align
        self._seen: dict[bytes, Binary] = {}

    def add(self, payload: bytes) -> Binary:
        if not payload:
            return Binary(0, 0)
        key = bytes(payload)
        known = self._seen.get(key)
        if known is not None:
            return known
        self.data += bytes(-len(self.data) % self.align)
        binary = Binary(len(self.data), len(key))
        self.data += key
        self._seen[key] = binary
        return binary


class _FlatWriter:
    """Builds tables bottom-up: children (strings, vectors, tables) first,
    then `table()` with their offsets, scalars and Binary structs."""

    def __init__(self, tables: dict[str, TableSchema]) -> None:
        self.builder = flatbuffers.Builder(4096)
        self.tables = tables

    def table(self, name: str, values: dict[str, object]) -> int:
        """End table `name` with `values`; None values are left out."""
        table = self.tables[name]
        missing = [
            f.name for f in table.fields.values() if f.required and values.get(f.name) is None
        ]
        if missing:
            raise TpucError(f"bmodel {name}: required field(s) {', '.join(missing)} not set")
        builder = self.builder
        builder.StartObject(table.num_slots)
        for key, value in values.items():
            if value is None:
                continue
            f = table.fields[key]
            try:
                if f.type == BINARY:
                    builder.PrependStructSlot(f.slot, self._binary(value), 0)
                elif f.type in SCALARS:
                    builder.PrependSlot(SCALARS[f.type], f.slot, value, f.default)
                else:
                    builder.PrependUOffsetTRelativeSlot(f.slot, value, 0)
            except (TypeError, struct.error) as exc:
                raise TpucError(f"bmodel {name}.{key} = {value!r} does not fit a {f.type}") from exc
        return builder.EndObject()

    def _binary(self, binary: Binary) -> int:
        """Place a Binary struct inline (right before its table slot)."""
        self.builder.Prep(8, BINARY_BYTES)
        self.builder.PrependUint64(binary.size)
        self.builder.PrependUint64(binary.start)
        return self.builder.Offset()

    def string(self, text: str) -> int:
        return self.builder.CreateString(text)

    def bytes(self, data: bytes) -> int:
        return self.builder.CreateByteVector(data)

    def offsets(self, offsets: Sequence[int]) -> int:
        """A vector of tables (or strings) built before."""
        builder = self.builder
        builder.StartVector(4, len(offsets), 4)
        for offset in reversed(offsets):
            builder.PrependUOffsetTRelative(offset)
        return builder.EndVector()

    def scalars(self, type_name: str, values: Sequence[int]) -> int:
        flags = SCALARS[type_name]
        builder = self.builder
        builder.StartVector(flags.bytewidth, len(values), flags.bytewidth)
        try:
            for value in reversed(values):
                builder.Prepend(flags, value)
        except (TypeError, struct.error) as exc:
            raise TpucError(f"bmodel: {list(values)} do not fit {type_name}") from exc
        return builder.EndVector()

    def optional(self, offsets: Sequence[int]) -> int | None:
        """An offset vector, or None (field left out) when empty."""
        return self.offsets(offsets) if offsets else None


def _tensor(w: _FlatWriter, tensor: TensorDesc) -> int:
    name = w.string(tensor.name)
    shape = w.table("Shape", {"dim": w.scalars("uint64", tensor.shape)})
    shapes = w.offsets([shape])
    return w.table(
        "Tensor",
        {
            "name": name,
            "data_type": DTYPE_CODES[tensor.dtype],
            "device_addr": tensor.device_addr,
            "size": tensor.size,
            "shape": shapes,
            "scale": tensor.scale,
            "zero_point": tensor.zero_point,
        },
    )


def _tensors(w: _FlatWriter, tensors: Sequence[TensorDesc]) -> int:
    return w.offsets([_tensor(w, t) for t in tensors])


def _cmd_group(w: _FlatWriter, blob: _Blob, group: CmdGroup) -> int:
    return w.table(
        "CmdGroup",
        {
            "bdc_num": group.bdc_num,
            "gdma_num": group.gdma_num,
            "binary_bdc": blob.add(group.bdc),
            "binary_gdma": blob.add(group.gdma),
            "bdc_cmd_byte": group.bdc_cmd_byte,
            "gdma_cmd_byte": group.gdma_cmd_byte,
            "bdc_check_code": w.bytes(hashlib.sha256(group.bdc).digest()),
            "gdma_check_code": w.bytes(hashlib.sha256(group.gdma).digest()),
        },
    )


def _cpu_param(w: _FlatWriter, blob: _Blob, param: CpuParam) -> int:
    return w.table("CpuParam", {"op_type": param.op_type, "binary_param": blob.add(param.param)})


def _subnet(w: _FlatWriter, blob: _Blob, subnet: SubNet) -> int:
    values = {
        "subnet_mode": MODE_CODES[subnet.mode],
        "cmd_group": w.optional([_cmd_group(w, blob, g) for g in subnet.cmd_groups]),
        "cpu_param": w.optional([_cpu_param(w, blob, p) for p in subnet.cpu_params]),
        "input_tensor": _tensors(w, subnet.inputs),
        "output_tensor": _tensors(w, subnet.outputs),
        "id": subnet.id,
        "next_subnet_ids": w.scalars("int32", subnet.next_ids),
    }
    return w.table("SubNet", values)


def _coeff_mem(w: _FlatWriter, blob: _Blob, param: NetParameter) -> int:
    binary = blob.add(param.coeff)
    locations = [
        w.table("Location", {"name": w.string(loc.name), "offset": loc.offset, "size": loc.size})
        for loc in param.coeff_locations
    ]
    values = {
        "address": param.coeff_addr,
        "check_code": w.bytes(hashlib.sha256(param.coeff).digest()),
        "binary_coeff": binary,
        "location": w.optional(locations),
    }
    return w.table("CoeffMem", values)


def _net_parameter(w: _FlatWriter, blob: _Blob, param: NetParameter) -> int:
    coeff_mem = _coeff_mem(w, blob, param)  # coefficients first in the blob
    values = {
        "input_tensor": _tensors(w, param.inputs),
        "output_tensor": _tensors(w, param.outputs),
        "ctx_addr": param.ctx_addr,
        "ctx_size": param.ctx_size,
        "coeff_mem": coeff_mem,
        "cmd_group": w.optional([_cmd_group(w, blob, g) for g in param.cmd_groups]),
        "sub_net": w.optional([_subnet(w, blob, s) for s in param.subnets]),
    }
    return w.table("NetParameter", values)


def _net(w: _FlatWriter, blob: _Blob, net: Net) -> int:
    name = w.string(net.name)
    params = w.offsets([_net_parameter(w, blob, p) for p in net.parameters])
    return w.table("Net", {"name": name, "parameter": params})


def encode(model: BModel) -> tuple[bytes, bytes]:
    """(flatbuffer, blob) of `model`."""
    w = _FlatWriter(schema())
    blob = _Blob()
    nets = w.offsets([_net(w, blob, net) for net in model.nets])
    strings = {key: w.string(getattr(model, key)) for key in ("type", "version", "time", "chip")}
    root = w.table(
        "Model", {**strings, "net": nets, "neuron_size": model.neuron_size, "device_num": 1}
    )
    w.builder.Finish(root)
    return bytes(w.builder.Output()), bytes(blob.data)
