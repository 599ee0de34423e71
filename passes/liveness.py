"""Live ranges of the activations of a function body, for address-assign.

Ops are numbered in graph order (their position in the block). A tensor
lives over the inclusive interval [index of its defining op, index of its
last reader]: an op's result therefore always overlaps the operands it reads,
so no op writes over its own live input (TPU-MLIR's condition ⑤). Network
inputs live from the start, returned values to the end. Reshape-family ops
move no data: their result shares its input's buffer, and the live ranges of
the whole chain are merged into one `Buffer`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import Block, Operation, SSAValue

from tpuc.dialects import top
from tpuc.dialects.traits import InPlaceView
from tpuc.ir.core import body_ops, last_uses

NO_MEMORY = (top.NoneOp,)
CONSTANT = (top.WeightOp,)


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
    return found


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
