"""Narrow elementwise chains spread over the 64 lanes before layer groups
are planned (TPU-MLIR's GROUP_SMALL_C groups do the same by viewing such
a tensor as [n, 64, h', 1]).

A tensor of few channels sits on as many lanes: ppocr_det's sigmoid (an
INT8 Lut, then its Cast to f32) on the 1x1x320x320 map runs on one lane,
102,400 + 6,400 vendor cycles in a group. A Lut with one table and a Cast
read every element alike, so their chain is computed on a view of the
same bytes as [n, 64, h', w'] between two in-place reshapes (tpu.Reshape
moves nothing: address-assign gives its result its operand's bytes): the
same bytes, 64 lanes, about 1/64 of the TIU time. The last reshape takes
the chain's last name (a model output keeps its name); the chain's ops
get `_spread` names.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.core import element_of, main_function
from tpuc.passes.native.local.plan import NPU_NUM

NARROW = 4
"""Channels at most: a tensor on this few lanes (1/16 of the chip or less)
is spread. The reshapes cut a layer group, so a chain between two ops a
group could hold costs a store and a load: ppocr_cls's 8-channel
hard-swish between two convolutions is left alone."""
MIN_ROWS = 4
"""Per-lane rows of the view at least (rows to cut into H slices); its width
the widest divisor of the plane up to the tensor's own."""


def view_shape(shape) -> tuple[int, int, int, int] | None:
    """[n, 64, h', w'] of the same elements per image, or None."""
    if shape is None or len(shape) != 4:
        return None
    n, c, h, w = shape
    per_image = c * h * w
    if c > NARROW or per_image % NPU_NUM:
        return None
    plane = per_image // NPU_NUM
    widths = [d for d in range(min(w, plane // MIN_ROWS), 0, -1) if plane % d == 0]
    if not widths:
        return None
    return (n, NPU_NUM, plane // widths[0], widths[0])


def spreadable(op: Operation) -> bool:
    """A Lut with one table or a Cast, same shape in and out, narrow."""
    if not isinstance(op, tpu.LutOp | tpu.CastOp) or len(op.results) != 1:
        return False
    if isinstance(op, tpu.LutOp):
        table = shape_of(op.operands[1])
        if table is None or _count(table) != 256:
            return False
    shape = shape_of(op.operands[0])
    return shape == shape_of(op.results[0]) and view_shape(shape) is not None


def _count(shape) -> int:
    total = 1
    for d in shape:
        total *= d
    return total


def chains(ops) -> list[list[Operation]]:
    """Maximal runs of spreadable ops, each reading the one before (its only use)."""
    found = []
    for op in ops:
        if not spreadable(op) or _in_chain(op.operands[0]) or _is_argument(op.operands[0]):
            continue
        chain = [op]
        while True:
            uses = list(chain[-1].results[0].uses)
            if len(uses) != 1:
                break
            user = uses[0].operation
            if not spreadable(user) or user.operands[0] is not chain[-1].results[0]:
                break
            chain.append(user)
        found.append(chain)
    return found


def _in_chain(value: SSAValue) -> bool:
    owner = value.owner
    return isinstance(owner, Operation) and spreadable(owner) and len(list(value.uses)) == 1


def _is_argument(value: SSAValue) -> bool:
    """A model input: its cast joins the first group (quantize.py), kept so."""
    return not isinstance(value.owner, Operation) or isinstance(value.owner, top.InputOp)


def _reshape(value: SSAValue, shape, name: str) -> tpu.ReshapeOp:
    return tpu.ReshapeOp.make(
        [value], name, {"shape": list(shape)}, [TensorType(element_of(value), list(shape))]
    )


def spread(chain: list[Operation]) -> None:
    """The chain on the [n, 64, h', w'] view, between two reshapes."""
    first, last = chain[0], chain[-1]
    shape = tuple(shape_of(first.operands[0]))
    view = view_shape(shape)
    source = first.operands[0]
    into = _reshape(source, view, f"{first.names[0]}_spread_in")
    Rewriter.insert_op(into, InsertPoint.before(first))
    value = into.results[0]
    for op in chain:
        new = type(op).create(
            operands=[value, *op.operands[1:]],
            result_types=[TensorType(element_of(op.results[0]), list(view))],
            attributes=dict(op.attributes),
            properties=dict(op.properties),
        )
        new.attributes["name"] = StringAttr(f"{op.names[0]}_spread")
        Rewriter.insert_op(new, InsertPoint.before(op))
        value = new.results[0]
    back = _reshape(value, shape, last.names[0])
    Rewriter.insert_op(back, InsertPoint.before(last))
    last.results[0].replace_all_uses_with(back.results[0])
    for op in reversed(chain):
        Rewriter.erase_op(op)


def spread_narrow(module: ModuleOp) -> int:
    """Spread every narrow elementwise chain of func @main; how many."""
    found = chains(list(main_function(module).body.block.ops))
    for chain in found:
        spread(chain)
    return len(found)


__all__ = ["spread_narrow", "view_shape"]
