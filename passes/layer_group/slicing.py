"""A group's tensors and their slices (layer-group.md §5, §6).

Slice counts `Secs(n, h, w)` split every group output near-evenly along
each axis of its 4-D view (the first `size % secs` slices get one more).
Backward inference then walks the group's ops from the last to the first
and asks each op's rule which range of every operand it reads. Axes are
independent (no rule mixes them), so each axis is inferred on its own for
its `secs` slice indices; slice (i, j, k) of a tensor is its n-range i,
h-range j and w-range k.

A tensor read by two consumers must be read in the same range by both,
except when every consumer is a convolution (TPU-MLIR's exception for
BM168x): the tensor then holds the hull and each conv reads its part
(`Slicing.reads`). A group output that is also read inside the group holds
the hull of what it is read in and its own output slice (which is what is
stored). A slicing is invalid when a range is empty, when a later slice
does not move forward or starts again at 0 (a tensor of extent 1 along
the axis, a broadcast operand, holds its one row in every slice).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from tpuc.dialects import tpu
from tpuc.dialects.base import TensorOp
from tpuc.passes.layer_group.rules import (
    AXIS_DIM,
    Range,
    _memo,
    activations,
    attr,
    dims,
    int_kind,
    is_weight,
    rule_of,
)

AXES = ("n", "h", "w")


def split(size: int, secs: int) -> list[Range]:
    """`size` in `secs` near-even ranges, the first `size % secs` one longer."""
    base, extra = divmod(size, secs)
    found, start = [], 0
    for i in range(secs):
        length = base + (1 if i < extra else 0)
        found.append((start, length))
        start += length
    return found


def hull(a: Range, b: Range) -> Range:
    start = min(a[0], b[0])
    return (start, max(a[0] + a[1], b[0] + b[1]) - start)


@dataclass(frozen=True, order=True)
class Secs:
    n: int = 1
    h: int = 1
    w: int = 1

    @property
    def loop(self) -> int:
        return self.n * self.h * self.w

    def of(self, axis: str) -> int:
        return getattr(self, axis)


@dataclass
class GroupGraph:
    """The ops of one candidate group and the values crossing its border."""

    ops: list[Operation]
    inputs: list[SSAValue] = field(default_factory=list)  # activations from outside
    weights: list[SSAValue] = field(default_factory=list)
    outputs: list[SSAValue] = field(default_factory=list)  # read outside or returned
    position: dict[Operation, int] = field(default_factory=dict)
    input_set: set[SSAValue] = field(default_factory=set)
    weight_set: set[SSAValue] = field(default_factory=set)
    output_set: set[SSAValue] = field(default_factory=set)

    @staticmethod
    def of(ops: Sequence[Operation]) -> GroupGraph:
        graph = GroupGraph(list(ops), position={op: i for i, op in enumerate(ops)})
        seen: set[SSAValue] = set()
        for op in ops:
            for value in op.operands:
                if value in seen or value.owner in graph.position:
                    continue
                seen.add(value)
                if is_weight(value):
                    graph.weights.append(value)
                elif value in (op.operands[i] for i in activations(op)):
                    graph.inputs.append(value)
            for value in op.results:
                outside = [u.operation for u in value.uses if u.operation not in graph.position]
                if outside or not value.uses or any(isinstance(o, func.ReturnOp) for o in outside):
                    graph.outputs.append(value)
        graph.input_set = set(graph.inputs)
        graph.weight_set = set(graph.weights)
        graph.output_set = set(graph.outputs)
        return graph

    def consumers(self, value: SSAValue) -> list[Operation]:
        return [u.operation for u in value.uses if u.operation in self.position]

    def tensors(self) -> list[SSAValue]:
        """Every activation a group buffer holds: inputs, then results."""
        return [*self.inputs, *(op.results[0] for op in self.ops)]


@dataclass
class Slicing:
    """Ranges per tensor and axis, one per slice index along that axis."""

    secs: Secs
    held: dict[SSAValue, dict[str, list[Range]]]
    reads: dict[tuple[int, int], dict[str, list[Range]]]  # (op position, operand) -> ranges
    stored: dict[SSAValue, dict[str, list[Range]]]  # group outputs: the slice each stores

    def max_shape(self, value: SSAValue) -> tuple[int, int, int, int]:
        """The largest slice of `value` (what its buffer must hold)."""
        c = dims(value)[1]
        n, h, w = (max(size for _, size in self.held[value][a]) for a in AXES)
        return (n, c, h, w)

    def op_shape(self, position: int, op: Operation) -> tuple[int, int, int, int]:
        return self.max_shape(op.results[0])

    def read_shape(self, position: int, operand: int, value: SSAValue) -> tuple[int, ...]:
        ranges = self.reads.get((position, operand))
        if ranges is None:
            return dims(value)
        n, h, w = (max(size for _, size in ranges[a]) for a in AXES)
        return (n, dims(value)[1], h, w)


class SliceError(Exception):
    """Why a slicing is invalid (the group is, for these slice counts)."""


def _all_convs(ops: Iterable[Operation]) -> bool:
    return all(isinstance(op, tpu.Conv2DOp) for op in ops)


def _label(value: SSAValue) -> str:
    owner = value.owner
    if isinstance(owner, TensorOp):
        return owner.names[value.index]
    return str(value.name_hint or "value")


def _infer_axis(
    graph: GroupGraph, axis: str, secs: int, slicing: Slicing, float_slices: bool
) -> None:
    d = AXIS_DIM[axis]
    for k in range(secs):
        need: dict[SSAValue, Range] = {}
        for value in graph.outputs:
            own = split(dims(value)[d], secs)[k]
            slicing.stored.setdefault(value, {}).setdefault(axis, []).append(own)
            need[value] = own
        for pos in range(len(graph.ops) - 1, -1, -1):
            op = graph.ops[pos]
            out = need[op.results[0]]
            if not float_slices and gemm_float(op):
                out = _whole_gemm(op, axis, secs, out)
            slicing.held.setdefault(op.results[0], {}).setdefault(axis, []).append(out)
            for i, found in enumerate(rule_of(op).backward(op, axis, out)):  # type: ignore[union-attr]
                if found is None:
                    continue
                slicing.reads.setdefault((pos, i), {}).setdefault(axis, []).append(found)
                value = op.operands[i]
                _need(graph, need, value, found, axis)
        for value in graph.inputs:
            slicing.held.setdefault(value, {}).setdefault(axis, []).append(need[value])


def gemm_float(op: Operation) -> bool:
    """A float convolution that the kernel library runs as BLAS GEMMs (not
    depthwise): its float32 sums depend on the GEMM's shape, so a slice of
    its output would not be bit-identical to the whole layer's."""
    if not isinstance(op, tpu.Conv2DOp | tpu.DeconvOp):
        return False
    return _memo(("gemm_float", op), lambda: _gemm_float(op))  # type: ignore[return-value]


