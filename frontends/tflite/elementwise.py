"""Elementwise arithmetic, activations, softmax and the float side of
QUANTIZE/DEQUANTIZE/CAST.

Binary ops broadcast as numpy does in TFLite's NHWC layout; an operand of
lower rank than a 4-D result is first given the full NHWC rank and then
transposed to NCHW, so it broadcasts along the same data.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from tpuc.dialects import top
from tpuc.frontends.tflite.converter import TO_NCHW, TfliteConverter
from tpuc.frontends.tflite.model import TOperator
from tpuc.frontends.tflite.registry import converter


def operand_for(cv: TfliteConverter, index: int, out_rank: int) -> SSAValue:
    """Input `index` as an operand broadcasting against a result of
    `out_rank` (4: NCHW)."""
    const = cv.const(index)
    name = cv.tensor(index).name
    if const is not None:
        data = np.asarray(const, np.float32)
        if out_rank == 4:
            data = data.reshape((1,) * (4 - data.ndim) + data.shape).transpose(TO_NCHW)
        return cv.weight(name, data)
    rank = cv.rank(index)
    if out_rank != 4 or rank == 4:
        return cv.value(index)
    shape = (1,) * (4 - rank) + cv.shape(index)
    full = cv.emit_temp(
        top.ReshapeOp, [cv.value(index)], f"{name}_4d", {"shape": list(shape)}, list(shape)
    )
    nchw = [shape[a] for a in TO_NCHW]
    return cv.emit_temp(top.PermuteOp, [full], f"{name}_nchw", {"order": TO_NCHW}, nchw)


def _binary(cv: TfliteConverter, op: TOperator, cls, act: int | None = None) -> None:
    rank = cv.rank(op.outputs[0])
    operands = [operand_for(cv, i, rank) for i in op.inputs[:2]]
    act = cv.fused_act(op) if act is None else act
    cv.emit(cls, operands, op.outputs[0], {}, act, op)


@converter("ADD")
def convert_add(cv: TfliteConverter, op: TOperator) -> None:
    _binary(cv, op, top.AddOp)


@converter("SUB")
def convert_sub(cv: TfliteConverter, op: TOperator) -> None:
    _binary(cv, op, top.SubOp)


@converter("MUL")
def convert_mul(cv: TfliteConverter, op: TOperator) -> None:
    _binary(cv, op, top.MulOp)


@converter("DIV")
def convert_div(cv: TfliteConverter, op: TOperator) -> None:
    _binary(cv, op, top.DivOp)


@converter("MAXIMUM")
def convert_maximum(cv: TfliteConverter, op: TOperator) -> None:
    _binary(cv, op, top.MaxOp, act=0)


@converter("MINIMUM")
def convert_minimum(cv: TfliteConverter, op: TOperator) -> None:
    _binary(cv, op, top.MinOp, act=0)


UNARY = {
    "LOGISTIC": (top.SigmoidOp, {}),
    "TANH": (top.TanhOp, {}),
    "RELU": (top.ReluOp, {}),
    "RELU6": (top.ReluOp, {"relu_limit": 6.0}),
    "RELU_N1_TO_1": (top.ClipOp, {"min": -1.0, "max": 1.0}),
    "RELU_0_TO_1": (top.ClipOp, {"min": 0.0, "max": 1.0}),
    "HARD_SWISH": (top.HardSwishOp, {}),
    "EXP": (top.ExpOp, {}),
    "LOG": (top.LogOp, {}),
    "SQRT": (top.SqrtOp, {}),
    "RSQRT": (top.RsqrtOp, {}),
    "ABS": (top.AbsOp, {}),
    "FLOOR": (top.FloorOp, {}),
    "SIN": (top.SinOp, {}),
    "COS": (top.CosOp, {}),
}


def _unary(cv: TfliteConverter, op: TOperator) -> None:
    cls, attrs = UNARY[op.op]
    cv.emit(cls, [cv.value(op.inputs[0])], op.outputs[0], attrs, 0, op)


for _name in UNARY:
    converter(_name)(_unary)


@converter("NEG")
def convert_neg(cv: TfliteConverter, op: TOperator) -> None:
    cv.emit(top.MulConstOp, [cv.value(op.inputs[0])], op.outputs[0], {"const_val": -1.0}, 0, op)


@converter("GELU")
def convert_gelu(cv: TfliteConverter, op: TOperator) -> None:
    approx = bool(op.options.Approximate()) if op.options is not None else False
    mode = "tanh" if approx else "normal"
    cv.emit(top.GELUOp, [cv.value(op.inputs[0])], op.outputs[0], {"approx_mode": mode}, 0, op)


@converter("LEAKY_RELU")
def convert_leaky_relu(cv: TfliteConverter, op: TOperator) -> None:
    alpha = float(op.options.Alpha()) if op.options is not None else 0.2
    cv.emit(top.LeakyReluOp, [cv.value(op.inputs[0])], op.outputs[0], {"alpha": alpha}, 0, op)


@converter("PRELU")
def convert_prelu(cv: TfliteConverter, op: TOperator) -> None:
    """alpha broadcasts against the NHWC input (usually [1, 1, C] or [C])."""
    rank = cv.rank(op.outputs[0])
    slope = operand_for(cv, op.inputs[1], rank)
    cv.emit(top.PReluOp, [cv.value(op.inputs[0]), slope], op.outputs[0], {}, 0, op)


@converter("SOFTMAX")
def convert_softmax(cv: TfliteConverter, op: TOperator) -> None:
    """Softmax over the last TFLite axis (channels: NCHW axis 1) of beta*x."""
    beta = float(op.options.Beta()) if op.options is not None else 1.0
    value = cv.value(op.inputs[0])
    name = cv.tensor(op.outputs[0]).name
    if beta != 1.0:
        value = cv.emit_temp(top.MulConstOp, [value], f"{name}_beta", {"const_val": beta})
    axis = 1 if cv.rank(op.inputs[0]) == 4 else -1
    cv.emit(top.SoftmaxOp, [value], op.outputs[0], {"axis": axis}, 0, op)


QUANT_TYPES = ("FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16")


@converter("DEQUANTIZE", "QUANTIZE", "CAST")
def convert_real_identity(cv: TfliteConverter, op: TOperator) -> None:
    """TOP holds real values in float32: float16 <-> float32, QUANTIZE and
    DEQUANTIZE (and a requantizing QUANTIZE) keep the value; the quantized
    tensors' scales become the model's calibration table (quant.py)."""
    src, dst = cv.tensor(op.inputs[0]), cv.tensor(op.outputs[0])
    real = all(
        t.type_name in ("FLOAT32", "FLOAT16") or (t.type_name in QUANT_TYPES and t.quantized)
        for t in (src, dst)
    )
    if not real:
        raise cv.error(op, f"{src.type_name} -> {dst.type_name} is not supported")
    if _requantizes(src, dst):
        # a requantization point of the model: AddConst 0 (real identity),
        # which canonicalize keeps in a pre-quantized module
        cv.emit(top.AddConstOp, [cv.value(op.inputs[0])], op.outputs[0], {"const_val": 0.0})
        return
    cv.bind(op.outputs[0], cv.value(op.inputs[0]))


def _requantizes(src, dst) -> bool:
    """QUANTIZE from a per-tensor quantized tensor to other parameters."""
    quantized = all(t.quantized and t.scales.size == 1 for t in (src, dst))
    if not quantized or src.data is not None:
        return False
    return (float(src.scales[0]), int(src.zero_points[0])) != (
        float(dst.scales[0]),
        int(dst.zero_points[0]),
    ) or src.type_name != dst.type_name
