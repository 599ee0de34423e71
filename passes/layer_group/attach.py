"""The plan in the IR: each group becomes a `tpu.Group` holding its ops.

For a plan (group.GroupPlan) over ops of func @main, `attach` builds
(tpuc.dialects.tpu.group has the ops, group_attrs the attributes):

    %r = "tpu.Group"(inputs...) ({
      loads     one tpu.Load per tensor the timestep table loads, in table
                order (timestep, then the order within it);
      the ops   moved from the function body, reading the loads instead of
                the global values, each with `lg = #tpu.local<...>`;
      stores    one tpu.Store per tensor the table stores, in table order;
      tpu.Yield the stores in the order of the group's outputs
    }) {nsecs, hsecs, wsecs, stages = 3, timesteps, cycles}

and every use of a stored value outside the group reads the group's result
instead. Leaves (weights, top.None) that sat between the group's ops move
before the group. `ungroup` undoes it (the pass runs again on its own output).
The module keeps `module.layer_group_cycles = [grouped, all_global]`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntAttr, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from tpuc.dialects.base import TensorOp, to_attr
from tpuc.dialects.tpu import GroupOp, LoadOp, LocalAttr, PadsAttr, ReadAttr, SlicesAttr, StoreOp
from tpuc.dialects.tpu.group import LG_ATTR, YieldOp
from tpuc.passes.layer_group.group import GroupPlan
from tpuc.passes.layer_group.pads import window_pads
from tpuc.passes.layer_group.schedule import LOAD, STORE

CYCLES_ATTR = "module.layer_group_cycles"
STAGES = 3


def name_of(value: SSAValue) -> str:
    owner = value.owner
    if isinstance(owner, TensorOp):
        return owner.names[value.index]
    return str(value.name_hint or "?")


def _local(plan: GroupPlan, pos: int, op: Operation) -> LocalAttr:
    """The `#tpu.local` of the op at `pos` (its operands still global)."""
    addresses = plan.allocation.addresses
    sizes = {b.key: b.size for b in plan.buffers}
    held = plan.slicing.held
    result = op.results[0]
    reads = []
    for (p, i), ranges in sorted(plan.slicing.reads.items(), key=lambda kv: kv[0]):
        if p == pos and ranges != held.get(op.operands[i]):
            reads.append(ReadAttr(IntAttr(i), SlicesAttr.of(ranges)))
    first = plan.slicing.reads.get((pos, 0)) or (held.get(op.operands[0]) if op.operands else None)
    pads = window_pads(op, held[result], first) if first is not None else None
    scratch = ("scratch", pos)
    return LocalAttr.make(
        ts=plan.table.op_ts[pos],
        stage=1,
        addr=addresses[result],
        size=sizes[result],
        slices=SlicesAttr.of(held[result]),
        buffer=(addresses[scratch], sizes[scratch]) if scratch in addresses else (0, 0),
        pads=PadsAttr.of(pads) if pads is not None else None,
        reads=reads,
    )


def _inputs(ops: Sequence[Operation]) -> list[SSAValue]:
    """Values the ops read from outside them, in order of first use."""
    inside = set(ops)
    found: dict[SSAValue, None] = {}
    for op in ops:
        for value in op.operands:
            if value.owner not in inside:
                found.setdefault(value, None)
    return list(found)


def _loads(plan: GroupPlan, block: Block, renamed) -> dict[SSAValue, SSAValue]:
    """Global value (as the ops now read it) -> its load in `block`."""
    sizes = {b.key: b.size for b in plan.buffers}
    loaded = {}
    for t, move in plan.table.moves():
        if move.kind != LOAD:
            continue
        ranges = plan.slicing.held.get(move.value)
        slices = SlicesAttr.of(ranges) if ranges is not None else None
        addr = plan.allocation.addresses[move.value]
        source = renamed.get(move.value, move.value)
        load = LoadOp.make(source, t, move.stage, addr, sizes[move.value], move.held, slices)
        block.add_op(load)
        loaded[source] = load.results[0]
    return loaded


def _stores(plan: GroupPlan, block: Block) -> dict[SSAValue, SSAValue]:
    stored = {}
    for t, move in plan.table.moves():
        if move.kind != STORE:
            continue
        ranges = plan.slicing.stored.get(move.value) or plan.slicing.held[move.value]
        store = StoreOp.make(move.value, t, move.stage, SlicesAttr.of(ranges))
        block.add_op(store)
        stored[move.value] = store.results[0]
    return stored


def build_group(
    plan: GroupPlan, infos: Sequence[LocalAttr], renamed: dict[SSAValue, SSAValue]
) -> GroupOp:
    """The tpu.Group of a plan, in place of its ops (module docstring);
    `renamed`: values earlier groups replaced by their results (updated)."""
    ops = plan.graph.ops
    body = ops[0].parent_block()
    assert body is not None
    inputs = _inputs(ops)
    outputs = plan.graph.outputs
    block = Block()
    after = ops[-1].next_op  # the group takes the place of its last op
    assert after is not None
    loaded = _loads(plan, block, renamed)
    for op, info in zip(ops, infos, strict=True):
        op.detach()
        for i, value in enumerate(op.operands):
            if value in loaded:
                op.operands[i] = loaded[value]
        op.attributes[LG_ATTR] = info
        block.add_op(op)
    stored = _stores(plan, block)
    block.add_op(YieldOp.build(operands=[[stored[v] for v in outputs]]))
    types = [v.type for v in outputs]
    group = GroupOp.make(inputs, types, block, plan.secs, plan.table.count, plan.cycles, STAGES)
    body.insert_op_before(group, after)
    for value, result in zip(outputs, group.results, strict=True):
        renamed[value] = result
        result.name_hint = value.name_hint
        for use in list(value.uses):
            if use.operation.parent_op() is not group:
                use.operation.operands[use.index] = result
    return group


def module_groups(module: ModuleOp) -> list[GroupOp]:
    """The tpu.Group ops of func @main, in order."""
    from tpuc.ir.core import main_function

    return [op for op in main_function(module).body.block.ops if isinstance(op, GroupOp)]


def ungroup(block: Block) -> None:
    """Put the ops of every tpu.Group of `block` back in its place, reading
    and writing global values again."""
    for group in [op for op in block.ops if isinstance(op, GroupOp)]:
        sources = {load.results[0]: load.source for load in group.loads()}
        for result, value in zip(group.results, group.stored_values(), strict=True):
            result.replace_all_uses_with(value)
        for op in group.layers():
            op.detach()
            op.attributes.pop(LG_ATTR, None)
            for i, value in enumerate(op.operands):
                if value in sources:
                    op.operands[i] = sources[value]
            block.insert_op_before(op, group)
        for op in reversed(list(group.block.ops)):
            op.detach()
            op.erase(safe_erase=False)
        group.detach()
        group.erase()


def attach(module: ModuleOp, plans: Sequence[GroupPlan], grouped: int, all_global: int) -> None:
    """Write the plans into the IR (module docstring)."""
    infos = [[_local(plan, pos, op) for pos, op in enumerate(plan.graph.ops)] for plan in plans]
    renamed: dict[SSAValue, SSAValue] = {}
    for plan, local in zip(plans, infos, strict=True):
        build_group(plan, local, renamed)
    module.attributes[CYCLES_ATTR] = to_attr([grouped, all_global])


def clear(module: ModuleOp, block: Block) -> None:
    ungroup(block)
    module.attributes.pop(CYCLES_ATTR, None)


__all__ = [
    "CYCLES_ATTR",
    "attach",
    "build_group",
    "clear",
    "module_groups",
    "name_of",
    "ungroup",
]
