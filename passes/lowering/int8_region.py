"""INT8 elementwise regions: one lookup table for a whole elementwise chain.

An op whose output is an elementwise function of ONE 8-bit tensor — through
unary ops and through Add/Sub/Mul/Max/Min/Div whose operands all derive from
that tensor (x·clip(x+3, 0, 6)/6, x·sigmoid(x), affine scalars …) — takes
only 256 distinct inputs. Its table is built by running the float kernels
of the whole chain on those 256 values, so the chain is quantized once
instead of after every op (decomposed HardSwish and learnable affine blocks
lose most of their INT8 accuracy to those intermediate roundings).
Intermediate ops used only inside a region end up unused and are removed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpuc.dialects import top, tpu
from tpuc.ir.core import element_of
from tpuc.ir.qparams import QuantParams
from tpuc.ir.weights import read_weight
from tpuc.passes.lowering.context import Lowering
from tpuc.passes.lowering.int8_eltwise import (
    arith_inputs,
    lower_add_sub,
    lower_mul,
    two_inputs,
)
from tpuc.passes.lowering.int8_lut import (
    LUT_OPS,
    float_kernel,
    input_values,
    lower_lut,
    quantize_table,
)
from tpuc.passes.lowering.registry import lowering, preparer

BINARY_OPS = (top.AddOp, top.SubOp, top.MulOp, top.MaxOp, top.MinOp, top.DivOp)
REGION_OPS = (*LUT_OPS, *BINARY_OPS)

ROOT = "root"


@dataclass
class Region:
    """`root` (a TOP value, later its lowered replacement) and the member
    ops in graph order, each with its operand sources: ROOT, the index of an
    earlier member, or a scalar constant."""

    root: SSAValue
    steps: list[tuple[Operation, list]]


def _scalar(value: SSAValue) -> np.ndarray | None:
    owner = value.owner
    if not isinstance(owner, top.WeightOp):
        return None
    data = np.asarray(read_weight(owner), np.float32)
    return data.reshape(()) if data.size == 1 else None


def find_region(op: Operation, modes: dict) -> Region | None:
    """The region ending at `op`, if its members all run in INT8, it has a
    single root, and it holds more than `op` itself."""
    members: list[Operation] = []
    roots: set[SSAValue] = set()

    def visit(value: SSAValue) -> bool:
        owner = value.owner
        if _scalar(value) is not None:
            return True
        if isinstance(owner, REGION_OPS) and modes.get(owner) == "INT8":
            if owner in members:
                return True
            if not all(visit(v) for v in owner.operands):
                return False
            members.append(owner)
            return True
        roots.add(value)
        return len(roots) == 1

    if not visit(op.results[0]) or len(roots) != 1 or len(members) < 2:
        return None
    index = {m: i for i, m in enumerate(members)}
    steps = []
    for member in members:
        sources = []
        for v in member.operands:
            if v.owner in index:
                sources.append(index[v.owner])
            elif v in roots:
                sources.append(ROOT)
            else:
                sources.append(_scalar(v))
        steps.append((member, sources))
    return Region(next(iter(roots)), steps)


@preparer
def find_regions(state, ops: list[Operation], modes: dict) -> None:
    """Record the region of every op that has one (before any lowering:
    members are read from the TOP graph)."""
    state.regions = {}
    for op in ops:
        if isinstance(op, REGION_OPS) and modes.get(op) == "INT8" and len(op.results) == 1:
            region = find_region(op, modes)
            if region is not None:
                state.regions[op] = region


def evaluate(region: Region, x: np.ndarray) -> np.ndarray:
    """The region's float output for root values `x`."""
    values: list[np.ndarray] = []
    for member, sources in region.steps:
        args = [x if s == ROOT else values[s] if isinstance(s, int) else s for s in sources]
        values.append(float_kernel(member, args))
    return values[-1].reshape(-1)


def lower_region(lw: Lowering) -> Operation | None:
    region = getattr(lw.state, "regions", {}).get(lw.op)
    if region is None:
        return None
    root = lw.state.replaced.get(region.root, region.root)
    value = lw.cast(root, lw.wanted_type(root))
    quant = QuantParams.of(element_of(value))
    y = evaluate(region, input_values(quant))
    out = lw.out_quant()
    table = lw.add_weight("table", quantize_table(y, out), out.element_type())
    return lw.build(tpu.LutOp, [value, table], copy_attributes=False)


# The INT8 rules of these ops: a region's table when there is one, else the
# op's own form (int8_lut / int8_eltwise).


@lowering(*LUT_OPS, modes=("INT8",))
def lower_unary(lw: Lowering):
    return lower_region(lw) or lower_lut(lw)


@lowering(top.AddOp, top.SubOp, modes=("INT8",), when=arith_inputs)
def lower_add_sub_region(lw: Lowering):
    return lower_region(lw) or lower_add_sub(lw)


@lowering(top.MulOp, modes=("INT8",), when=two_inputs)
def lower_mul_region(lw: Lowering):
    return lower_region(lw) or lower_mul(lw)
