"""Cycles of a global layer and of a pipelined group, from tpuc's cycle model.

Work is priced as tpuc/target/isa/units.py prices commands: a TIU task (unit, work,
element bytes) from the op's rule on the shapes it computes, and GDMA moves
by their bytes and direction (`tpuc.target.cost.cycles`). A global layer loads
every operand from DDR (weights included), computes, and stores its
results, one after the other. A group runs `loop` iterations of its
timesteps plus two to fill and drain the pipeline; in iteration it, the
items of stage s are active when s <= it < loop + s (stage 1 computes,
stage 0 loads, stage 2 stores). A timestep costs max(TIU, GDMA) over its
active items; slices are priced at their largest size (as TPU-MLIR does);
held weights are loaded in the first iteration only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from xdsl.ir import Operation

from tpuc.dialects.base import shape_of
from tpuc.dialects.traits import InPlaceView
from tpuc.passes.layer_group.rules import _memo, activations, dims, ebytes, is_absent, rule_of
from tpuc.passes.layer_group.schedule import LOAD, Table
from tpuc.passes.layer_group.slicing import GroupGraph, Slicing
from tpuc.target.chips.timing import Direction, Timing, Unit
from tpuc.target.cost import Task, cycles

_GLOBAL_UNITS = {
    "tpu.MatMul": Unit.MATMUL,
    "tpu.LSTM": Unit.MATMUL,
    "tpu.GRU": Unit.MATMUL,
    "tpu.Reduce": Unit.POOL,
    "tpu.Softmax": Unit.NORM,
    "tpu.LayerNorm": Unit.NORM,
    "tpu.InstanceNorm": Unit.NORM,
    "tpu.GroupNorm": Unit.NORM,
    "tpu.PowTensor": Unit.SFU,
    "tpu.Arg": Unit.SFU,
    "tpu.TopK": Unit.SFU,
}
"""Units of the ops without a local rule (everything else: elementwise arith)."""


def nbytes(value) -> int:
    return math.prod(shape_of(value) or ()) * ebytes(value)


def move(nbytes_: int, direction: Direction, timing: Timing, runs: int = 0) -> int:
    task = Task(Unit.DMA, nbytes_, direction=direction, runs=runs)
    return cycles(task, timing) if nbytes_ else 0


def slice_runs(piece: Sequence[int], whole: Sequence[int]) -> int:
    """Contiguous runs of a row-major slice `piece` of `whole`: the row
    bursts its load or store is made of (tpuc.target.isa.units.runs)."""
    run = 1
    for part, full in zip(reversed(piece), reversed(whole), strict=False):
        run *= part
        if part != full:
            break
    return max(math.prod(piece) // max(run, 1), 1)


def _global_task(op: Operation) -> Task:
    rule = rule_of(op)
    out = dims(op.results[0]) if op.results else (1, 1, 1, 1)
    if rule is not None and len(op.results) == 1:
        return rule.task(op, out, [dims(v) for v in op.operands])
    unit = _GLOBAL_UNITS.get(op.name, Unit.ARITH)
    tensors = [v for v in (*op.operands, *op.results) if shape_of(v) is not None]
    widest = max((ebytes(v) for v in tensors), default=1)
    if unit is Unit.MATMUL:
        k = (shape_of(op.operands[0]) or (1,))[-1]
        return Task(unit, sum(math.prod(shape_of(r) or ()) for r in op.results) * k, widest)
    return Task(unit, max((math.prod(shape_of(v) or ()) for v in tensors), default=0), widest)


def global_cycles(op: Operation, timing: Timing) -> int:
    """Load every operand, compute, store every result (in-place views: 0)."""
    if op.has_trait(InPlaceView):
        return 0
    loads = sum(nbytes(v) for v in op.operands if not is_absent(v) and shape_of(v) is not None)
    stores = sum(nbytes(v) for v in op.results if shape_of(v) is not None)
    return (
        move(loads, Direction.DDR_TO_LMEM, timing)
        + cycles(_global_task(op), timing)
        + move(stores, Direction.LMEM_TO_DDR, timing)
    )


def iterations(loop: int, stages: int = 3) -> Counter[int]:
    """Iteration classes: it (or -1 for every middle iteration) -> count.
    The first `stages` and last `stages` iterations are kept apart (held
    weights and the fill/drain differ there), the middle ones are alike."""
    total = loop + stages - 1
    if total <= 2 * stages:
        return Counter(range(total))
    found = Counter(range(stages))
    found.update(range(total - stages, total))
    found[-1] = total - 2 * stages
    return found


def _active(it: int, stage: int, loop: int) -> bool:
    return it == -1 or stage <= it < loop + stage


def local_cycles(op: Operation, out, ins, timing: Timing) -> int:
    """TIU cycles of `op` on an output slice of shape `out` (memoised)."""
    key = ("cycles", op, tuple(out), tuple(ins), id(timing))

    def compute() -> int:
        return cycles(rule_of(op).task(op, out, ins), timing)  # type: ignore[union-attr]

    return _memo(key, compute)  # type: ignore[return-value]


def step_costs(graph: GroupGraph, slicing: Slicing, table: Table, timing: Timing):
    """Per timestep: the TIU cycles of its ops, its moves' cycles with stages."""
    tiu = [0] * table.count
    for pos, op in enumerate(graph.ops):
        ins = [
            slicing.read_shape(pos, i, v) if i in activations(op) else None
            for i, v in enumerate(op.operands)
        ]
        tiu[table.op_ts[pos]] += local_cycles(op, slicing.op_shape(pos, op), ins, timing)
    moves: list[list[tuple[int, int, bool]]] = [[] for _ in range(table.count)]
    for t, m in table.moves():
        runs = 0
        if m.held or m.value in graph.weight_set:
            size = nbytes(m.value)
        else:
            piece = slicing.max_shape(m.value)
            size = math.prod(piece) * ebytes(m.value)
            runs = slice_runs(piece, dims(m.value))
        direction = Direction.DDR_TO_LMEM if m.kind == LOAD else Direction.LMEM_TO_DDR
        moves[t].append((m.stage, move(size, direction, timing, runs), m.held))
    return tiu, moves


def group_cycles(graph: GroupGraph, slicing: Slicing, table: Table, timing: Timing) -> int:
    """Cycles of the whole pipelined loop (module docstring)."""
    loop = slicing.secs.loop
    tiu, moves = step_costs(graph, slicing, table, timing)
    total = 0
    for it, count in sorted(iterations(loop).items()):
        per_iteration = 0
        for t in range(table.count):
            compute = tiu[t] if _active(it, 1, loop) else 0
            dma = sum(
                c
                for stage, c, held in moves[t]
                if _active(it, stage, loop) and (not held or it == stage)
            )
            per_iteration += max(compute, dma)
        total += count * per_iteration
    return total


__all__ = ["global_cycles", "group_cycles", "iterations", "step_costs"]
