"""Engine rules for forms that used to keep the transitional command:
float CompareConst and INT8 Max/Min (both on TIU_FARITH). Imported at the
end of `engine_rules`, whose helpers they use."""

from __future__ import annotations

import math

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.passes.codegen.commands import tensor_record
from tpuc.passes.codegen.engine_rules import (
    ENGINE_RULES,
    FARITH_KINDS,
    _float_arith,
    _int_only,
    _plain_float,
    _same_quant,
    engine_command,
)
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import TENSOR_QUANTIZED, Command


@ENGINE_RULES.register(tpu.CompareConstOp)
def _float_compare_const(op: Operation, layer_id: int) -> list[Command] | None:
    """Float CompareConst: TIU_FARITH's compare mode in a const form (the
    constant on the left when `inversed`), TOP's ew.compare rounded to the
    result type. The lowering never makes an integer one (no INT8 rule)."""
    if _int_only(op) or len(op.operands) != 1 or op.value("mode") not in isa.FARITH_OPS:
        return None
    operands = [tensor_record(op.operands[0], op)]
    out = tensor_record(op.results[0], op)
    if not _plain_float([*operands, out]) or op.value("do_relu"):
        return None
    form = isa.FARITH_CONST_REVERSED if op.value("inversed") else isa.FARITH_CONST
    code = isa.FARITH_OPS.index(op.value("mode"))
    const_val = float(op.value("const_val"))
    block = isa.FarithBlock(code, 1, 0, form, 0, (), const_val, 0.0)
    return [engine_command(isa.TIU_FARITH, block, operands, [out], layer_id, kind=0)]


STORED_FOLDS = (tpu.MaxOp, tpu.MinOp)
"""Integer ops the interpreter runs as TOP's fold on stored values (one type)."""


@ENGINE_RULES.register(*STORED_FOLDS, priority=1)
def _max_min(op: Operation, layer_id: int) -> list[Command] | None:
    """Max/Min: the stored fold when integer, else the float arithmetic rule."""
    return _stored_fold(op, layer_id) if _int_only(op) else _float_arith(op, layer_id)


def _stored_fold(op: Operation, layer_id: int) -> list[Command] | None:
    """INT8 Max/Min of inputs sharing the result's quantized type: TIU_FARITH
    with `kind` 1, TOP's fold on the stored integers, then the block's ReLU
    clamping at Z_out (the interpreter's `data_ops.moved` record)."""
    operands = [tensor_record(v, op) for v in op.operands]
    out = tensor_record(op.results[0], op)
    if len(op.results) != 1 or not 1 <= len(operands) <= isa.MAX_FARITH_INPUTS:
        return None
    if not all(r.flags & TENSOR_QUANTIZED and _same_quant(r, out) for r in operands):
        return None  # a move needs one quantized type (else the op's own error)
    relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit") if relu else None
    block = isa.FarithBlock(
        isa.FARITH_OPS.index(FARITH_KINDS[type(op)]),
        len(operands),
        0,
        isa.FARITH_TENSORS,
        int(relu),
        (),
        0.0,
        math.nan if limit is None else float(limit),
    )
    return [engine_command(isa.TIU_FARITH, block, operands, [out], layer_id, kind=1)]
