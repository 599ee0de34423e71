"""Timesteps and buffer lifetimes of an unsliced native group (one loop step).

A group cut into one slice has no software pipeline to hide its moves
behind: `chain_timesteps` would load everything the first op needs, run
every op, then store. Here instead each timestep runs one op (row i + 1
computes op i; row 0 only loads what op 0 reads) and the GDMA works beside
it: every later load (coefficients, activations from outside the group)
goes into the earliest row before its reader whose TIU time still covers
it (rough guesses, `_tiu_guess` / `_gdma_guess`), else into the row with
the most time left; a stored tensor leaves in the row after the one that
computes it. TPU-MLIR's timestep assignment and its lmem-aware move of
loads likewise let a 70-op resnet50 group load its late weights while the
early convolutions compute.

Early loads keep their buffers alive longer, so this planner also says
how long every buffer lives (`Lifetimes`: first and last row, both
inclusive: a buffer's bytes may be reused only by one whose rows do not
meet, so a load never writes where the same row's TIU op still reads) and
keeps the bytes alive in any row under a budget; `plan.allocate` packs the
buffers by those lifetimes.
"""

from __future__ import annotations

from collections.abc import Hashable

from tpuc.passes.native.local.plan import (
    LMEM_BYTES,
    LOAD,
    STORE,
    GroupPlan,
    Item,
)

Lifetimes = dict[int, tuple[int, int]]  # id(LocalTensor | LocalOp) -> (first row, last row)


def _reader_rows(plan: GroupPlan) -> dict[Hashable, int]:
    """Each local tensor's key -> the row of the first op reading it."""
    first: dict = {}
    for i, lop in enumerate(plan.ops):
        keys = [v for v in lop.op.operands if v in plan.tensors]
        keys += [k for k in plan.tensors if isinstance(k, tuple) and k[0] is lop.op]
        for key in keys:
            first.setdefault(key, i + 1)
    return first


def _last_rows(plan: GroupPlan, store_row: dict) -> dict[Hashable, int]:
    last: dict = {}
    for i, lop in enumerate(plan.ops):
        keys = [v for v in lop.op.operands if v in plan.tensors]
        keys += [k for k in plan.tensors if isinstance(k, tuple) and k[0] is lop.op]
        keys += [r for r in lop.op.results if r in plan.tensors]
        for key in keys:
            last[key] = i + 1
    for key, row in store_row.items():
        last[key] = max(last.get(key, row), row)
    return last


def _produced_rows(plan: GroupPlan) -> dict[Hashable, int]:
    return {r: i + 1 for i, lop in enumerate(plan.ops) for r in lop.op.results if r in plan.tensors}


def unsliced_timesteps(plan: GroupPlan, budget: float, costs) -> tuple[list[list[Item]], Lifetimes]:
    """The timestep table (module docstring) and every buffer's lifetime,
    with at most `budget` × a lane's bytes alive in any row (loads that
    would pass it wait for a later row; at the latest, the row before
    their reader); `costs` (costs.py) prices ops and loads."""
    rows: list[list[Item]] = [[]] + [[Item("compute", lop.op, 0)] for lop in plan.ops]
    tiu = [0.0] + [costs.tiu(lop.op) for lop in plan.ops]
    gdma = [0.0] * len(rows)
    n = len(rows)
    store_row = {k: min(_produced_rows(plan)[k] + 1, n) for k in plan.outputs}
    readers = _reader_rows(plan)
    last = _last_rows(plan, store_row)
    produced = _produced_rows(plan)
    size = {k: t.lane_bytes() for k, t in plan.tensors.items()}
    live = [0] * (n + 1)
    for key, row in produced.items():
        for r in range(row, last[key] + 1):
            live[r] += size[key]
    for lop_row, lop in enumerate(plan.ops, start=1):
        live[lop_row] += lop.buffer_size
    start: dict[Hashable, int] = {}
    cap = budget * LMEM_BYTES
    for key in sorted(plan.inputs, key=lambda k: readers.get(k, 0)):
        reader = readers.get(key, 1)
        cost = costs.gdma(plan, key)
        row = _pick_row(reader, cost, tiu, gdma, live, last[key], size[key], cap)
        start[key] = row
        gdma[row] += cost
        for r in range(row, last[key] + 1):
            live[r] += size[key]
        rows[row].append(Item(LOAD, key, 0))
    for key, row in store_row.items():
        if row >= len(rows):
            rows.append([])
        rows[row].append(Item(STORE, key, 0))
    lifetimes: Lifetimes = {}
    for key, tensor in plan.tensors.items():
        first = start.get(key, produced.get(key, 0))
        lifetimes[id(tensor)] = (first, last.get(key, first))
    for i, lop in enumerate(plan.ops, start=1):
        lifetimes[id(lop)] = (i, i)
    return rows, lifetimes


def _pick_row(reader: int, cost: float, tiu, gdma, live, last: int, size: int, cap: float) -> int:
    """Row 0 for what the first op reads; else the earliest row before the
    reader whose compute still hides `cost` and whose bytes stay under the
    cap until the buffer's last row, else the row with the most time left
    (the latest on ties) among those under the cap, else the row before the
    reader."""
    if reader <= 1:
        return 0
    fits = [r for r in range(1, reader) if max(live[r : last + 1]) + size <= cap]
    for r in fits:
        if gdma[r] + cost <= tiu[r]:
            return r
    if fits:
        return max(fits, key=lambda r: (tiu[r] - gdma[r], r))
    return reader - 1


def is_unsliced(plan: GroupPlan) -> bool:
    return plan.steps == 1


__all__ = ["Lifetimes", "is_unsliced", "unsliced_timesteps"]
