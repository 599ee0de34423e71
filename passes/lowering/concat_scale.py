"""INT8 Concat inputs quantized at the Concat's own scale.

A Concat whose inputs arrive at other scales requantizes each of them (one
more pass over the data per input, and a second rounding). TPU-MLIR avoids
that at lowering: an input that only the Concat reads takes the Concat's
calibrated range, so its producer requantizes straight to the Concat's scale
and the Concat is a plain copy (on the native target, nothing: the inputs
are written in place). This preparer does the same per input, before any op
is lowered: the producer's range in `LoweringState.calibrated` becomes the
Concat's. Values are those the Concat's requant would have given (clamped to
the same range), with one rounding instead of two.

Producers are the ops whose INT8 rule requantizes to their own output range
(a MaxPool or a reshape keeps its input's type, so it would gain nothing;
passed through such an op to the Add before it, PP-OCRv4 det's range made
its Add round both terms on the Concat's coarser grid: pooled cosine on the
anchor's 21 inputs 0.975705 -> 0.975661, so that is not done),
and float layers of a mixed module: their Cast to int8 then rounds straight
to the Concat's grid, instead of to their own and again in the Concat;
a pre-quantized (TFLite) model keeps its own scales;
Concats are visited from the last, so a Concat feeding a Concat passes the
outer range on to its own inputs.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from tpuc.dialects import top
from tpuc.passes.canonicalize.common import is_pre_quantized
from tpuc.passes.lowering.registry import preparer

REQUANTIZING = (
    top.ConvOp,
    top.DeconvOp,
    top.MatMulOp,
    top.AddOp,
    top.SubOp,
    top.ScaleOp,
    top.AvgPoolOp,
    top.ConcatOp,
    top.MulOp,
    top.PReluOp,
    *top.ELEMENTWISE_UNARY,
)
"""TOP ops whose INT8 result is requantized to the range calibrated for it
(the elementwise ones by their lookup table: int8_lut, int8_region, whose
table then maps straight onto the Concat's grid, one rounding instead of
two: PP-OCRv4 rec's swish into its neck's Concat)."""


def own_input(value: SSAValue, concat: Operation, modes: dict) -> str | None:
    """The tensor name of `value` if an INT8 requantizing op, or an op in a
    float mode (its Cast to int8 is the requantization), makes it for
    `concat` alone (one result, no other reader, not a function output)."""
    producer = value.owner
    mode = modes.get(producer)
    if mode is None or (mode == "INT8" and not isinstance(producer, REQUANTIZING)):
        return None
    if len(producer.results) != 1 or any(use.operation is not concat for use in value.uses):
        return None
    return producer.names[0]


@preparer
def share_concat_scale(state, ops: list[Operation], modes: dict) -> None:
    """Give each INT8 Concat's own inputs the Concat's calibrated range (not
    in a pre-quantized model: its ranges are the model's)."""
    if ops and is_pre_quantized(ops[0]):
        return
    for op in reversed(ops):
        if not isinstance(op, top.ConcatOp) or modes.get(op) != "INT8":
            continue
        out = state.calibrated.get(op.names[0])
        if out is None:
            continue
        for value in op.operands:
            name = own_input(value, op, modes)
            if name is not None and name in state.calibrated:
                state.calibrated[name] = out
