"""The timestep table of a group and its three-stage software pipeline
(layer-group.md §7).

Nearest assignment, for ops 0..k-1: row 0 loads op 0's inputs; row i+1
computes op i, loads what op i+1 reads that is not loaded yet and stores
op i-1's results that leave the group; row k+1 stores op k-1's results.
The pipeline then moves row k+1's stores into row 1 (stage 2: they store
slice i-1 while op 0 computes slice i) and row 0's loads into row k (stage
0: they load slice i+1 while the last op computes slice i), except a load
the last op reads itself, which keeps a row of its own before op 0. Every
other move and every compute is stage 1. Empty rows go; what remains are
the group's timesteps, all run once per loop iteration.

Weights are never sliced; when the loop runs more than once they are held:
loaded once (in the first iteration) and alive in every timestep.

A buffer's lifetime is the set of timesteps it is alive in. On a virtual
time line where stage s at timestep t happens at (s - 1)·T + t (T the
number of timesteps), a buffer lives from its first event (load or
compute) to its last (read or store); it occupies those times modulo T.
A lifetime longer than T would overlap the buffer's next slice: invalid.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import SSAValue

from tpuc.passes.layer_group.rules import activations, is_weight
from tpuc.passes.layer_group.slicing import GroupGraph

LOAD, STORE = "load", "store"


@dataclass(frozen=True)
class Move:
    """One GDMA transfer of a tensor slice (or of a whole held weight)."""

    value: SSAValue
    kind: str  # LOAD | STORE
    stage: int
    held: bool = False


@dataclass
class Step:
    ops: list[int] = field(default_factory=list)  # op positions computed (stage 1)
    moves: list[Move] = field(default_factory=list)


@dataclass
class Table:
    steps: list[Step]
    op_ts: list[int]  # op position -> timestep
    move_ts: dict[tuple[SSAValue, str], int]
    held: set[SSAValue]

    @property
    def count(self) -> int:
        return len(self.steps)

    def moves(self) -> list[tuple[int, Move]]:
        return [(t, m) for t, step in enumerate(self.steps) for m in step.moves]


def _nearest(graph: GroupGraph, hold: bool) -> list[Step]:
    k = len(graph.ops)
    rows = [Step() for _ in range(k + 2)]
    loaded: set[SSAValue] = set()
    outside = {*graph.inputs, *graph.weights}
    for pos, op in enumerate(graph.ops):
        rows[pos + 1].ops.append(pos)
        row = rows[pos]
        wanted = [op.operands[i] for i in activations(op)] + [
            v for v in op.operands if is_weight(v)
        ]
        for value in wanted:
            if value in outside and value not in loaded:
                loaded.add(value)
                held = hold and is_weight(value)
                row.moves.append(Move(value, LOAD, 1, held))
        for value in op.results:
            if value in graph.output_set:
                rows[pos + 2].moves.append(Move(value, STORE, 1))
    return rows


def _pipeline(graph: GroupGraph, rows: list[Step]) -> list[Step]:
    k = len(graph.ops)
    last_reads = set(graph.ops[-1].operands)
    keep, early = [], []
    for move in rows[0].moves:
        if move.value in last_reads:
            keep.append(move)
        else:
            early.append(Move(move.value, LOAD, 0, move.held))
    rows[0].moves = keep
    rows[k].moves.extend(early)
    rows[1].moves.extend(Move(m.value, STORE, 2) for m in rows[k + 1].moves)
    rows[k + 1].moves = []
    return [row for row in rows if row.ops or row.moves]


def timesteps(graph: GroupGraph, hold: bool) -> Table:
    """The pipelined timestep table of `graph` (`hold`: weights are held)."""
    steps = _pipeline(graph, _nearest(graph, hold))
    op_ts = [0] * len(graph.ops)
    move_ts: dict[tuple[SSAValue, str], int] = {}
    held: set[SSAValue] = set()
    for t, step in enumerate(steps):
        for pos in step.ops:
            op_ts[pos] = t
        for move in step.moves:
            move_ts[move.value, move.kind] = t
            if move.held:
                held.add(move.value)
    return Table(steps, op_ts, move_ts, held)


class LifetimeError(Exception):
    """A buffer would overlap its own next slice."""


def lifetimes(graph: GroupGraph, table: Table) -> dict[SSAValue, frozenset[int]]:
    """The timesteps each tensor of the group (weights included) is alive in."""
    count = table.count
    events: dict[SSAValue, list[int]] = {}
    for t, move in table.moves():
        events.setdefault(move.value, []).append((move.stage - 1) * count + t)
    for pos, op in enumerate(graph.ops):
        t = table.op_ts[pos]
        for value in (*op.operands, *op.results):
            if value in events or value.owner in graph.position or value in graph.input_set:
                events.setdefault(value, []).append(t)
    found: dict[SSAValue, frozenset[int]] = {}
    for value, times in events.items():
        if value in table.held:
            found[value] = frozenset(range(count))
            continue
        first, last = min(times), max(times)
        if last - first + 1 > count:
            raise LifetimeError(f"a buffer lives {last - first + 1} of {count} timesteps")
        found[value] = frozenset(v % count for v in range(first, last + 1))
    return found


__all__ = ["LOAD", "STORE", "LifetimeError", "Move", "Step", "Table", "lifetimes", "timesteps"]