def _gemm_float(op: Operation) -> bool:
    if int_kind(op):
        return False
    channels = dims(op.operands[0])[1]
    group = int(attr(op, "group", 1) or 1)
    return not (group > 1 and group == channels == dims(op.results[0])[1])


def _whole_gemm(op: Operation, axis: str, secs: int, out: Range) -> Range:
    """A float GEMM convolution computes its whole output along `axis`
    (consumers that read less read their part); sliced, the group is invalid."""
    full = dims(op.results[0])[AXIS_DIM[axis]]
    if secs > 1:
        raise SliceError(
            f"float convolution '{_label(op.results[0])}' cannot be sliced along {axis} "
            "bit-exactly (its GEMM's float sums depend on the slice)"
        )
    return (0, full) if out != (0, full) else out


def _need(graph: GroupGraph, need: dict[SSAValue, Range], value: SSAValue, found: Range, axis):
    """Record that `value` must hold `found` (see the module docstring)."""
    known = need.get(value)
    if known is None or known == found:
        need[value] = found
        return
    if _all_convs(graph.consumers(value)) or value in graph.output_set:
        need[value] = hull(known, found)
        return
    raise SliceError(
        f"two consumers need different {axis} slices of '{_label(value)}' ({known} and {found})"
    )


def _check(value: SSAValue, axis: str, ranges: list[Range]) -> None:
    if dims(value)[AXIS_DIM[axis]] == 1 and set(ranges) == {(0, 1)}:
        return  # extent 1 (a broadcast operand): the same row in every slice
    for k, (start, size) in enumerate(ranges):
        if size <= 0:
            raise SliceError(f"an empty {axis} slice of '{_label(value)}'")
        if k == 0:
            continue
        prev_start, prev_size = ranges[k - 1]
        if start == 0 or start < prev_start or start + size <= prev_start + prev_size:
            raise SliceError(f"{axis} slice {k} of '{_label(value)}' makes no progress")


def infer(graph: GroupGraph, secs: Secs, float_slices: bool = False) -> Slicing:
    """The slices of every tensor of the group (SliceError when invalid);
    `float_slices`: float GEMM convs slice like the others (`gemm_float`)."""
    slicing = Slicing(secs, {}, {}, {})
    for axis in AXES:
        _infer_axis(graph, axis, secs.of(axis), slicing, float_slices)
    for value, per_axis in slicing.held.items():
        for axis, ranges in per_axis.items():
            _check(value, axis, ranges)
    return slicing


__all__ = ["AXES", "GroupGraph", "Secs", "SliceError", "Slicing", "hull", "infer", "split"]
