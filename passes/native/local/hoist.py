"""Program order for the layer-group search: a shrinking op next to its input.

The search groups runs of consecutive ops, so an op placed far from the op
whose result it reads can only join the group of its readers. ShuffleNet's
shortcut average pool (and the casts around tpuc's f32 form of a pool that
does not count the padding) comes after the whole grouped-conv branch in
the ONNX order, behind the global channel-shuffle Permute: its producer's
group had to store the pool's input (in INT8 as f32: four bytes an
element) for a later group to load it again. TPU-MLIR's final module runs
the pool right after its producer, inside that group, and stores only the
pooled quarter. `hoist_shrinking` moves such shrinking ops up, which is
always a valid order: the op reads nothing else.
"""

from __future__ import annotations

from xdsl.ir import Block, Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.core import tensor_names

HOISTED = (tpu.Pool2DOp, tpu.CastOp)
"""The op classes moved (a pool and the casts of its f32 form)."""


def _bytes(value) -> int:
    from tpuc.passes.address_assign import tensor_bytes

    return tensor_bytes(value)


def _movable(op: Operation) -> Operation | None:
    """The producer `op` may move next to: one activation operand made by an
    op of the same block, a result smaller than that operand (a same-size
    pool, such as inception's 3x3 stride-1 branch pools, stays where it is:
    what moving it does to those groups is not measured)."""
    if not isinstance(op, HOISTED) or len(op.operands) != 1 or len(op.results) != 1:
        return None
    source = op.operands[0].owner
    if not isinstance(source, Operation) or source.parent is not op.parent:
        return None
    if not shape_of(op.results[0]) or _bytes(op.results[0]) >= _bytes(op.operands[0]):
        return None
    return source


def hoist_shrinking(block: Block) -> list[str]:
    """Move every Pool2D/Cast whose result is smaller than its one input
    to just after that input's op (a chain of them keeps its order); the
    names of the ops moved."""
    moved = []
    for op in list(block.ops):
        source = _movable(op)
        if source is None or source.next_op is op:
            continue
        op.detach()
        block.insert_op_after(op, source)
        moved.append(tensor_names(op)[0])
    return moved


__all__ = ["HOISTED", "hoist_shrinking"]
