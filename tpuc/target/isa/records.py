"""The fixed-size records commands are made of (see docs/isa.md).

A command is a header record, one tensor record per operand and result,
then parameter records; every record is RECORD_BYTES long and little-endian.
Tensor records describe an operand fully (address, memory space, dtype,
shape, element strides, quantization), so the executing side needs nothing
but the command itself.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from tpuc.base.dtypes import DTYPE_BYTES, DTYPE_CODES, DTYPE_NAMES

RECORD_BYTES = 128

ENGINE_TIU, ENGINE_GDMA, ENGINE_CPU = 0, 1, 2
ENGINES = {ENGINE_TIU: "TIU", ENGINE_GDMA: "GDMA", ENGINE_CPU: "CPU"}

SPACE_GLOBAL, SPACE_LOCAL, SPACE_ABSENT = 0, 1, 0xFF

# tensor flags
TENSOR_QUANTIZED = 1  # a !quant.uniform storage type: scale, zero point, range apply
TENSOR_SIGNED_INT = 2  # an explicitly signed integer type (si8 filters)
TENSOR_COEFF = 4  # lives in coefficient memory (a weight)
TENSOR_LANES_AXIS1 = 8  # local: axis 1 (activation channels) spread over the NPU lanes
TENSOR_LANES_AXIS0 = 16  # local: axis 0 (filter/bias output channels) over the lanes
TENSOR_LANES = TENSOR_LANES_AXIS1 | TENSOR_LANES_AXIS0

MAX_RANK = 8

DTYPES = DTYPE_CODES
"""dtype name -> code: the bmodel's (TPU-MLIR's bm_data_type_t numbering)."""


"""dtype name -> numpy dtype of its bytes in memory (bf16: the upper 16 bits of an f32)."""

_HEADER = struct.Struct("<HBxIIBBHIIB103x")
_TENSOR = struct.Struct("<QBBBBidii8I8q")
assert _HEADER.size == RECORD_BYTES and _TENSOR.size == RECORD_BYTES


@dataclass(frozen=True)
class TensorRecord:
    """One operand or result of a command."""

    addr: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...] = ()  # in elements; () = row-major contiguous
    space: int = SPACE_GLOBAL
    flags: int = 0
    scale: float = 1.0
    zero_point: int = 0
    storage_min: int = 0
    storage_max: int = 0

    @property
    def absent(self) -> bool:
        return self.space == SPACE_ABSENT

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * element_bytes(self.dtype)

    def element_strides(self) -> tuple[int, ...]:
        return self.strides or contiguous_strides(self.shape)

    def pack(self) -> bytes:
        rank = len(self.shape)
        if rank > MAX_RANK:
            raise ValueError(f"rank {rank} exceeds the ISA's {MAX_RANK}")
        shape = [*self.shape, *[0] * (MAX_RANK - rank)]
        strides = [*self.element_strides(), *[0] * (MAX_RANK - rank)]
        return _TENSOR.pack(
            self.addr,
            self.space,
            DTYPES[self.dtype],
            rank,
            self.flags,
            self.zero_point,
            self.scale,
            self.storage_min,
            self.storage_max,
            *shape,
            *strides,
        )

    @staticmethod
    def unpack(data: bytes | memoryview) -> TensorRecord:
        fields = _TENSOR.unpack(data)
        addr, space, dtype, rank, flags, zp, scale, lo, hi = fields[:9]
        if rank > MAX_RANK:
            raise ValueError(f"tensor rank {rank} exceeds the ISA's {MAX_RANK}")
        if space not in (SPACE_GLOBAL, SPACE_LOCAL, SPACE_ABSENT):
            raise ValueError(f"unknown memory space {space}")
        shape = tuple(fields[9 : 9 + rank])
        strides = tuple(fields[17 : 17 + rank])
        if dtype not in DTYPE_NAMES:
            raise ValueError(f"unknown dtype code {dtype}")
        return TensorRecord(
            addr, DTYPE_NAMES[dtype], shape, strides, space, flags, scale, zp, lo, hi
        )


ABSENT = TensorRecord(0, "f32", (), space=SPACE_ABSENT)
"""An optional operand the op does not have (top.None)."""


@dataclass(frozen=True)
class Header:
    opcode: int
    engine: int
    cmd_id: int  # 1-based, per engine
    wait_id: int  # the other engine's command that must have finished (0: none)
    n_operands: int
    n_results: int
    n_param_records: int
    flags: int = 0
    layer_id: int = 0  # index of the op in the final module (tensor_location.json)
    kind: int = 0  # 1: integer arithmetic (quantized operand or result)

    def pack(self) -> bytes:
        return _HEADER.pack(
            self.opcode,
            self.engine,
            self.cmd_id,
            self.wait_id,
            self.n_operands,
            self.n_results,
            self.n_param_records,
            self.flags,
            self.layer_id,
            self.kind,
        )

    @staticmethod
    def unpack(data: bytes | memoryview) -> Header:
        return Header(*_HEADER.unpack(data))

    @property
    def records(self) -> int:
        """Records in the whole command, this header included."""
        return 1 + self.n_operands + self.n_results + self.n_param_records


@dataclass
class Command:
    header: Header
    operands: list[TensorRecord]
    results: list[TensorRecord]
    params: bytes = b""  # the parameter words (docs/isa.md "Parameters")
    attrs: dict = field(default_factory=dict)  # decoded params (reader side)

    def pack(self) -> bytes:
        body = b"".join(t.pack() for t in (*self.operands, *self.results))
        return self.header.pack() + body + self.params


def element_bytes(dtype: str) -> int:
    return DTYPE_BYTES[dtype]


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))


def split_commands(stream: bytes, count: int, what: str) -> list[Command]:
    """Parse `count` commands from a stream; ValueError names the damage."""
    view = memoryview(stream)
    if len(view) % RECORD_BYTES:
        raise ValueError(f"{what}: {len(view)} bytes is not a whole number of records")
    commands, pos = [], 0
    for index in range(count):
        if pos + RECORD_BYTES > len(view):
            raise ValueError(f"{what}: command {index} starts past the end of the stream")
        header = Header.unpack(view[pos : pos + RECORD_BYTES])
        end = pos + header.records * RECORD_BYTES
        if end > len(view):
            raise ValueError(f"{what}: command {index} runs past the end of the stream")
        tensors = [
            TensorRecord.unpack(view[p : p + RECORD_BYTES])
            for p in range(
                pos + RECORD_BYTES, end - header.n_param_records * RECORD_BYTES, RECORD_BYTES
            )
        ]
        params = bytes(view[end - header.n_param_records * RECORD_BYTES : end])
        operands, results = tensors[: header.n_operands], tensors[header.n_operands :]
        commands.append(Command(header, operands, results, params))
        pos = end
    if pos != len(view):
        raise ValueError(f"{what}: {len(view) - pos} bytes after the last of {count} commands")
    return commands


# --- local memory distributed over the NPU lanes (docs/isa.md "Memory spaces") -----------


def lane_axis(record: TensorRecord) -> int | None:
    """The axis a local record spreads over the lanes (None: a plain view in
    one lane). ValueError when both lane flags are set."""
    flags = record.flags & TENSOR_LANES
    if flags == TENSOR_LANES:
        raise ValueError("both lane flags set")
    if not flags:
        return None
    return 1 if flags == TENSOR_LANES_AXIS1 else 0


def lane_byte(record: TensorRecord, index: Sequence[int], npu_num: int, lmem_bytes: int) -> int:
    """The local byte address of element `index` of a lane record: with lane
    axis a, start lane s and in-lane offset o of `addr`, lane (s+i_a) % npu at
    o + ((s+i_a) // npu · stride_a + Σ_{k≠a} i_k · stride_k) · element_bytes."""
    axis = lane_axis(record)
    strides, size = record.element_strides(), element_bytes(record.dtype)
    if axis is None:
        return record.addr + sum(i * st for i, st in zip(index, strides, strict=True)) * size
    start, offset = divmod(record.addr, lmem_bytes)
    lane, plane = (start + index[axis]) % npu_num, (start + index[axis]) // npu_num
    rest = sum(i * st for k, (i, st) in enumerate(zip(index, strides, strict=True)) if k != axis)
    return lane * lmem_bytes + offset + (plane * strides[axis] + rest) * size


def lane_record(
    addr: int,
    dtype: str,
    shape: Sequence[int],
    *,
    npu_num: int,
    lmem_bytes: int,
    axis: int = 1,
    c_stride: int | None = None,
    eu_bytes: int = 0,
    flags: int = 0,
    **quant,
) -> TensorRecord:
    """A local record with `shape[axis]` spread over the lanes from the lane
    of `addr` (lane · lmem_bytes + offset). `c_stride` (elements) is the
    per-lane plane stride; by default the plane's element count
    prod(shape[axis+1:]), rounded up to `eu_bytes` when given (EU-aligned,
    TPU-MLIR's alignEU; compact otherwise). Axes after `axis` are contiguous
    inside a plane; axes before it step over all the planes one lane holds
    (n_stride = ceil((start_lane + C) / npu) · c_stride). `quant`: scale,
    zero_point, storage_min, storage_max; `flags` are or-ed with the lane flag."""
    shape = tuple(shape)
    if axis not in (0, 1) or axis >= len(shape):
        raise ValueError(f"lane axis {axis} for a rank-{len(shape)} record")
    inner = math.prod(shape[axis + 1 :])
    if c_stride is None:
        per_eu = eu_bytes // element_bytes(dtype) if eu_bytes else 1
        c_stride = -(-inner // max(per_eu, 1)) * max(per_eu, 1)
    start = addr // lmem_bytes
    planes = -(-(start + shape[axis]) // npu_num)
    strides = [*contiguous_strides(shape[axis + 1 :])]
    strides.insert(0, c_stride)
    step = planes * c_stride
    for dim in reversed(shape[:axis]):
        strides.insert(0, step)
        step *= dim
    lane = TENSOR_LANES_AXIS1 if axis == 1 else TENSOR_LANES_AXIS0
    return TensorRecord(
        addr, dtype, shape, tuple(strides), SPACE_LOCAL, (flags & ~TENSOR_LANES) | lane, **quant
    )


def lane_window(
    record: TensorRecord,
    starts: Sequence[int],
    shape: Sequence[int],
    npu_num: int,
    lmem_bytes: int,
) -> TensorRecord:
    """The sub-record of a lane (or plain local) record that begins at
    element `starts` and has `shape` (a channel window, an H slice, …):
    the same strides, `addr` at that element by `lane_byte`."""
    addr = lane_byte(record, starts, npu_num, lmem_bytes)
    return replace(record, addr=addr, shape=tuple(shape), strides=record.element_strides())


class LanePart(NamedTuple):
    """The elements of a lane record whose lane-axis index is in
    [first, first + count): one plane group, lanes [lane, lane + count),
    element (…, first, …) at byte `offset` of its lane."""

    first: int
    count: int
    lane: int
    offset: int


def lane_parts(record: TensorRecord, npu_num: int, lmem_bytes: int) -> list[LanePart]:
    """A lane record's plane groups: lane-axis indices sharing one plane
    index (s + i_a) // npu, each a strided view with a lane step of
    lmem_bytes. The caller checks the start lane is < npu_num."""
    axis = lane_axis(record)
    if axis is None:
        raise ValueError("not a lane record")
    start, offset = divmod(record.addr, lmem_bytes)
    count, stride = record.shape[axis], record.element_strides()[axis]
    size = element_bytes(record.dtype)
    parts = []
    for plane in range(start // npu_num, (start + count - 1) // npu_num + 1 if count else 0):
        first = max(0, plane * npu_num - start)
        last = min(count, (plane + 1) * npu_num - start)
        parts.append(
            LanePart(first, last - first, start + first - plane * npu_num,
                     offset + plane * stride * size)
        )  # fmt: skip
    return parts
