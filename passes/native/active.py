"""Activations, after TPU-MLIR's `Interfaces/BM1684X/{Active,Relu,LeakyRelu,
PRelu,Clip}.cpp`: float activations through `backend_api_active_global`
(`active_global_spec_t`: active_type = TPU-MLIR's ActiveMode, coeffs[8]),
Relu / LeakyRelu / a one-value PRelu through `backend_api_prelu_global`
(`prelu_spec_t`), Clip through `backend_api_clip_global` (`clip_spec_t`).
INT8 forms of these are tpu.Lut (lut.py), except Relu, which keeps its
input's type and only clamps stored values.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.weights import read_weight
from tpuc.passes.native.context import (
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_name,
    is_float,
    quant_of,
)
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import ActiveGlobal, declare

PReluSpec = declare(
    "prelu_spec_t",
    "f32 upper_limit; f32 slope_val; i32 is_channel_shared; i32 rshift_bit; i32 round_mode",
)
ClipSpec = declare("clip_spec_t", "f32 min; f32 max; i32 if_relu")

ACTIVE_TYPES = {
    "TANH": 0, "SIGMOID": 1, "RELU": 2, "EXP": 3, "ELU": 4, "SQRT": 5, "SQUARE": 6,
    "RSQRT": 7, "ABSVAL": 8, "LN": 9, "ROUND": 10, "CEIL": 11, "FLOOR": 12, "SIN": 13,
    "COS": 14, "IS_FINITE": 15, "MISH": 16, "SWISH": 17, "HSWISH": 18, "SILU": 19,
    "ARCSIN": 20, "ARCCOS": 21, "ARCSINH": 22, "ARCCOSH": 23, "ARCTANH": 24, "SINH": 25,
    "COSH": 26, "TAN": 27, "SIGN": 28, "GELU": 29, "ERF": 30, "HSIGMOID": 31,
    "LOG_SIGMOID": 32, "SOFT_PLUS": 33, "SOFT_SIGN": 34, "LOG2": 35, "TGELU": 36, "QGELU": 37,
}  # fmt: skip
"""Param.h active_type_t (= TPU-MLIR's tpu::ActiveMode)."""
GELU_TYPES = {"normal": "GELU", "tanh": "TGELU", "sigmoid": "QGELU"}
ROUND_UP = 1  # ROUND_MODE_T ROUND_UP: half up, what Relu.cpp / LeakyRelu.cpp pass


def float_only(op: Operation) -> None:
    if not all(is_float(v) for v in (*op.operands, *op.results)):
        raise NotExpressible("an integer form (INT8 lowers it to tpu.Lut)")


def active(op: Operation, ctx: NativeContext, mode: str, coeffs=()) -> list[NativeCall]:
    """active_global_spec_t; an f16/bf16 one in f32 between casts (the chip's
    half-float activations assert for most functions: tanh, sqrt, erf, elu,
    mish, gelu, sin, cos …; tpuc computes them in f32 and rounds once)."""
    from tpuc.passes.native.f32 import in_f32

    float_only(op)
    param = ActiveGlobal()
    param.common.active_type = ACTIVE_TYPES[mode]
    for i, c in enumerate(coeffs):
        param.common.coeffs[i] = float(c)
    return in_f32(op, ctx, lambda ins, out: [
        ctx.call("backend_api_active_global", param, op, inputs=ins[:1], outputs=[out])
    ])  # fmt: skip


@native_rule(tpu.ActiveOp)
def active_op(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    mode = op.value("mode")
    if mode not in ACTIVE_TYPES:
        raise NotExpressible(f"active mode {mode!r}")
    return active(op, ctx, mode)


@native_rule(tpu.SigmoidOp)
def sigmoid(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """SIGMOID (LOG_SIGMOID with `log`); scale/bias other than 1/0 have no field."""
    if float(op.value("scale")) != 1.0 or float(op.value("bias")) != 0.0:
        raise NotExpressible("a scaled sigmoid (scale/bias)")
    if dtype_name(op.results[0]) != "f32":  # bm168x lowers F16/BF16 Sigmoid in F32 (float_rules)
        raise NotExpressible("an f16/bf16 sigmoid (the backend crashes; lower it in f32)")
    return active(op, ctx, "LOG_SIGMOID" if op.value("log") else "SIGMOID")


@native_rule(tpu.HardSigmoidOp)
def hard_sigmoid(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """HSIGMOID with coeffs {beta, alpha} (HardSigmoid.cpp's order):
    min(max(alpha·x + beta, 0), 1)."""
    return active(op, ctx, "HSIGMOID", (op.value("beta"), op.value("alpha")))


@native_rule(tpu.GELUOp)
def gelu(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    approx = op.value("approx_mode") or "normal"
    if approx not in GELU_TYPES:
        raise NotExpressible(f"GELU approx_mode {approx!r}")
    return active(op, ctx, GELU_TYPES[approx])


@native_rule(tpu.EluOp)
def elu(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    return active(op, ctx, "ELU", (op.value("alpha"),))


def prelu_call(op: Operation, ctx: NativeContext, slope: float, limit: float) -> list[NativeCall]:
    spec = PReluSpec()
    spec.upper_limit = limit
    spec.slope_val = slope
    spec.is_channel_shared = 1
    spec.round_mode = ROUND_UP
    return [ctx.call("backend_api_prelu_global", spec, op, inputs=[ctx.spec(op.operands[0])])]


@native_rule(tpu.ReluOp)
def relu(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """prelu with slope 0, upper_limit = relu_limit (every dtype: an INT8
    Relu shares its input's type)."""
    limit = op.value("relu_limit")
    limit = -1.0 if limit is None else float(limit)
    quant = quant_of(op.results[0])
    if quant is not None:
        if op.operands[0].type.element_type != op.results[0].type.element_type:
            raise NotExpressible("an INT8 Relu that changes the type")
        if quant.zero_point:
            raise NotExpressible("an asymmetric INT8 Relu")
        if limit >= 0:  # the clamp is on stored values: relu_limit in stored units
            limit = float(np.round(limit / quant.scale))
    return prelu_call(op, ctx, 0.0, limit)


@native_rule(tpu.LeakyReluOp)
def leaky_relu(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    float_only(op)
    return prelu_call(op, ctx, float(op.value("alpha")), -1.0)


@native_rule(tpu.PReluOp)
def prelu(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """A one-value slope: is_channel_shared = 1 with slope_val; one per
    channel: is_channel_shared = 0 and the slope weight as a second input
    viewed [1, C, 1, 1] (PRelu.cpp)."""
    float_only(op)
    slope = op.operands[1]
    if not isinstance(slope.owner, top.WeightOp):
        raise NotExpressible("a slope that is not a weight")
    values = np.asarray(read_weight(slope.owner), np.float32).reshape(-1)
    if values.size == 1:
        return prelu_call(op, ctx, float(values[0]), -1.0)
    shape = shape_of(op.operands[0])
    if len(shape) < 2 or values.size != shape[1]:
        raise NotExpressible(f"a slope of {values.size} values for shape {list(shape)}")
    spec = PReluSpec()
    spec.upper_limit = -1.0
    spec.round_mode = ROUND_UP
    view = (1, shape[1]) + (1,) * (len(shape) - 2)
    inputs = [ctx.spec(op.operands[0]), ctx.spec(slope, view)]
    return [ctx.call("backend_api_prelu_global", spec, op, inputs=inputs)]


@native_rule(tpu.ClipOp)
def clip(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    float_only(op)
    spec = ClipSpec()
    spec.min, spec.max = float(op.value("min")), float(op.value("max"))
    return [ctx.call("backend_api_clip_global", spec, op, inputs=[ctx.spec(op.operands[0])])]
