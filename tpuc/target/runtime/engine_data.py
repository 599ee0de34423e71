"""Engine commands of data selection on the kernel library: GDMA_FILL,
GDMA_GATHER and TIU_ARG.

Each builder turns a decoded block into the library record the TPU
interpreter builds for the same op (`data.Stored(Gather)` for an integer
gather, `Gather` and `Arg` rounded to the result type for float ones), so
both run one kernel call. A fill has no library record in the interpreter
(its Pad is one `data.pad` call); `data.Fill` is the border that pad writes,
converted to float32 and, in a float command, rounded to the destination's
type exactly as the float kernel rounds its result. Registered into
`tpuc.target.runtime.engine.BUILDERS` when that module is imported.
"""

from __future__ import annotations

import numpy as np

from tpuc.kernels import data
from tpuc.kernels import reduce as reduce_lib
from tpuc.kernels.requant import NO_RELU
from tpuc.target.isa import engine as isa
from tpuc.target.runtime.engine import BUILDERS, EngineStep, element_of


def _stored_gather(p: data.Stored, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    return data.stored(p, data.gather, x, indices)


def _fill(step: EngineStep, b: isa.FillBlock):
    """No operand; the destination's shape and element set the record."""
    if step.command.operands:
        raise ValueError(f"a fill takes no operand, got {len(step.command.operands)}")
    record = data.Fill(step.command.results[0].shape, b.value)
    kernel = step._rounded(data.fill) if step.is_float else data.fill
    return record, kernel, ()


def _gather(step: EngineStep, b: isa.GatherBlock):
    """Operands: the source and the index tensor (float-valued integers)."""
    if len(step.command.operands) != 2 or any(r.absent for r in step.command.operands):
        raise ValueError("a gather takes a source and an index operand")
    if step.is_float:
        return data.Gather(b.axis), step._rounded(data.gather), (0, 1)
    src, out = step.command.operands[0], step.command.results[0]
    if element_of(src) != element_of(out):
        raise ValueError("an integer gather's source and destination differ in element type")
    record = data.Stored(data.Gather(b.axis), NO_RELU, element_of(out))
    return record, _stored_gather, (0, 1)


def _arg(step: EngineStep, b: isa.ArgBlock):
    """Float only: the interpreter has no integer Arg (the lowering keeps it
    in float)."""
    if not step.is_float:
        raise ValueError("TIU_ARG has no integer form (kind must be 0)")
    record = reduce_lib.Arg(
        isa.ARG_MODES[b.mode], b.axis, bool(b.keepdims), bool(b.select_last_index)
    )
    return record, step._rounded(reduce_lib.arg), (0,)


BUILDERS.update({isa.GDMA_FILL: _fill, isa.GDMA_GATHER: _gather, isa.TIU_ARG: _arg})
