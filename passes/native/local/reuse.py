"""Lifetimes of a one-step group's local buffers, so that buffers which
are never alive together share local memory.

`allocate` gives every buffer a place of its own, which a long unsliced
group outgrows (ppocr_cls INT8 as one group of 108 ops: 337,216 bytes per
lane of 262,144) although most of its tensors live for one or two ops.
In a group of one step the loop runs three iterations (load, compute,
store); an item of stage s in row r of iteration s happens at time
s·T + r (T rows). A buffer lives from its first event to its last
(loads, the computes that read or write it, stores; an op's scratch at
its compute). Items of one row run together (TIU beside GDMA), so
lifetimes that meet in a row overlap; only disjoint ones may share.
Groups of several steps keep a place per buffer (their ring slots and
pipelined stages are not modelled here).
"""

from __future__ import annotations

from tpuc.passes.native.local.plan import COMPUTE, GroupPlan


def lifetimes(plan: GroupPlan) -> dict[int, tuple[int, int]] | None:
    """id(tensor or LocalOp) -> (first, last) time; None for several steps."""
    if plan.steps != 1:
        return None
    rows = len(plan.timesteps)
    found: dict[int, tuple[int, int]] = {}

    def touch(owner, time: int) -> None:
        a, b = found.get(id(owner), (time, time))
        found[id(owner)] = (min(a, time), max(b, time))

    for r, row in enumerate(plan.timesteps):
        for item in row:
            time = item.stage * rows + r
            if item.kind != COMPUTE:
                touch(plan.tensors[item.target], time)
                continue
            lop = plan.local(item.target)
            for v in (*lop.op.operands, *lop.op.results):
                if v in plan.tensors:
                    touch(plan.tensors[v], time)
            for key, tensor in plan.tensors.items():
                if isinstance(key, tuple) and key[0] is lop.op:
                    touch(tensor, time)
            touch(lop, time)
    return found


__all__ = ["lifetimes"]
