"""Live ranges of the activations of a function body, for address-assign.

Ops are numbered in graph order (their position in the block). A tensor
lives over the inclusive interval [index of its defining op, index of its
last reader]: an op's result therefore always overlaps the operands it reads,
so no op writes over its own live input (TPU-MLIR's condition ⑤). Network
inputs live from the start, returned values to the end. Reshape-family ops
move no data: their result shares its input's buffer, and the live ranges of
the whole chain are merged into one `Buffer`.

A concat along an axis with nothing before it (batch 1, NCHW channels) takes
in place the inputs it alone reads (TPU-MLIR's in-place concat): each such
input is produced straight into its window of the concat's buffer (an
offset in `Buffer.offsets`), and the buffer lives from the first of them;
codegen then has nothing left to move for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, Operation, SSAValue

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.dialects.traits import InPlaceView
from tpuc.ir.core import body_ops, last_uses

NO_MEMORY = (top.NoneOp,)
CONSTANT = (top.WeightOp,)
IN_PLACE_EXCLUDED = (top.InputOp, top.WeightOp, tpu.ConcatOp, tpu.GroupOp)


@dataclass
class Buffer:
    """Activations sharing one region of memory (an in-place chain), with
    the union of their live ranges. `root` is the value that owns the data:
    a weight when the chain starts at one (then it is not an activation)."""

    root: SSAValue
    values: list[SSAValue] = field(default_factory=list)
    start: int = 0
    end: int = 0
    constant: bool = False  # the chain starts at a weight: it has the weight's address
    offsets: dict[SSAValue, int] = field(default_factory=dict)  # bytes past the start; 0 if absent

    def overlaps(self, other: Buffer) -> bool:
        return self.start <= other.end and other.start <= self.end


def in_place_source(op: Operation) -> SSAValue | None:
    """The operand whose memory `op`'s result reuses, None if it has its own."""
    return op.operands[0] if op.has_trait(InPlaceView) else None


def buffers(block: Block) -> list[Buffer]:
    """One Buffer per weight or activation not produced in place, in
    definition order; values of in-place ops join their source's buffer."""
    ops = body_ops(block)
    last = last_uses(block)
    owner: dict[SSAValue, Buffer] = {}
    found: list[Buffer] = []
    for i, op in enumerate(ops):
        if isinstance(op, NO_MEMORY):
            continue
        source = in_place_source(op)
        for value in op.results:
            buffer = owner.get(source) if source is not None else None
            if buffer is None:
                start = 0 if isinstance(op, top.InputOp) else i
                buffer = Buffer(value, start=start, end=start, constant=isinstance(op, CONSTANT))
                found.append(buffer)
            buffer.values.append(value)
            buffer.end = max(buffer.end, last.get(value, i))
            owner[value] = buffer
    for op in ops:
        if isinstance(op, tpu.ConcatOp):
            _concat_in_place(op, owner, found)
    return found


def _value_bytes(value: SSAValue) -> int | None:
    from tpuc.passes.address_assign import element_bytes

    t = value.type
    if not isinstance(t, TensorType) or any(d < 0 for d in t.get_shape()):
        return None
    size = element_bytes(t.element_type)
    return None if size is None else math.prod(t.get_shape()) * size


def _concat_in_place(op: Operation, owner: dict, found: list[Buffer]) -> None:
    """Move into the concat's buffer, at their windows, the inputs it can
    take in place (see the module docstring): a buffer of their own holding
    only them, produced by an op (no input, weight, group or other concat),
    read by this concat alone, of the result's element size."""
    out = op.results[0]
    shape = shape_of(out)
    axis = op.value("axis") % len(shape)
    target = owner.get(out)
    out_bytes = _value_bytes(out)
    if target is None or out_bytes is None or math.prod(shape[:axis]) != 1:
        return
    element = out_bytes // max(1, math.prod(shape))
    base = target.offsets.get(out, 0)
    offset = 0
    for value in op.operands:
        size = _value_bytes(value)
        if size is None:
            return
        if _takes_in_place(op, value, owner, size, element):
            source = owner[value]
            found.remove(source)
            target.values.append(value)
            target.offsets[value] = base + offset
            target.start = min(target.start, source.start)
            owner[value] = target
        offset += size


def _takes_in_place(op: Operation, value: SSAValue, owner: dict, size: int, element: int) -> bool:
    source = owner.get(value)
    producer = value.owner
    if source is None or source.values != [value] or source.constant:
        return False
    if not isinstance(producer, Operation) or isinstance(producer, IN_PLACE_EXCLUDED):
        return False
    if size != math.prod(shape_of(value)) * element:
        return False
    return [use.operation for use in value.uses] == [op]


def weight_order(block: Block) -> list[SSAValue]:
    """Weight results by their first reader in graph order (unread ones
    last, in their own order)."""
    ops = body_ops(block)
    first: dict[SSAValue, int] = {}
    for i, op in enumerate(ops):
        for value in op.operands:
            first.setdefault(value, i)
    weights = [op.results[0] for op in ops if isinstance(op, CONSTANT)]
    position = {value: i for i, value in enumerate(weights)}
    return sorted(weights, key=lambda v: (first.get(v, len(ops)), position[v]))


__all__ = [
    "Buffer",
    "body_ops",
    "buffers",
    "in_place_source",
    "last_uses",
    "weight_order",
]
