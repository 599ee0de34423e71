"""Engine rules for one-input float functions: the special functions and
activations (TIU_SFU), conversions and rescales (TIU_CVT) and the
normalizations (TIU_NORM). Imported at the end of `engine_rules`, whose
helpers they use."""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.passes.codegen.commands import tensor_record
from tpuc.passes.codegen.engine_rules import (
    _int_only,
    _plain_float,
    engine_command,
    engine_rule,
    requant_block,
)
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import TENSOR_QUANTIZED, Command

# --- float special functions -------------------------------------------------------------


def _param(op: Operation, key: str) -> float:
    """A float attribute as the SFU block holds it (NaN: unset)."""
    value = op.value(key)
    return math.nan if value is None else float(value)


def _no_params(op: Operation) -> tuple[float, float, str]:
    return math.nan, math.nan, ""


SFU_PARAMS: dict[type, tuple[str, Callable[[Operation], tuple[float, float, str]]]] = {
    tpu.ReluOp: ("Relu", lambda op: (_param(op, "relu_limit"), math.nan, "")),
    tpu.LeakyReluOp: ("LeakyRelu", lambda op: (_param(op, "alpha"), math.nan, "")),
    tpu.SigmoidOp: (
        "Sigmoid",
        lambda op: (_param(op, "scale"), _param(op, "bias"), "log" if op.value("log") else ""),
    ),
    tpu.GELUOp: ("GELU", lambda op: (math.nan, math.nan, op.value("approx_mode") or "")),
    tpu.HardSigmoidOp: ("HardSigmoid", lambda op: (_param(op, "alpha"), _param(op, "beta"), "")),
    tpu.EluOp: ("Elu", lambda op: (_param(op, "alpha"), math.nan, "")),
    tpu.ReciprocalOp: ("Reciprocal", lambda op: (_param(op, "const_val"), math.nan, "")),
    tpu.PowOp: ("Pow", lambda op: (_param(op, "exponent"), math.nan, "")),
    tpu.ClipOp: ("Clip", lambda op: (_param(op, "min"), _param(op, "max"), "")),
    tpu.NotOp: ("Not", _no_params),
}
"""Float TPU op -> (its `Unary` kind, its (alpha, beta, option)), read as the
TOP kernel's record builder (`tpuc.interp.top_ops.activation`) reads them."""


@engine_rule(tpu.ActiveOp, *SFU_PARAMS)
def _sfu(op: Operation, layer_id: int) -> list[Command] | None:
    """A float activation: one TIU_SFU (the function, then rounding to the
    result's float type)."""
    if _int_only(op) or len(op.operands) != 1 or len(op.results) != 1:
        return None
    if isinstance(op, tpu.ActiveOp):
        source = tpu.ACTIVE_MODES.get(op.value("mode"))
        if source is None:
            return None  # the op's own error stays on the transitional path
        kind, (alpha, beta, option) = source.name.split(".", 1)[1], _no_params(op)
    else:
        kind, params = SFU_PARAMS[type(op)]
        alpha, beta, option = params(op)
    if kind not in isa.SFU_FUNCTIONS or option not in isa.SFU_OPTIONS:
        return None
    inp, out = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    if inp.flags & TENSOR_QUANTIZED or out.flags & TENSOR_QUANTIZED:
        return None
    block = isa.SfuBlock(isa.SFU_FUNCTIONS.index(kind), alpha, beta, isa.SFU_OPTIONS.index(option))
    return [engine_command(isa.TIU_SFU, block, [inp], [out], layer_id, kind=0)]


# --- conversion ------------------------------------------------------------------------------


@engine_rule(tpu.CastOp)
def _cast(op: Operation, layer_id: int) -> list[Command] | None:
    """tpu.Cast (either kind): one TIU_CVT in cast mode."""
    to = op.value("to") or ""
    mode = op.value("round_mode") or isa.ROUND_MODES[0]
    if to not in isa.CAST_TO or mode not in isa.ROUND_MODES or len(op.operands) != 1:
        return None
    inp, out = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    requant = isa.RequantBlock(round_mode=isa.ROUND_MODES.index(mode))
    block = isa.CvtBlock(requant, isa.CVT_CAST, isa.CAST_TO.index(to))
    kind = int(_int_only(op))
    return [engine_command(isa.TIU_CVT, block, [inp], [out], layer_id, kind=kind)]


@engine_rule(tpu.RequantIntOp, tpu.RequantIntAxisOp, tpu.DequantIntOp)
def _rescale(op: Operation, layer_id: int) -> list[Command] | None:
    """RequantInt / RequantIntAxis / DequantInt with one multiplier and
    rshift: one TIU_CVT in rescale mode (lists per channel decline)."""
    if len(op.operands) != 1 or (op.value("quant_mode") or "MultiplierShift") != "MultiplierShift":
        return None
    requant = requant_block(op, 1)
    if requant is None:
        return None
    inp, out = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    if not inp.flags & TENSOR_QUANTIZED:
        return None
    per_op = int(not isinstance(op, tpu.RequantIntOp))
    block = isa.CvtBlock(requant, isa.CVT_RESCALE, per_op)
    return [engine_command(isa.TIU_CVT, block, [inp], [out], layer_id, kind=int(_int_only(op)))]


# --- normalizations -----------------------------------------------------------------------------


def _norm_block(op: Operation) -> isa.NormBlock | None:
    nan = math.nan
    if isinstance(op, tpu.SoftmaxOp):
        return isa.NormBlock(
            0, int(bool(op.value("log"))), int(op.value("axis")), 0, 0.0, 0.0, 0.0, nan
        )
    if isinstance(op, tpu.LayerNormOp):
        return isa.NormBlock(1, 0, int(op.value("axis")), 0, float(op.value("eps")), 0.0, 0.0, nan)
    if isinstance(op, tpu.InstanceNormOp):
        return isa.NormBlock(2, 0, 0, 0, float(op.value("eps")), 0.0, 0.0, nan)
    if isinstance(op, tpu.GroupNormOp):
        groups = int(op.value("num_groups"))
        return isa.NormBlock(3, 0, 0, groups, float(op.value("eps")), 0.0, 0.0, nan)
    if isinstance(op, tpu.BatchNormOp):
        relu = bool(op.value("do_relu"))
        limit = op.value("relu_limit") if relu else None
        limit = nan if limit is None else float(limit)
        return isa.NormBlock(4, int(relu), 0, 0, float(op.value("epsilon")), 0.0, 0.0, limit)
    if isinstance(op, tpu.LRNOp):
        size, alpha = int(op.value("size")), float(op.value("alpha"))
        beta, bias = float(op.value("beta")), float(op.value("bias"))
        return isa.NormBlock(5, 0, 0, size, alpha, beta, bias, nan)
    return None


@engine_rule(
    tpu.SoftmaxOp, tpu.LayerNormOp, tpu.InstanceNormOp, tpu.GroupNormOp, tpu.BatchNormOp, tpu.LRNOp
)
def _norm(op: Operation, layer_id: int) -> list[Command] | None:
    """A float normalization: one TIU_NORM (`kind` 0)."""
    if _int_only(op) or len(op.results) != 1:
        return None
    operands = [tensor_record(v, op) for v in op.operands]
    out = tensor_record(op.results[0], op)
    block = _norm_block(op)
    if block is None or not _plain_float([*operands, out]):
        return None
    return [engine_command(isa.TIU_NORM, block, operands, [out], layer_id, kind=0)]
