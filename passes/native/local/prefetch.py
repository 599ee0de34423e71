"""Timesteps and buffer lifetimes of an unsliced native group (one loop step).

A group cut into one slice has no software pipeline to hide its moves
behind: `chain_timesteps` would load everything the first op needs, run
every op, then store. Here row 0 loads only what the first op reads; then
the ops run in order and the GDMA works beside them: every later load
(coefficients, activations from outside the group) joins the open
timestep, in order of its first reader, while that timestep's GDMA time is
under its TIU time (the vendor's cycles, costs.py). A timestep takes more
ops while its GDMA time exceeds its TIU time, so one long load spans
several ops' compute (TPU-MLIR's flow also holds several ops in a
timestep); it closes once its TIU time covers its GDMA time, before an op
that reads what it loads, or before an op whose buffers would pass the
budget. A stored result leaves in the timestep after the one computing
it. resnet50 INT8 so loads its stage-4 and stage-5 filters while the early
convolutions compute, in one group of 70 layers.

Early loads keep their buffers alive longer, so this planner also says
how long every buffer lives (`Lifetimes`: first and last row, both
inclusive; everything alive in a timestep counts for all of it, so a
buffer's bytes are reused only by one whose rows do not meet and a load
never writes where its timestep's TIU ops read) and keeps the bytes alive
under a budget (a share of a lane, by an estimate); `plan.allocate` packs
the buffers by those lifetimes and chain._unsliced keeps the budget whose
table `estimate` finds cheapest.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

from tpuc.passes.native.local.plan import (
    LMEM_BYTES,
    LOAD,
    STORE,
    GroupPlan,
    Item,
)

Lifetimes = dict[int, tuple[int, int]]  # id(LocalTensor | LocalOp) -> (first row, last row)


def unsliced_timesteps(plan: GroupPlan, budget: float, costs, early: tuple = ()
                       ) -> tuple[list[list[Item]], Lifetimes]:  # fmt: skip
    """The timestep table (module docstring) and every buffer's lifetime,
    with at most `budget` × a lane's bytes alive beside any op by the
    estimate (loads that would pass it wait; a load its next op reads is
    taken at the latest in the timestep before); `costs` (costs.py) prices
    ops and loads. `early`: loads queued before all others (a long load
    whose reader comes late, which no late timestep hides)."""
    n = len(plan.ops)
    tiu = [costs.tiu(lop.op) for lop in plan.ops]
    readers = _readers(plan)
    produced = {r: j for j, lop in enumerate(plan.ops) for r in lop.op.results if r in plan.tensors}
    size = {k: t.lane_bytes() for k, t in plan.tensors.items()}
    last = {k: max(js) for k, js in readers.items()}
    for key in plan.outputs:
        last[key] = max(last.get(key, 0), produced[key] + 1)
    live = [0] * (n + 2)
    for key, j in produced.items():
        for r in range(j, last[key] + 1):
            live[r] += size[key]
    for j, lop in enumerate(plan.ops):
        live[j] += lop.buffer_size
    first = {k: min(js) for k, js in readers.items()}
    first_loads = [k for k in plan.inputs if first[k] == 0]
    for key in first_loads:
        for r in range(0, last[key] + 1):
            live[r] += size[key]
    late = sorted(
        (k for k in plan.inputs if first[k] > 0 and k not in early), key=lambda k: first[k]
    )
    pending = deque([k for k in early if first.get(k, 0) > 0] + late)
    segments = _segments(
        n, tiu, pending, first, last, size, live, budget * LMEM_BYTES, costs, plan, early
    )
    return _table(plan, first_loads, segments, produced, readers)


def longest_load(plan: GroupPlan, costs):
    """The load after row 0 with the most GDMA cycles (a classifier's
    weights: queued by its reader it comes last, when the few ops left
    cannot hide it), or None."""
    readers = _readers(plan)
    late = [k for k in plan.inputs if min(readers.get(k, [0])) > 0]
    return max(late, key=lambda k: costs.gdma(plan, k), default=None)


def _segments(n, tiu, pending, first, last, size, live, cap, costs, plan, early=()):
    """Consecutive ops cut into timesteps, each with the loads it runs
    beside its computes: loads go in order of their first reader while the
    timestep's GDMA time is under its TIU time (and the bytes under the
    cap; past the TIU time only when later ops may still join the
    timestep); a timestep closes once its TIU time covers its GDMA time,
    before an op that reads what it loads, or before an op whose buffers
    would take the timestep's bytes past the cap (everything alive in a
    timestep is alive for all of it)."""
    alive: list[set] = [set() for _ in range(n + 2)]
    for key, (begin, end) in _spans(plan, first, last).items():
        for r in range(begin, end + 1):
            alive[r].add(key)
    bytes_of = {**size, **{id(lop): lop.buffer_size for lop in plan.ops}}
    segments: list[tuple[list[int], list]] = []
    ops: list[int] = []
    loads: list = []
    busy = [0.0, 0.0]  # TIU, GDMA of the open timestep
    start, keys = 0, set()

    def take(key) -> None:
        loads.append(key)
        busy[1] += costs.gdma(plan, key)
        _occupy(live, start, last[key], size[key])
        for r in range(start, last[key] + 1):
            alive[r].add(key)
        keys.add(key)

    for j in range(n):
        while j > 0 and pending and first[pending[0]] <= j:
            take(pending.popleft())  # forced: its reader comes next
        if j > 0 and early:  # loads due behind an early one still waiting (the cap)
            for key in [k for k in pending if first[k] <= j]:
                pending.remove(key)
                take(key)
        grown = sum(bytes_of[k] for k in alive[j] - keys)
        held = sum(bytes_of[k] for k in keys)
        if ops and (any(first[k] <= j for k in loads) or busy[0] >= busy[1] or held + grown > cap):
            segments.append((ops, loads))
            ops, loads, busy, start, keys = [], [], [0.0, 0.0], j, set()
        ops.append(j)
        keys |= alive[j]
        busy[0] += tiu[j]
        while pending and busy[1] < busy[0]:
            key = pending[0]
            if max(live[start : last[key] + 1]) + size[key] > cap:
                break
            if sum(bytes_of[k] for k in keys) + size[key] > cap:
                break
            closing = any(first[k] <= j + 1 for k in loads) and first[key] > j + 1
            if closing and busy[1] + costs.gdma(plan, key) > busy[0]:
                break  # the timestep ends at the next op: no time left to hide it
            take(pending.popleft())
    segments.append((ops, loads))
    return segments


def _spans(plan: GroupPlan, first, last) -> dict:
    """Op-index spans of what is alive before any load is placed: results
    (made to last use or store), the first op's loads, scratch buffers
    (keyed by id of their LocalOp)."""
    spans = {}
    for j, lop in enumerate(plan.ops):
        for r in lop.op.results:
            if r in plan.tensors:
                spans[r] = (j, last[r])
        if lop.buffer_size:
            spans[id(lop)] = (j, j)
    for key in plan.inputs:
        if first[key] == 0:
            spans[key] = (0, last[key])
    return spans


def _occupy(live: list[int], first: int, last: int, size: int) -> None:
    for r in range(first, last + 1):
        live[r] += size


def _table(plan: GroupPlan, first_loads, segments, produced, readers):
    """Rows (row 0: what op 0 reads; then one per segment; stores in the
    row after the one computing them) and the lifetimes in rows."""
    rows: list[list[Item]] = [[Item(LOAD, k, 0) for k in first_loads]]
    row_of_op: dict[int, int] = {}
    row_of_load = dict.fromkeys(first_loads, 0)
    for ops, loads in segments:
        row = len(rows)
        rows.append([Item("compute", plan.ops[j].op, 0) for j in ops])
        rows[-1] += [Item(LOAD, k, 0) for k in loads]
        row_of_op.update(dict.fromkeys(ops, row))
        row_of_load.update(dict.fromkeys(loads, row))
    store_row = {k: row_of_op[produced[k]] + 1 for k in plan.outputs}
    for key, row in store_row.items():
        if row >= len(rows):
            rows.append([])
        rows[row].append(Item(STORE, key, 0))
    lifetimes: Lifetimes = {}
    for key, tensor in plan.tensors.items():
        begin = row_of_load[key] if key in row_of_load else row_of_op[produced[key]]
        end = max([row_of_op[j] for j in readers.get(key, [])] + [store_row.get(key, begin)])
        lifetimes[id(tensor)] = (begin, max(begin, end))
    for j, lop in enumerate(plan.ops):
        lifetimes[id(lop)] = (row_of_op[j], row_of_op[j])
    return rows, lifetimes


def _readers(plan: GroupPlan) -> dict[Hashable, list[int]]:
    """Each local tensor's key -> the indices of the ops reading it."""
    found: dict = {}
    for j, lop in enumerate(plan.ops):
        keys = [v for v in lop.op.operands if v in plan.tensors]
        keys += [k for k in plan.tensors if isinstance(k, tuple) and k[0] is lop.op]
        for key in keys:
            found.setdefault(key, []).append(j)
    return found


def estimate(plan: GroupPlan, rows: list[list[Item]], costs) -> float:
    """The table's cycles by `costs`: per timestep the larger of its TIU and
    its GDMA time (stores priced as loads of the same slice)."""
    total = 0.0
    for row in rows:
        tiu = sum(costs.tiu(i.target) for i in row if i.kind == "compute")
        gdma = sum(costs.gdma(plan, i.target) for i in row if i.kind != "compute")
        total += max(tiu, gdma)
    return total


__all__ = ["Lifetimes", "estimate", "longest_load", "unsliced_timesteps"]
