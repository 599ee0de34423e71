"""The plan in the IR: what later stages (codegen, address-assign) read.

Every op of a group gets a dictionary attribute `lg`:
    group, pos (index in the group), ts (timestep), stage (1),
    out_addr / out_size (its result's local buffer, per-lane bytes),
    buffer_addr / buffer_size (its scratch buffer, when it has one),
    n / h / w: its result's ranges, flat [start0, size0, start1, size1, ...]
        per slice index along that axis,
    reads (only where an operand holds more than the op reads, convs
        sharing an input): [{operand = i, n = [...], h = [...], w = [...]}].
The module gets `module.layer_groups`, one dictionary per group:
    id, ops (tensor names, in order), nsecs, hsecs, wsecs, stages (3),
    cycles (estimated), timesteps ([{tiu, load, store}] tensor names per
    timestep), loads / stores ([{tensor, ts, stage, held, addr, size,
    n, h, w}]: a load's ranges are what the slice holds, a store's what it
    writes back). Global layers carry nothing, and
    `module.layer_group_cycles = [grouped, all_global]`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue

from tpuc.dialects.base import TensorOp, to_attr
from tpuc.passes.layer_group.group import GroupPlan
from tpuc.passes.layer_group.schedule import LOAD, STORE
from tpuc.passes.layer_group.slicing import AXES, Range

OP_ATTR = "lg"
GROUPS_ATTR = "module.layer_groups"
CYCLES_ATTR = "module.layer_group_cycles"


def flat(ranges: Sequence[Range]) -> list[int]:
    return [x for r in ranges for x in r]


def name_of(value: SSAValue) -> str:
    owner = value.owner
    if isinstance(owner, TensorOp):
        return owner.names[value.index]
    return str(value.name_hint or "?")


def _dict(items: dict[str, object]) -> DictionaryAttr:
    return DictionaryAttr(
        {k: v if isinstance(v, Attribute) else to_attr(v) for k, v in items.items()}
    )  # type: ignore[arg-type]


def _ranges(per_axis: dict[str, list[Range]]) -> dict[str, object]:
    return {a: ArrayAttr([to_attr(x) for x in flat(per_axis[a])]) for a in AXES}


def _op_attr(plan: GroupPlan, group: int, pos: int, op: Operation) -> DictionaryAttr:
    addresses = plan.allocation.addresses
    sizes = {b.key: b.size for b in plan.buffers}
    result = op.results[0]
    items: dict[str, object] = {
        "group": group,
        "pos": pos,
        "ts": plan.table.op_ts[pos],
        "stage": 1,
        "out_addr": addresses[result],
        "out_size": sizes[result],
    }
    if ("scratch", pos) in addresses:
        items["buffer_addr"] = addresses["scratch", pos]
        items["buffer_size"] = sizes["scratch", pos]
    items.update(_ranges(plan.slicing.held[result]))
    reads = []
    for (p, i), ranges in sorted(plan.slicing.reads.items(), key=lambda kv: kv[0]):
        if p == pos and ranges != plan.slicing.held.get(op.operands[i]):
            reads.append(_dict({"operand": i, **_ranges(ranges)}))
    if reads:
        items["reads"] = ArrayAttr(reads)
    return _dict(items)


def _moves(plan: GroupPlan, kind: str) -> list[DictionaryAttr]:
    sizes = {b.key: b.size for b in plan.buffers}
    found = []
    for t, move in plan.table.moves():
        if move.kind != kind:
            continue
        items: dict[str, object] = {
            "tensor": name_of(move.value),
            "ts": t,
            "stage": move.stage,
            "held": move.held,
            "addr": plan.allocation.addresses[move.value],
            "size": sizes[move.value],
        }
        ranges = plan.slicing.held if kind == LOAD else plan.slicing.stored
        if move.value in ranges:
            items.update(_ranges(ranges[move.value]))
        found.append(_dict(items))
    return found


def group_attr(plan: GroupPlan, group: int) -> DictionaryAttr:
    ops = plan.graph.ops
    steps = [
        _dict(
            {
                "tiu": ArrayAttr([to_attr(name_of(ops[p].results[0])) for p in step.ops]),
                "load": ArrayAttr(
                    [to_attr(name_of(m.value)) for m in step.moves if m.kind == LOAD]
                ),
                "store": ArrayAttr(
                    [to_attr(name_of(m.value)) for m in step.moves if m.kind == STORE]
                ),
            }
        )
        for step in plan.table.steps
    ]
    secs = plan.secs
    return _dict(
        {
            "id": group,
            "ops": ArrayAttr([to_attr(name_of(op.results[0])) for op in ops]),
            "nsecs": secs.n,
            "hsecs": secs.h,
            "wsecs": secs.w,
            "stages": 3,
            "cycles": plan.cycles,
            "timesteps": ArrayAttr(steps),
            "loads": ArrayAttr(_moves(plan, LOAD)),
            "stores": ArrayAttr(_moves(plan, STORE)),
        }
    )


def clear(module: ModuleOp, ops: Sequence[Operation]) -> None:
    for op in ops:
        op.attributes.pop(OP_ATTR, None)
    module.attributes.pop(GROUPS_ATTR, None)
    module.attributes.pop(CYCLES_ATTR, None)


def attach(module: ModuleOp, plans: Sequence[GroupPlan], grouped: int, all_global: int) -> None:
    """Write the plans into the IR (module docstring)."""
    groups = []
    for g, plan in enumerate(plans):
        for pos, op in enumerate(plan.graph.ops):
            op.attributes[OP_ATTR] = _op_attr(plan, g, pos, op)
        groups.append(group_attr(plan, g))
    module.attributes[GROUPS_ATTR] = ArrayAttr(groups)
    module.attributes[CYCLES_ATTR] = to_attr([grouped, all_global])


__all__ = ["CYCLES_ATTR", "GROUPS_ATTR", "OP_ATTR", "attach", "clear", "group_attr"]
