"""Plan one candidate group: slice counts, slices, timesteps, local memory, cycles.

Slice counts start from TPU-MLIR's `init_group_data_secs`: for each op,
the per-lane bytes of its first input, its result, its scratch buffer and
its weights over the lane size is how many slices it needs; N takes them
first (up to the batch), then H, then W. When the buffers do not fit a
lane, counts grow (N first, skipping counts that do not shrink the largest
slice, then H, then W), at most `MAX_TRIES` times; a group that still does
not fit is invalid, and the search splits it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from tpuc.dialects.base import shape_of
from tpuc.passes.layer_group.allocate import Allocation, Buffer, place
from tpuc.passes.layer_group.cost import group_cycles
from tpuc.passes.layer_group.layout import LocalLayout
from tpuc.passes.layer_group.rules import (
    AXIS_DIM,
    _memo,
    activations,
    dims,
    ebytes,
    rule_of,
    weights,
    why_global,
)
from tpuc.passes.layer_group.schedule import LifetimeError, Table, lifetimes, timesteps
from tpuc.passes.layer_group.slicing import AXES, GroupGraph, Secs, SliceError, Slicing, infer
from tpuc.target.chips.timing import Timing

MAX_TRIES = 20
MAX_SECS = 32  # LgConfig's MAX_NSECS = MAX_HSECS = MAX_WSECS
MIN_W_BYTES = 256  # the shortest W slice worth a GDMA row


class GroupInvalid(Exception):
    """The ops cannot form one group (the message says why)."""


@dataclass
class GroupPlan:
    graph: GroupGraph
    slicing: Slicing
    table: Table
    buffers: list[Buffer]  # keys: SSAValue (tensor) or ("scratch", op position)
    cycles: int
    tries: int
    layout: LocalLayout
    placed: Allocation | None = None

    @property
    def secs(self) -> Secs:
        return self.slicing.secs

    @property
    def allocation(self) -> Allocation:
        """The buffers' addresses. When they fit a lane even side by side the
        search does not need them, so they are computed on first use."""
        if self.placed is None:
            self.placed = place(self.buffers, conflicts(self.graph, self.table), self.layout)
            assert self.placed is not None, "the buffers fit a lane side by side"
        return self.placed


def max_secs(graph: GroupGraph) -> Secs:
    """Upper bounds of the slice counts: an axis splits only when every op
    allows it, at most into the smallest extent of that axis among the
    group's results; W slices keep at least `MIN_W_BYTES` bytes (GDMA rows
    shorter than that waste bandwidth: TPU-MLIR's can_split_w)."""
    bounds = []
    tensors = [op.results[0] for op in graph.ops]  # inputs may be broadcast (size 1)
    for axis in AXES:
        if not all(axis in rule_of(op).axes(op) for op in graph.ops):  # type: ignore[union-attr]
            bounds.append(1)
            continue
        extents = {dims(v)[AXIS_DIM[axis]] for v in tensors}
        if axis == "n" and len(extents) > 1:
            bounds.append(1)  # a batch that changes inside the group
            continue
        if axis == "w" and any(len(shape_of(v) or ()) > 4 for v in (*tensors, *graph.inputs)):
            bounds.append(1)  # dims past the 4th fold into W: no strided window of a slice
            continue
        bound = min(min(extents), MAX_SECS)
        if axis == "w":
            bound = min(bound, min(dims(v)[3] * ebytes(v) for v in tensors) // MIN_W_BYTES)
        bounds.append(max(1, bound))
    return Secs(*bounds)


def op_weight_bytes(op: Operation, i: int, layout: LocalLayout) -> int:
    rule = rule_of(op)
    return _memo(  # type: ignore[return-value]
        ("weight_bytes", op, i, layout),
        lambda: layout.buffer_bytes(rule.weight_bytes(op, i, layout)),  # type: ignore[union-attr]
    )


def weight_bytes(graph: GroupGraph, layout: LocalLayout) -> dict[SSAValue, int]:
    found: dict[SSAValue, int] = {}
    for op in graph.ops:
        for i, value in enumerate(op.operands):
            if value in graph.weight_set and value not in found:
                found[value] = op_weight_bytes(op, i, layout)
    return found


def _op_need(op: Operation, layout: LocalLayout) -> int:
    """Per-lane bytes of the op unsliced: first input, result, scratch, weights."""
    rule = rule_of(op)
    out = dims(op.results[0])
    first = next(iter(activations(op)), None)
    total = layout.lane_bytes(out, ebytes(op.results[0]))
    total += rule.scratch_bytes(op, out, layout)  # type: ignore[union-attr]
    if first is not None:
        total += layout.lane_bytes(dims(op.operands[first]), ebytes(op.operands[first]))
    return total + sum(op_weight_bytes(op, i, layout) for i in weights(op))


def initial_secs(graph: GroupGraph, layout: LocalLayout, bound: Secs) -> Secs:
    need = 1
    for op in graph.ops:
        total = _memo(("need", op, layout), lambda op=op: _op_need(op, layout))
        need = max(need, -(-total // layout.lmem_bytes))  # type: ignore[operator]
    n = min(need, bound.n)
    rest = -(-need // n)
    h = min(rest, bound.h)
    w = min(-(-rest // h), bound.w)
    return Secs(n, h, w)


def _largest(size: int, secs: int) -> int:
    return -(-size // secs)


def grow(secs: Secs, bound: Secs, graph: GroupGraph) -> Secs | None:
    """The next slice counts to try: N first (only counts that shrink the
    largest slice), then H, then W; None when all are at their bounds."""
    batch = dims(graph.ops[-1].results[0])[0]
    for n in range(secs.n + 1, bound.n + 1):
        if _largest(batch, n) < _largest(batch, secs.n):
            return Secs(n, secs.h, secs.w)
    if secs.h < bound.h:
        return Secs(secs.n, secs.h + 1, secs.w)
    if secs.w < bound.w:
        return Secs(secs.n, secs.h, secs.w + 1)
    return None


def _buffers(graph: GroupGraph, slicing: Slicing, table: Table, layout: LocalLayout, wbytes):
    live = lifetimes(graph, table)
    found: list[Buffer] = []
    for value in graph.weights:
        found.append(Buffer(value, wbytes[value], live[value]))
    for value in graph.tensors():
        size = layout.lane_bytes(slicing.max_shape(value), ebytes(value))
        found.append(Buffer(value, layout.buffer_bytes(size), live[value]))
    for pos, op in enumerate(graph.ops):
        out = slicing.op_shape(pos, op)
        size = rule_of(op).scratch_bytes(op, out, layout)  # type: ignore[union-attr]
        if size:
            found.append(
                Buffer(("scratch", pos), layout.buffer_bytes(size), frozenset({table.op_ts[pos]}))
            )
    return found


def conflicts(graph: GroupGraph, table: Table) -> dict[object, set[object]]:
    """Buffer pairs to keep in different banks: a TIU op's operands, result
    and scratch; and what GDMA moves in the timestep against those."""
    found: dict[object, set[object]] = {}

    def pair(a: object, b: object) -> None:
        if a != b:
            found.setdefault(a, set()).add(b)
            found.setdefault(b, set()).add(a)

    for step in table.steps:
        moved = [m.value for m in step.moves]
        for pos in step.ops:
            op = graph.ops[pos]
            keys: list[object] = [op.operands[i] for i in activations(op)] + [op.results[0]]
            keys += [v for v in op.operands if v in graph.weight_set] + [("scratch", pos)]
            for i, a in enumerate(keys):
                for b in keys[i + 1 :] + moved:
                    pair(a, b)
    return found


def _name(op: Operation) -> str:
    value = op.value("name") if hasattr(op, "value") else None
    return str(value or "?")


def _attempt(graph, secs, layout, wbytes):
    """Slices, timesteps, buffers, and whether they fit (with their
    allocation when it had to be computed to know)."""
    slicing = infer(graph, secs, layout.float_slices)
    table = timesteps(graph, hold=secs.loop > 1)
    buffers = _buffers(graph, slicing, table, layout, wbytes)
    if sum(b.size for b in buffers) <= layout.lmem_bytes:
        return slicing, table, buffers, None, True
    allocation = place(buffers, conflicts(graph, table), layout)
    return slicing, table, buffers, allocation, allocation is not None


def plan_group(ops: Sequence[Operation], layout: LocalLayout, timing: Timing) -> GroupPlan:
    """The plan of `ops` as one group (GroupInvalid when they cannot be one)."""
    if len(ops) < 2:
        raise GroupInvalid("a group needs two ops or more")
    for op in ops:
        reason = why_global(op)
        if reason is not None:
            raise GroupInvalid(f"{op.name} '{op.results[0].name_hint or _name(op)}': {reason}")
    graph = GroupGraph.of(ops)
    wbytes = weight_bytes(graph, layout)
    if sum(wbytes.values()) > layout.lmem_bytes:
        raise GroupInvalid(f"its weights need {sum(wbytes.values())} bytes per lane")
    bound = max_secs(graph)
    secs: Secs | None = initial_secs(graph, layout, bound)
    for tries in range(1, MAX_TRIES + 1):
        try:
            slicing, table, buffers, allocation, fits = _attempt(graph, secs, layout, wbytes)
        except (SliceError, LifetimeError) as exc:
            raise GroupInvalid(str(exc)) from None
        if fits:
            cycles = group_cycles(graph, slicing, table, timing)
            return GroupPlan(graph, slicing, table, buffers, cycles, tries, layout, allocation)
        secs = grow(secs, bound, graph)
        if secs is None:
            break
    raise GroupInvalid(f"does not fit {layout.lmem_bytes} bytes per lane")


def plan_group_at(found: GroupPlan, secs: Secs, timing: Timing) -> GroupPlan:
    """The plan of a valid group's ops at other slice counts (no growth), for
    a target that prices slice counts itself (the native target asks the
    vendor); GroupInvalid when they exceed the bounds or do not fit."""
    graph, layout = found.graph, found.layout
    bound = max_secs(graph)
    if any(secs.of(axis) > bound.of(axis) for axis in AXES):
        raise GroupInvalid(f"slice counts {secs} exceed {bound}")
    try:
        slicing, table, buffers, allocation, fits = _attempt(
            graph, secs, layout, weight_bytes(graph, layout)
        )
    except (SliceError, LifetimeError) as exc:
        raise GroupInvalid(str(exc)) from None
    if not fits:
        raise GroupInvalid(f"does not fit {layout.lmem_bytes} bytes per lane at {secs}")
    cycles = group_cycles(graph, slicing, table, timing)
    return GroupPlan(graph, slicing, table, buffers, cycles, 1, layout, allocation)


__all__ = ["MAX_TRIES", "GroupInvalid", "GroupPlan", "grow", "max_secs", "plan_group",
           "plan_group_at"]  # fmt: skip
