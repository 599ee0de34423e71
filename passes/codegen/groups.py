"""Layer groups -> commands: the software-pipelined loop of each group.

The layer-group pass wrote the plan into the IR (docs/layer-group.md): per
op `lg` (timestep, buffer address, slice ranges, ranges it reads), per group
`module.layer_groups` (slice counts, timesteps, loads and stores with their
stage, held flag and buffer). A group runs `nsecs·hsecs·wsecs + 2` loop
iterations (n outermost, then h, then w); in iteration `it`, every item of
stage s works on slice `it − s`: GDMA_LOAD of a slice of a group input
(the global strided window -> its local buffer), the TIU commands of an op
on its local slice, GDMA_STORE of a slice of a group output. Held weights
are loaded in their first iteration only.

An op's commands come from the global layers' rules, called inside
`local_records` so that `tensor_record` returns the op's local slice
records; what depends on the slice is then patched (window pads of conv
and pool slices, copies turned local-to-local). Each timestep of each
iteration is one *phase*: its TIU and GDMA commands run concurrently and
all wait for the previous phase (`bmodel_builder.synced`).

Local layout (docs/isa.md "Local memory"): activations spread channel c
over lane c % npu_num (`TENSOR_LANES_AXIS1`), each lane holding ceil(C / npu)
planes of an EU-aligned stride; weights spread their output-channel axis
the same way with compact planes (`TENSOR_LANES_AXIS0` on a filter's axis 0);
operands not per channel (LUT tables) are copied to every lane and read as
a plain view in lane 0.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp
from xdsl.ir import Operation, SSAValue

from tpuc.base.errors import TpucError
from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.core import tensor_names
from tpuc.passes.codegen.commands import (
    _filter_reordered,
    bare_record,
    local_records,
    op_commands,
    tensor_record,
)
from tpuc.passes.layer_group.layout import nchw
from tpuc.target.chips import Chip
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    ENGINE_GDMA,
    SPACE_LOCAL,
    TENSOR_LANES_AXIS0,
    TENSOR_LANES_AXIS1,
    Command,
    Header,
    TensorRecord,
    contiguous_strides,
    element_bytes,
)

Ranges = dict[str, list[tuple[int, int]]]
AXES = ("n", "h", "w")


def _value(attr):
    """A builtin attribute as plain Python (ints, strings, lists, dicts)."""
    if isinstance(attr, ArrayAttr):
        return [_value(a) for a in attr.data]
    if isinstance(attr, DictionaryAttr):
        return {k: _value(v) for k, v in attr.data.items()}
    data = getattr(attr, "value", None)
    if data is not None and hasattr(data, "data"):
        return data.data
    return getattr(attr, "data", attr)


def _ranges(entry: dict) -> Ranges | None:
    if "n" not in entry:
        return None
    return {a: list(zip(entry[a][::2], entry[a][1::2], strict=True)) for a in AXES}


def group_plans(module: ModuleOp) -> list[dict]:
    """`module.layer_groups` as plain dictionaries ([] when there is none)."""
    from tpuc.passes.layer_group.attach import GROUPS_ATTR

    found = module.attributes.get(GROUPS_ATTR)
    return _value(found) if found is not None else []


def op_plan(op: Operation) -> dict | None:
    from tpuc.passes.layer_group.attach import OP_ATTR

    found = op.attributes.get(OP_ATTR)
    return _value(found) if found is not None else None


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


def weight_shape(value: SSAValue, user: Operation) -> tuple[int, ...]:
    """The shape a weight is loaded in: a reordered conv filter in its
    logical (oc, ic/g, kh, kw)."""
    shape = tuple(shape_of(value) or ())
    if isinstance(user, tpu.Conv2DOp) and value is user.operands[1] and _filter_reordered(user):
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
    value: SSAValue, user: Operation, addr: int, lanes: Lanes
) -> tuple[TensorRecord, TensorRecord, TensorRecord]:
    """(global source, local destination, record the op reads) of a weight."""
    shape = weight_shape(value, user)
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


# --- window pads of a slice -----------------------------------------------------------------


def _geometry(op: Operation, axis: int) -> tuple[int, int, int, int, int]:
    """(kernel, stride, dilation, begin pad, end pad) of a window op along
    spatial `axis` (0: H, 1: W)."""
    kernel = [int(k) for k in op.value("kernel_shape")]
    n = len(kernel)
    strides = [int(s) for s in op.value("strides") or [1] * n]
    dilations = [int(d) for d in op.value("dilations") or [1] * n]
    pads = [int(p) for p in op.value("pads") or [0] * 2 * n]
    return kernel[axis], strides[axis], dilations[axis], pads[axis], pads[n + axis]


def slice_pads(op: Operation, axis: int, out, read, full: int) -> tuple[int, int, int]:
    """(begin pad, end pad, output padding) of a window op's slice along
    spatial `axis` computing output rows `out` from input rows `read`.

    Conv / pool: the taps' span beyond the rows read (the tensor's own end
    pad on the slice that ends at the edge: ceil mode keeps its overhang).
    Transposed conv: the crop of the slice's uncropped output that leaves
    rows `out` (zero rows appended as output padding where the slice's
    inputs end before them: no input past `read` reaches `out`)."""
    kernel, stride, dilation, begin_pad, end_pad = _geometry(op, axis)
    span = (kernel - 1) * dilation + 1
    if isinstance(op, tpu.DeconvOp):
        begin = out[0] + begin_pad - read[0] * stride
        end = (read[1] - 1) * stride + span - begin - out[1]
        if begin < 0:
            raise TpucError(f"{op.name}: output rows {out} start before its inputs {read} reach")
        return begin, max(end, 0), max(-end, 0)
    start = out[0] * stride - begin_pad
    last = (out[0] + out[1] - 1) * stride - begin_pad + span
    begin = read[0] - start
    finish = end_pad if out[0] + out[1] == full else last - (read[0] + read[1])
    return begin, finish, 0


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
        block = isa.decode_block(opcode, cmd.params)
        if opcode == isa.TIU_CONV:
            block = dataclasses.replace(block, pad_begins=begins, pad_ends=ends)
            if block.mode == isa.CONV_TRANSPOSED:
                block = dataclasses.replace(block, output_padding=extra, n_output_padding=2)
        else:
            block = dataclasses.replace(block, pads=begins + ends, n_pads=2 * len(begins))
        out.append(Command(cmd.header, cmd.operands, cmd.results, isa.encode_block(opcode, block)))
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


# --- one group ------------------------------------------------------------------------------


def move(opcode: int, src: TensorRecord, dst: TensorRecord, layer_id: int) -> Command:
    return Command(Header(opcode, ENGINE_GDMA, 0, 0, 1, 1, 0, layer_id=layer_id), [src], [dst])


@dataclass
class Held:
    """A tensor's buffer in the group: address, and ranges per slice index
    (None: a weight, not sliced)."""

    addr: int
    ranges: Ranges | None


class GroupEmitter:
    """The commands of one group, phase by phase (see the module docstring)."""

    def __init__(self, plan: dict, ops: list[Operation], layer_ids, values, lanes: Lanes):
        self.plan, self.ops, self.layer_ids, self.lanes = plan, ops, layer_ids, lanes
        self.values: dict[str, SSAValue] = values
        self.secs = (plan["nsecs"], plan["hsecs"], plan["wsecs"])
        self.loop = math.prod(self.secs)
        self.held: dict[SSAValue, Held] = {}
        self.op_info = {op: op_plan(op) for op in ops}
        for op, info in self.op_info.items():
            self.held[op.results[0]] = Held(info["out_addr"], _ranges(info))
        for load in plan["loads"]:
            self.held[values[load["tensor"]]] = Held(load["addr"], _ranges(load))
        self.users = {v: op for op in ops for v in op.operands}

    def index(self, flat: int) -> tuple[int, int, int]:
        _, h, w = self.secs
        return flat // (h * w), flat // w % h, flat % w

    def local(self, value: SSAValue, index) -> TensorRecord:
        held = self.held[value]
        user = value.owner if value.owner in self.op_info else self.users[value]
        base = bare_record(value, user)
        shape = slice_shape(base.shape, held.ranges, index)
        return activation_record(base, held.addr, shape, self.lanes)

    def weight(self, value: SSAValue) -> tuple[TensorRecord, TensorRecord, TensorRecord]:
        return weight_records(value, self.users[value], self.held[value].addr, self.lanes)

    def phases(self) -> list[list[Command]]:
        steps = self.plan["timesteps"]
        loads = [[m for m in self.plan["loads"] if m["ts"] == t] for t in range(len(steps))]
        stores = [[m for m in self.plan["stores"] if m["ts"] == t] for t in range(len(steps))]
        computes = [
            [op for op in self.ops if self.op_info[op]["ts"] == t] for t in range(len(steps))
        ]
        phases = []
        for it in range(self.loop + 2):
            for t in range(len(steps)):
                phase = [c for op in computes[t] for c in self.compute(op, it - 1)]
                phase += [c for m in loads[t] for c in self.load(m, it - m["stage"])]
                phase += [c for m in stores[t] for c in self.store(m, it - m["stage"])]
                if phase:
                    phases.append(phase)
        return phases

    def load(self, entry: dict, flat: int) -> list[Command]:
        value = self.values[entry["tensor"]]
        active = flat == 0 if entry["held"] else 0 <= flat < self.loop
        if not active:
            return []
        layer_id = self.layer_ids[self.users[value]]
        if isinstance(value.owner, top.WeightOp):
            src, dst, _ = self.weight(value)
            return [move(isa.GDMA_LOAD, src, dst, layer_id)]
        index = self.index(flat)
        dst = self.local(value, index)
        src = global_window(
            tensor_record(value, value.owner), self.held[value].ranges, index, dst.shape
        )
        return [move(isa.GDMA_LOAD, src, dst, layer_id)]

    def store(self, entry: dict, flat: int) -> list[Command]:
        if not 0 <= flat < self.loop:
            return []
        value = self.values[entry["tensor"]]
        index = self.index(flat)
        src = self.local(value, index)
        stored = _ranges(entry)
        if stored != self.held[value].ranges:
            src = within(src, self.held[value].ranges, stored, index)
        dst = global_window(tensor_record(value, value.owner), stored, index, src.shape)
        return [move(isa.GDMA_STORE, src, dst, self.layer_ids[value.owner])]

    def compute(self, op: Operation, flat: int) -> list[Command]:
        if not 0 <= flat < self.loop:
            return []
        index = self.index(flat)
        info = self.op_info[op]
        reads = {r["operand"]: _ranges(r) for r in info.get("reads", [])}
        records: dict[SSAValue, TensorRecord] = {op.results[0]: self.local(op.results[0], index)}
        read_ranges: dict[int, Ranges] = {}
        for i, value in enumerate(op.operands):
            if value not in self.held:
                continue
            if isinstance(value.owner, top.WeightOp):
                records[value] = self.weight(value)[2]
                continue
            record = self.local(value, index)
            read_ranges[i] = reads.get(i) or self.held[value].ranges
            if i in reads:
                record = within(record, self.held[value].ranges, reads[i], index)
            records[value] = record
        with local_records(records, self.lanes.npu_num, self.lanes.lmem_bytes):
            commands = as_local_copies(op_commands(op, self.layer_ids[op]))
        if isinstance(op, tpu.Conv2DOp | tpu.DeconvOp | tpu.Pool2DOp):
            commands = self.window_pads(op, commands, index, read_ranges[0])
        return commands

    def window_pads(self, op: Operation, commands, index, read: Ranges) -> list[Command]:
        out_ranges = self.held[op.results[0]].ranges
        full = shape_of(op.results[0])
        pads = []
        for k, a in enumerate(("h", "w")):
            i = index[AXES.index(a)]
            out, rows = out_ranges[a][i], read[a][i]
            pads.append(slice_pads(op, k, out, rows, full[2 + k]))
        if all(out_ranges[a] == [(0, full[2 + k])] for k, a in enumerate(("h", "w"))):
            return commands  # not sliced along H or W: the op's own pads
        return patch_windows(op, commands, pads)


def group_phases(module: ModuleOp, ops: list[Operation], chip: Chip) -> dict[int, list]:
    """Group id -> the phases of its loop, for every group of the module."""
    plans = group_plans(module)
    if not plans:
        return {}
    layer_ids = {op: i for i, op in enumerate(ops)}
    values = {
        name: value
        for op in ops
        if op.results
        for value, name in zip(op.results, tensor_names(op), strict=False)
    }
    members: dict[int, list[Operation]] = {}
    for op in ops:
        info = op_plan(op)
        if info is not None:
            members.setdefault(info["group"], []).append(op)
    lanes = Lanes.of(chip)
    found = {}
    for plan in plans:
        group = sorted(members[plan["id"]], key=lambda op: op_plan(op)["pos"])
        found[plan["id"]] = GroupEmitter(plan, group, layer_ids, values, lanes).phases()
    return found


__all__ = ["GroupEmitter", "group_phases", "group_plans", "op_plan"]
