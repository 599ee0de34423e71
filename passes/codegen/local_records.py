"""Local records of a layer group's slices, for the commands codegen emits.

Local layout (docs/isa.md "Local memory"): activations spread channel c
over lane c % npu_num (`TENSOR_LANES_AXIS1`), each lane holding ceil(C / npu)
planes of an EU-aligned stride; weights spread their output-channel axis
the same way with compact planes (`TENSOR_LANES_AXIS0` on a filter's axis 0);
operands not per channel (LUT tables) are copied to every lane and read as
a plain view in lane 0. A slice of a global tensor is a strided window of it
(`global_window`); what depends on the slice in an op's commands is patched
(`patch_windows`: the slice's pads; `as_local_copies`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from tpuc.base.errors import TpucError
from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.codegen.commands import _filter_reordered, tensor_record
from tpuc.passes.layer_group.layout import nchw
from tpuc.target.chips import Chip
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    SPACE_LOCAL,
    TENSOR_LANES_AXIS0,
    TENSOR_LANES_AXIS1,
    Command,
    TensorRecord,
    contiguous_strides,
    element_bytes,
)

Ranges = dict[str, list[tuple[int, int]]]
AXES = ("n", "h", "w")


# --- local records -----------------------------------------------------------------------


@dataclass(frozen=True)
class Lanes:
    npu_num: int
    lmem_bytes: int
    eu_bytes: int

    @staticmethod
    def of(chip: Chip) -> Lanes:
        return Lanes(chip.npu_num, chip.lmem_bytes, chip.eu_bytes)

    def planes(self, channels: int) -> int:
        return -(-channels // self.npu_num)


def sliced_dims(rank: int) -> dict[str, int]:
    """The dims of a tensor of `rank` that the planner's n, h, w are (its
    4-D view `layout.nchw`: rank < 2 has none; past rank 4 the trailing dims
    are W, which is then never sliced)."""
    if rank < 2:
        return {}
    return {a: d for a, d in (("n", 0), ("h", 2), ("w", 3)) if d < rank}


def slice_shape(full: tuple[int, ...], ranges: Ranges, index: tuple[int, int, int]):
    """The shape of slice (i, j, k) of a tensor of shape `full`."""
    shape = list(full)
    for a, d in sliced_dims(len(full)).items():
        size = ranges[a][index[AXES.index(a)]][1]
        if d == 3 and len(full) > 4:
            if size != math.prod(full[3:]):
                raise TpucError(f"a layer group slices W of a rank-{len(full)} tensor")
            continue
        shape[d] = size
    return tuple(shape)


def activation_record(base: TensorRecord, addr: int, shape, lanes: Lanes) -> TensorRecord:
    """A local activation slice: channels (axis 1; a vector's axis 0) over
    the lanes, EU-aligned planes; a scalar is a plain view in lane 0."""
    local = dataclasses.replace(base, addr=addr, shape=tuple(shape), space=SPACE_LOCAL)
    if not shape:
        return local
    axis = 1 if len(shape) > 1 else 0
    plane = math.prod(shape[axis + 1 :])
    eu = max(1, lanes.eu_bytes // element_bytes(base.dtype))
    c_stride = -(-plane // eu) * eu
    strides = (lanes.planes(shape[axis]) * c_stride,) * axis + (c_stride,)
    strides += contiguous_strides(shape[axis + 1 :])
    flag = TENSOR_LANES_AXIS1 if axis == 1 else TENSOR_LANES_AXIS0
    return dataclasses.replace(local, strides=strides, flags=base.flags | flag)


def global_window(base: TensorRecord, ranges: Ranges, index, shape) -> TensorRecord:
    """Slice (i, j, k) of a global contiguous tensor as a strided view."""
    strides = contiguous_strides(base.shape)
    offset = sum(
        ranges[a][index[AXES.index(a)]][0] * strides[d]
        for a, d in sliced_dims(len(base.shape)).items()
    )
    return dataclasses.replace(
        base,
        addr=base.addr + offset * element_bytes(base.dtype),
        shape=tuple(shape),
        strides=strides,
    )


def within(record: TensorRecord, held: Ranges, reads: Ranges, index) -> TensorRecord:
    """The part `reads` of a local slice that holds `held`: an in-lane offset."""
    shape = list(record.shape)
    offset = 0
    for a, d in sliced_dims(len(shape)).items():
        i = index[AXES.index(a)]
        (h0, _), (r0, size) = held[a][i], reads[a][i]
        if d == 3 and len(shape) > 4:
            continue  # folded W: whole
        offset += (r0 - h0) * record.strides[d]
        shape[d] = size
    addr = record.addr + offset * element_bytes(record.dtype)
    return dataclasses.replace(record, addr=addr, shape=tuple(shape))


def weight_shape(value: SSAValue, user: Operation, filter_of: bool) -> tuple[int, ...]:
    """The shape a weight is loaded in: a reordered conv filter (`filter_of`:
    the user's operand 1) in its logical (oc, ic/g, kh, kw)."""
    shape = tuple(shape_of(value) or ())
    if isinstance(user, tpu.Conv2DOp) and filter_of and _filter_reordered(user):
        _, oc, icg, _ = shape
        return (oc, icg, *[int(k) for k in user.value("kernel_shape")])
    return shape


def weight_lane_axis(shape: tuple[int, ...], user: Operation) -> int | None:
    """The weight axis spread over the lanes, as the planner budgets it
    (`rules.LocalRule.weight_bytes`): the axis of the user's output channels
    (conv: oc, after leading 1s; elementwise: the channel axis of the weight
    aligned on the right to the result's rank). None: not per channel,
    copied to every lane."""
    out = tuple(shape_of(user.results[0]) or ())
    channels = nchw(out)[1]
    if isinstance(user, tpu.Conv2DOp | tpu.DeconvOp):
        lead, axis = 0, next((a for a, d in enumerate(shape) if d != 1), None)
    else:  # numpy broadcasting aligns on the right
        aligned = (1,) * max(len(out) - len(shape), 0) + shape
        lead, axis = len(aligned) - len(shape), 1 if len(aligned) > 1 else 0
        shape = aligned
    if axis is None or channels <= 1 or shape[axis] != channels:
        return None
    if any(d != 1 for d in shape[:axis]) or axis - lead not in (0, 1):
        return None
    return axis - lead


def weight_records(
    value: SSAValue, user: Operation, addr: int, lanes: Lanes, filter_of: bool
) -> tuple[TensorRecord, TensorRecord, TensorRecord]:
    """(global source, local destination, record the op reads) of a weight
    (`filter_of`: it is the user's operand 1)."""
    shape = weight_shape(value, user, filter_of)
    src = dataclasses.replace(tensor_record(value, user), shape=shape, strides=())
    axis = weight_lane_axis(shape, user)
    if axis is None:  # every lane gets a copy; the op reads lane 0's
        total = math.prod(shape)
        dst = dataclasses.replace(
            src,
            addr=addr,
            shape=(lanes.npu_num, total),
            strides=(total, 1),
            space=SPACE_LOCAL,
            flags=src.flags | TENSOR_LANES_AXIS0,
        )
        source = dataclasses.replace(src, shape=(lanes.npu_num, total), strides=(0, 1))
        reads = dataclasses.replace(src, addr=addr, space=SPACE_LOCAL)
        return source, dst, reads
    strides = list(contiguous_strides(shape))
    plane = strides[axis]
    for d in range(axis):
        strides[d] = lanes.planes(shape[axis]) * plane
    flag = TENSOR_LANES_AXIS0 if axis == 0 else TENSOR_LANES_AXIS1
    local = dataclasses.replace(
        src, addr=addr, strides=tuple(strides), space=SPACE_LOCAL, flags=src.flags | flag
    )
    return src, local, local


# --- commands of a slice ---------------------------------------------------------------------


def patch_windows(op: Operation, commands: list[Command], pads) -> list[Command]:
    """Conv / pool commands of a slice with the slice's pads."""
    begins, ends = tuple(p[0] for p in pads), tuple(p[1] for p in pads)
    extra = tuple(p[2] for p in pads)
    out = []
    for cmd in commands:
        opcode = cmd.header.opcode
        if opcode not in (isa.TIU_CONV, isa.TIU_POOL):
            out.append(cmd)
            continue
        block = block_codec.decode_block(opcode, cmd.params)
        if opcode == isa.TIU_CONV:
            block = dataclasses.replace(block, pad_begins=begins, pad_ends=ends)
            if block.mode == isa.CONV_TRANSPOSED:
                block = dataclasses.replace(block, output_padding=extra, n_output_padding=2)
        else:
            block = dataclasses.replace(block, pads=begins + ends, n_pads=2 * len(begins))
        out.append(
            Command(cmd.header, cmd.operands, cmd.results, block_codec.encode_block(opcode, block))
        )
    return out


def as_local_copies(commands: list[Command]) -> list[Command]:
    """GDMA_MOVE between local records (a copy rule's Concat, Upsample …) is GDMA_L2L."""
    out = []
    for cmd in commands:
        if cmd.header.opcode == isa.GDMA_MOVE:
            header = dataclasses.replace(cmd.header, opcode=isa.GDMA_L2L)
            cmd = Command(header, cmd.operands, cmd.results, cmd.params)
        out.append(cmd)
    return out


__all__ = [
    "AXES",
    "Lanes",
    "Ranges",
    "activation_record",
    "as_local_copies",
    "global_window",
    "patch_windows",
    "slice_shape",
    "weight_records",
    "within",
]
