"""Layer groups -> commands: the software-pipelined loop of each `tpu.Group`.

The layer-group pass put each group in the IR (tpuc.dialects.tpu.group,
docs/layer-group.md): its slice counts, its tpu.Load / tpu.Store ops (timestep,
stage, held flag, buffer, slices) and its ops with `#tpu.local` (timestep,
buffer, slices, the slices they read, window pads per slice). A group runs
`nsecs·hsecs·wsecs + 2` loop iterations (n outermost, then h, then w); in
iteration `it`, every item of stage s works on slice `it − s`: GDMA_LOAD of
a slice of a group operand (the global strided window -> its local buffer),
the TIU commands of an op on its local slice, GDMA_STORE of a slice of a
result. Held weights are loaded in their first iteration only.

An op's commands come from the global layers' rules, called inside
`local_records` so that `tensor_record` returns the op's local slice
records; what depends on the slice is then patched (the slice's window pads,
copies turned local-to-local; local_records.py). Each timestep of each
iteration is one *phase*: its TIU and GDMA commands run concurrently and
all wait for the previous phase (`bmodel_builder.synced_phases`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from tpuc.dialects import top
from tpuc.dialects.tpu import GroupOp, LoadOp, PadsAttr, SlicesAttr, StoreOp
from tpuc.dialects.tpu.group import local_of
from tpuc.passes.codegen.commands import bare_record, local_records, op_commands, tensor_record
from tpuc.passes.codegen.local_records import (
    AXES,
    Lanes,
    Ranges,
    activation_record,
    as_local_copies,
    global_window,
    patch_windows,
    slice_shape,
    weight_records,
    within,
)
from tpuc.target.chips import Chip
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import ENGINE_GDMA, Command, Header, TensorRecord


def move(opcode: int, src: TensorRecord, dst: TensorRecord, layer_id: int) -> Command:
    return Command(Header(opcode, ENGINE_GDMA, 0, 0, 1, 1, 0, layer_id=layer_id), [src], [dst])


def _ranges(slices: SlicesAttr | None) -> Ranges | None:
    return None if slices is None else slices.as_dict()  # type: ignore[return-value]


@dataclass
class Held:
    """A local value's buffer: address, and ranges per slice index (None: a
    weight, not sliced)."""

    addr: int
    ranges: Ranges | None


class GroupEmitter:
    """The commands of one group, phase by phase (see the module docstring).
    Values inside the group are local; `source` maps a load to the global
    value it reads, `stored` a store to the group result it writes."""

    def __init__(self, group: GroupOp, layer_ids: Mapping[Operation, int], lanes: Lanes):
        self.group, self.layer_ids, self.lanes = group, layer_ids, lanes
        self.ops = group.layers()
        self.members = set(self.ops)
        self.secs = group.secs
        self.loop = math.prod(self.secs)
        self.held: dict[SSAValue, Held] = {}
        self.source: dict[SSAValue, SSAValue] = {}
        for op in self.ops:
            info = local_of(op)
            self.held[op.results[0]] = Held(info.addr.data, info.slices.as_dict())  # type: ignore[union-attr,arg-type]
        for load in group.loads():
            self.held[load.results[0]] = Held(load.addr.value.data, _ranges(load.slices))
            self.source[load.results[0]] = load.source
        self.stored = {
            store: result
            for store, result in zip(group.yielded_stores(), group.results, strict=True)
        }
        self.users = {v: op for op in self.ops for v in op.operands}

    def index(self, flat: int) -> tuple[int, int, int]:
        _, h, w = self.secs
        return flat // (h * w), flat // w % h, flat % w

    def local(self, value: SSAValue, index) -> TensorRecord:
        held = self.held[value]
        user = value.owner if value.owner in self.members else self.users[value]
        base = bare_record(self.source.get(value, value), user)  # type: ignore[arg-type]
        shape = slice_shape(base.shape, held.ranges, index)  # type: ignore[arg-type]
        return activation_record(base, held.addr, shape, self.lanes)

    def weight(self, value: SSAValue) -> tuple[TensorRecord, TensorRecord, TensorRecord]:
        user = self.users[value]
        filter_of = len(user.operands) > 1 and user.operands[1] is value
        source = self.source[value]
        return weight_records(source, user, self.held[value].addr, self.lanes, filter_of)

    def is_weight(self, value: SSAValue) -> bool:
        return value in self.source and isinstance(self.source[value].owner, top.WeightOp)

    def phases(self) -> list[list[Command]]:
        steps = self.group.timesteps.value.data
        loads = [[m for m in self.group.loads() if m.ts.value.data == t] for t in range(steps)]
        stores = [[m for m in self.group.stores() if m.ts.value.data == t] for t in range(steps)]
        computes = [[op for op in self.ops if local_of(op).ts.data == t] for t in range(steps)]  # type: ignore[union-attr]
        phases = []
        for it in range(self.loop + 2):
            for t in range(steps):
                phase = [c for op in computes[t] for c in self.compute(op, it - 1)]
                phase += [c for m in loads[t] for c in self.load(m, it - m.stage.value.data)]
                phase += [c for m in stores[t] for c in self.store(m, it - m.stage.value.data)]
                if phase:
                    phases.append(phase)
        return phases

    def load(self, load: LoadOp, flat: int) -> list[Command]:
        value, source = load.results[0], load.source
        active = flat == 0 if load.held is not None else 0 <= flat < self.loop
        if not active:
            return []
        layer_id = self.layer_ids[self.users[value]]
        if self.is_weight(value):
            src, dst, _ = self.weight(value)
            return [move(isa.GDMA_LOAD, src, dst, layer_id)]
        index = self.index(flat)
        dst = self.local(value, index)
        window = tensor_record(source, source.owner)  # type: ignore[arg-type]
        src = global_window(window, self.held[value].ranges, index, dst.shape)  # type: ignore[arg-type]
        return [move(isa.GDMA_LOAD, src, dst, layer_id)]

    def store(self, store: StoreOp, flat: int) -> list[Command]:
        if not 0 <= flat < self.loop:
            return []
        value = store.source
        index = self.index(flat)
        src = self.local(value, index)
        stored = _ranges(store.slices)
        if stored != self.held[value].ranges:
            src = within(src, self.held[value].ranges, stored, index)  # type: ignore[arg-type]
        target = tensor_record(self.stored[store], value.owner)  # type: ignore[arg-type]
        dst = global_window(target, stored, index, src.shape)  # type: ignore[arg-type]
        return [move(isa.GDMA_STORE, src, dst, self.layer_ids[value.owner])]  # type: ignore[index]

    def compute(self, op: Operation, flat: int) -> list[Command]:
        if not 0 <= flat < self.loop:
            return []
        index = self.index(flat)
        info = local_of(op)
        assert info is not None
        reads = {i: s.as_dict() for i, s in info.read_slices().items()}
        records: dict[SSAValue, TensorRecord] = {op.results[0]: self.local(op.results[0], index)}
        for i, value in enumerate(op.operands):
            if value not in self.held:
                continue
            if self.is_weight(value):
                records[value] = self.weight(value)[2]
                continue
            record = self.local(value, index)
            if i in reads:
                record = within(record, self.held[value].ranges, reads[i], index)  # type: ignore[arg-type]
            records[value] = record
        with local_records(records, self.lanes.npu_num, self.lanes.lmem_bytes):
            commands = as_local_copies(op_commands(op, self.layer_ids[op]))
        if isinstance(info.pads, PadsAttr):
            pads = info.pads.as_dict()
            at = [pads[a][index[AXES.index(a)]] for a in ("h", "w")]
            commands = patch_windows(op, commands, at)
        return commands


def group_phases(
    groups: list[GroupOp], layer_ids: Mapping[Operation, int], chip: Chip
) -> dict[GroupOp, list[list[Command]]]:
    """The phases of the loop of every group."""
    lanes = Lanes.of(chip)
    return {group: GroupEmitter(group, layer_ids, lanes).phases() for group in groups}


__all__ = ["GroupEmitter", "group_phases"]
