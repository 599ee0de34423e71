"""TPU op -> engine-level commands for resizes and recurrences
(docs/isa.md "TIU_RESIZE block", "TIU_RNN block"), registered into
`engine_rules.ENGINE_RULES` like the other rules. Each block holds what the
TPU interpreter's record builders read from the op (`Interp` of
tpuc.interp.top_ops.resize, `Recurrent` of tpuc.interp.top_ops.rnn).
"""

from __future__ import annotations

import math

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.ir.core import element_of, kind_of
from tpuc.passes.codegen.commands import tensor_record
from tpuc.passes.codegen.engine_rules import _ints, _plain_float, engine_command, engine_rule
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import TENSOR_QUANTIZED, Command


def _code(table: tuple[str, ...], value: str | None, default: str) -> int | None:
    """A string attribute's code in its table (None: the table has none)."""
    value = value or default
    return table.index(value) if value in table else None


def resize_block(op: Operation) -> isa.ResizeBlock | None:
    """The block of a tpu.Interp (None: a mode without a code, too many dims)."""
    codes = (
        _code(isa.RESIZE_MODES, op.value("mode"), "nearest"),
        _code(isa.RESIZE_COORD_MODES, op.value("coord_mode"), "half_pixel"),
        _code(isa.RESIZE_NEAREST_MODES, op.value("nearest_mode"), "round_prefer_floor"),
    )
    target = _ints(op, "target_shape")
    scales = tuple(float(s) for s in op.value("scales") or ())
    if None in codes or max(len(target), len(scales)) > isa.MAX_RESIZE_AXES:
        return None
    a = op.value("cubic_coeff_a")
    return isa.ResizeBlock(
        *codes,
        int(bool(op.value("exclude_outside"))),
        len(target),
        len(scales),
        math.nan if a is None else float(a),
        tuple(target),
        scales,
    )


@engine_rule(tpu.InterpOp)
def _resize(op: Operation, layer_id: int) -> list[Command] | None:
    """One TIU_RESIZE: float (`kind` 0), or nearest on stored integers of
    one quantized type (`kind` 1, as the interpreter's moved kernel)."""
    if len(op.operands) != 1 or len(op.results) != 1:
        return None
    block = resize_block(op)
    inp, out = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    if block is None:
        return None
    is_int = kind_of(op) == "int"
    if is_int:
        nearest = isa.RESIZE_MODES[block.mode] == "nearest"
        same = element_of(op.operands[0]) == element_of(op.results[0])
        if not (nearest and same and inp.flags & TENSOR_QUANTIZED):
            return None  # the op's own error stays on the transitional path
    elif not _plain_float([inp, out]):
        return None
    return [engine_command(isa.TIU_RESIZE, block, [inp], [out], layer_id, kind=int(is_int))]


RNN_CELLS = {tpu.LSTMOp: isa.RNN_LSTM, tpu.GRUOp: isa.RNN_GRU}
OPTIONAL_BITS = (isa.RNN_BIAS, isa.RNN_INITIAL_H, isa.RNN_INITIAL_C)


@engine_rule(*RNN_CELLS)
def _rnn(op: Operation, layer_id: int) -> list[Command] | None:
    """A float LSTM / GRU: one TIU_RNN over the whole sequence (`kind` 0),
    so that its float summation order is the interpreter's."""
    if kind_of(op) == "int":
        return None
    operands = [tensor_record(v, op) for v in op.operands]
    results = [tensor_record(v, op) for v in op.results]
    if len(operands) < 3 or not _plain_float([*operands, *results]):
        return None
    present = sum(bit for bit, r in zip(OPTIONAL_BITS, operands[3:], strict=False) if not r.absent)
    directions = operands[1].shape[0] if operands[1].shape else 0
    if directions not in (1, 2):
        return None
    cell = RNN_CELLS[type(op)]
    block = isa.RnnBlock(
        cell,
        directions,
        int(bool(op.value("batch_first"))),
        int(cell == isa.RNN_GRU and bool(op.value("linear_before_reset"))),
        present,
        int(op.value("hidden_size") or 0),
    )
    return [engine_command(isa.TIU_RNN, block, operands, results, layer_id, kind=0)]
