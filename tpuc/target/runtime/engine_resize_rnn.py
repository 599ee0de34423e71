"""TIU_RESIZE and TIU_RNN in the simulator: their blocks become the kernel
library's `Interp` and `Recurrent` records (the records the TPU
interpreter builds from tpu.Interp, tpu.LSTM and tpu.GRU), registered into
`tpuc.target.runtime.engine.BUILDERS`. No IR, as the rest of the engine path.
"""

from __future__ import annotations

import math

from tpuc.kernels import data, rnn, rounding
from tpuc.kernels.requant import NO_RELU
from tpuc.kernels.resize import Interp, interp
from tpuc.target.isa import engine as isa
from tpuc.target.runtime.engine import BUILDERS, EngineStep, Kernel, element_of


def _stored_interp(p: data.Stored, x):
    return data.stored(p, interp, x)


def _rounded_results(step: EngineStep, kernel: Kernel) -> Kernel:
    """The float TPU kernel of a multi-result op: each result rounded to
    its own record's type (`rounding.round_results`, as the interpreter)."""
    elements = tuple(element_of(r) for r in step.command.results)

    def run(p, *args):
        return rounding.round_results(elements, kernel(p, *args))

    return run


def resize(step: EngineStep, b: isa.ResizeBlock):
    """Float: `interp` rounded to the result type. Integer (nearest only):
    the same record on stored values, input and result of one type."""
    record = Interp(
        b.target_shape,
        b.scales,
        isa.RESIZE_MODES[b.mode],
        isa.RESIZE_COORD_MODES[b.coord_mode],
        isa.RESIZE_NEAREST_MODES[b.nearest_mode],
        None if math.isnan(b.cubic_coeff_a) else b.cubic_coeff_a,
        bool(b.exclude_outside),
    )
    if step.is_float:
        return record, step._rounded(interp), (0,)
    if record.mode != "nearest":
        raise ValueError(f"an integer {record.mode} resize (only nearest moves stored values)")
    inp, out = element_of(step.command.operands[0]), element_of(step.command.results[0])
    if inp != out:
        raise ValueError("an integer resize whose input and result types differ")
    return data.Stored(record, NO_RELU, out), _stored_interp, (0,)


RNN_SHAPES = {isa.RNN_LSTM: (6, 3, rnn.lstm), isa.RNN_GRU: (5, 2, rnn.gru)}
"""cell -> (operands, results, kernel)."""
OPTIONAL = (isa.RNN_BIAS, isa.RNN_INITIAL_H, isa.RNN_INITIAL_C)
"""The `present` bit of operands 3, 4, 5."""


def recurrent(step: EngineStep, b: isa.RnnBlock):
    """One float LSTM / GRU over the whole sequence (`kind` 0): the
    library kernel, each result rounded to its type."""
    if not step.is_float:
        raise ValueError("an integer RNN (only float recurrences exist)")
    operands, results, kernel = RNN_SHAPES[b.cell]
    ops = step.command.operands
    if len(ops) != operands or len(step.command.results) != results:
        raise ValueError(f"{len(ops)} operands and {len(step.command.results)} results")
    present = sum(bit for bit, r in zip(OPTIONAL, ops[3:], strict=False) if not r.absent)
    if present != b.present:
        raise ValueError(f"optional operands {present:#x}, the block says {b.present:#x}")
    if ops[1].shape[:1] != (b.directions,):
        raise ValueError(f"a filter of shape {list(ops[1].shape)} for {b.directions} directions")
    record = rnn.Recurrent(b.hidden, bool(b.batch_first), bool(b.linear_before_reset))
    return record, _rounded_results(step, kernel), tuple(range(operands))


BUILDERS[isa.TIU_RESIZE] = resize
BUILDERS[isa.TIU_RNN] = recurrent
