"""The chip's own bmodel: the vendor's schema, the vendor runtime's fields.

A native bmodel holds the command streams the vendor backend library wrote,
so it is laid out exactly as the vendor runtime reads it: the flatbuffer is
written against the vendor's own bmodel.fbs (from the vendor cache, passed
in by the caller), input and output tensors carry `mem_type` 1 and `hidden`
1 / 2 with their index, the coefficients their SHA-256, and the one TPU
subnet its command groups and `next_subnet_ids [-1]`. `type` is "B", as
TPU-MLIR writes it; the header's reserved bytes stay zero. tpuc's own
bmodels (tpuc.target.bmodel.container) use tpuc's schema and another `type`, and
each reader refuses the other kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tpuc.base.dtypes import DTYPE_CODES
from tpuc.target.bmodel.container import _HEADER, HEADER_SIZE, MAGIC
from tpuc.target.bmodel.fbs_write import _Blob, _coeff_mem, _FlatWriter
from tpuc.target.bmodel.model import CmdGroup, Location, TensorDesc, _version
from tpuc.target.bmodel.schema import schema

NATIVE_TYPE = "B"  # Model.type of the vendor's bmodels
HIDDEN_INPUT, HIDDEN_OUTPUT = 1, 2
MEM_TYPE_TPU = 1
PAYLOAD_ALIGN = 4096  # the vendor's tools expect every payload 4 KiB-aligned in the blob


@dataclass
class NativeNet:
    """One net with one stage and one TPU subnet."""

    name: str
    inputs: list[TensorDesc]
    outputs: list[TensorDesc]
    ctx_addr: int
    ctx_size: int
    coeff_addr: int
    coeff: bytes
    cmd_groups: list[CmdGroup]
    coeff_locations: list[Location] = field(default_factory=list)


@dataclass
class NativeModel:
    chip: str
    nets: list[NativeNet]
    time: str
    neuron_size: int = 0
    kernel_module: tuple[str, bytes] | None = None  # (file name, bytes)
    version: str = field(default_factory=_version)


def _tensor(w: _FlatWriter, tensor: TensorDesc, hidden: int, index: int) -> int:
    name = w.string(tensor.name)
    shape = w.table("Shape", {"dim": w.scalars("uint64", tensor.shape)})
    return w.table(
        "Tensor",
        {
            "name": name,
            "data_type": DTYPE_CODES[tensor.dtype],
            "device_addr": tensor.device_addr,
            "size": tensor.size,
            "shape": w.offsets([shape]),
            "mem_type": MEM_TYPE_TPU,
            "scale": tensor.scale,
            "zero_point": tensor.zero_point,
            "hidden": hidden,
            "index": index,
        },
    )


def _tensors(w: _FlatWriter, tensors: list[TensorDesc], hidden: int) -> int:
    return w.offsets([_tensor(w, t, hidden, i) for i, t in enumerate(tensors)])


def _cmd_group(w: _FlatWriter, blob: _Blob, group: CmdGroup) -> int:
    values = {
        "bdc_num": group.bdc_num,
        "gdma_num": group.gdma_num,
        "binary_bdc": blob.add(group.bdc),
        "binary_gdma": blob.add(group.gdma),
        "bdc_cmd_byte": group.bdc_cmd_byte,
        "gdma_cmd_byte": group.gdma_cmd_byte,
    }
    return w.table("CmdGroup", values)


def _parameter(w: _FlatWriter, blob: _Blob, net: NativeNet) -> int:
    coeff_mem = _coeff_mem(w, blob, net)  # its fields are NetParameter's
    subnet = w.table(
        "SubNet",
        {
            "subnet_mode": 0,
            "cmd_group": w.optional([_cmd_group(w, blob, g) for g in net.cmd_groups]),
            "input_tensor": _tensors(w, net.inputs, HIDDEN_INPUT),
            "output_tensor": _tensors(w, net.outputs, HIDDEN_OUTPUT),
            "id": 0,
            "next_subnet_ids": w.scalars("int32", [-1]),
        },
    )
    return w.table(
        "NetParameter",
        {
            "input_tensor": _tensors(w, net.inputs, HIDDEN_INPUT),
            "output_tensor": _tensors(w, net.outputs, HIDDEN_OUTPUT),
            "ctx_addr": net.ctx_addr,
            "ctx_size": net.ctx_size,
            "coeff_mem": coeff_mem,
            "cmd_group": w.optional([_cmd_group(w, blob, g) for g in net.cmd_groups]),
            "sub_net": w.offsets([subnet]),
            "ctx_sizes": w.scalars("uint64", [net.ctx_size]),
            "core_num": 1,
        },
    )


def encode_native(model: NativeModel, fbs: Path) -> bytes:
    """The .bmodel bytes of `model`, its flatbuffer laid out by the vendor schema `fbs`."""
    w = _FlatWriter(schema(Path(fbs)))
    blob = _Blob(PAYLOAD_ALIGN)
    nets = []
    for net in model.nets:
        name = w.string(net.name)
        nets.append(
            w.table("Net", {"name": name, "parameter": w.offsets([_parameter(w, blob, net)])})
        )
    net_vector = w.offsets(nets)
    kernel = None
    if model.kernel_module is not None:
        file_name, data = model.kernel_module
        kernel = w.table(
            "KernelModule", {"file_name": w.string(file_name), "binary": blob.add(data)}
        )
    strings = {
        "type": w.string(NATIVE_TYPE),
        "version": w.string(model.version),
        "time": w.string(model.time),
        "chip": w.string(model.chip.upper()),
    }
    values = {**strings, "net": net_vector, "neuron_size": model.neuron_size, "device_num": 1}
    if kernel is not None:
        values["kernel_module"] = kernel
    root = w.table("Model", values)
    w.builder.Finish(root)
    flatbuffer = bytes(w.builder.Output())
    flatbuffer += bytes(
        -(HEADER_SIZE + len(flatbuffer)) % PAYLOAD_ALIGN
    )  # the blob starts 4 KiB-aligned
    header = _HEADER.pack(MAGIC, HEADER_SIZE, len(flatbuffer), len(blob.data))
    return header + flatbuffer + bytes(blob.data)


__all__ = ["NATIVE_TYPE", "NativeModel", "NativeNet", "encode_native"]


# --- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class NativeIO:
    """What running a native bmodel needs to know: its net and tensors."""

    net: str
    inputs: list[TensorDesc]
    outputs: list[TensorDesc]


def model_type(data: bytes) -> str:
    """Model.type of a bmodel's bytes ("B" for the vendor's, "tpuc" for tpuc's
    own); "" when the bytes are no bmodel. Slot 0 in both schemas."""
    from flatbuffers import number_types as N
    from flatbuffers.table import Table

    try:
        magic, header_size, fb_size, _ = _HEADER.unpack_from(data)
        if magic != MAGIC or header_size != HEADER_SIZE:
            return ""
        buf = data[HEADER_SIZE : HEADER_SIZE + fb_size]
        root = Table(buf, Table(buf, 0).Get(N.UOffsetTFlags, 0))
        offset = root.Offset(4)
        return root.String(root.Pos + offset).decode() if offset else ""
    except Exception:  # noqa: BLE001 - any damage means "not a readable bmodel"
        return ""


def read_native_io(data: bytes, fbs: Path, source: str, stage: int = 0) -> NativeIO:
    """The first net's name and input/output tensors of a native bmodel's stage."""
    return read_native_stages(data, fbs, source)[stage]


def read_native_stages(data: bytes, fbs: Path, source: str) -> list[NativeIO]:
    """The first net's name and input/output tensors, one NativeIO per stage
    (a combined bmodel has one per input shape)."""
    from flatbuffers import number_types as N
    from flatbuffers.table import Table

    from tpuc.base.dtypes import DTYPE_NAMES
    from tpuc.base.errors import TpucError
    from tpuc.target.bmodel.fbs_read import _Malformed, _View

    _, _, fb_size, _ = _HEADER.unpack_from(data)
    buf = data[HEADER_SIZE : HEADER_SIZE + fb_size]
    tables = schema(Path(fbs))

    def tensors(param, key: str) -> list[TensorDesc]:
        found = []
        for t in param.get(key):
            shape = t.get("shape")[0].get("dim")
            found.append(TensorDesc(
                t.get("name"), DTYPE_NAMES[t.get("data_type")], tuple(shape),
                t.get("device_addr"), t.get("size"), t.get("scale"), t.get("zero_point"),
            ))  # fmt: skip
        return found

    try:
        root = _View(buf, Table(buf, 0).Get(N.UOffsetTFlags, 0), "Model", tables)
        net = root.get("net")[0]
        stages = [
            NativeIO(net.get("name"), tensors(p, "input_tensor"), tensors(p, "output_tensor"))
            for p in net.get("parameter")
        ]
        if not stages:
            raise IndexError("its net has no stage")
        return stages
    except (_Malformed, IndexError, KeyError) as exc:
        raise TpucError(f"{source}: damaged native bmodel ({exc})") from None


def read_native_commands(data: bytes, fbs: Path, source: str) -> list[CmdGroup]:
    """The command groups of the first net's first stage (its TPU subnets' groups,
    in order), with their bytes cut out of the blob."""
    from flatbuffers import number_types as N
    from flatbuffers.table import Table

    from tpuc.base.errors import TpucError
    from tpuc.target.bmodel.fbs_read import _Malformed, _View

    _, _, fb_size, _ = _HEADER.unpack_from(data)
    buf = data[HEADER_SIZE : HEADER_SIZE + fb_size]
    blob = data[HEADER_SIZE + fb_size :]
    try:
        root = _View(buf, Table(buf, 0).Get(N.UOffsetTFlags, 0), "Model", schema(Path(fbs)))
        param = root.get("net")[0].get("parameter")[0]
        groups = []
        for subnet in param.get("sub_net") or [param]:
            for g in subnet.get("cmd_group"):
                bdc, gdma = g.get("binary_bdc"), g.get("binary_gdma")
                groups.append(CmdGroup(
                    bytes(blob[bdc.start : bdc.start + bdc.size]),
                    bytes(blob[gdma.start : gdma.start + gdma.size]),
                    g.get("bdc_num"), g.get("gdma_num"), g.get("bdc_cmd_byte"),
                    g.get("gdma_cmd_byte"),
                ))  # fmt: skip
        return groups
    except (_Malformed, IndexError, KeyError, AttributeError) as exc:
        raise TpucError(f"{source}: damaged native bmodel ({exc})") from None
