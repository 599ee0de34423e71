"""Precision changes: tpu.Cast, the Requant/Dequant family and tpu.Lut.

Values follow the TPU interpreter's convention (float32 arrays holding
f16/bf16 values or stored integers). Every rounding here goes through
`tpuc.numerics` or an explicit rounding mode, never Python's round-half-even
unless the op asks for HalfToEven.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.ir import Attribute

from tpuc.dialects import top, tpu
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.errors import TpucError
from tpuc.interp.kernels import KERNELS
from tpuc.interp.kernels.registry import Array
from tpuc.interp.tpu_kernels.float_ops import round_float
from tpuc.interp.tpu_kernels.registry import (
    centered,
    element_of,
    in_quant,
    out_quant,
    requant_output,
    tpu_kernel,
)
from tpuc.numerics import FLOAT_ROUNDING, dequantize, quantize, round_half_away, saturate
from tpuc.qparams import QuantParams


def float_rounding(op) -> Callable[[Array], Array]:
    mode = op.value("round_mode") or "HalfAwayFromZero"
    fn = FLOAT_ROUNDING.get(mode)
    if fn is None:
        raise TpucError(
            f"{op.name} '{op.names[0]}': unknown round_mode {mode!r} "
            f"(known: {', '.join(FLOAT_ROUNDING)})"
        )
    return fn


def from_real(x: Array, element: Attribute, rounding=round_half_away) -> Array:
    """Real values as stored in `element`: clamp(round(x / S) + Z) for a
    quantized type (numerics.quantize's formula), rounded floats otherwise."""
    x = np.asarray(x, np.float32)
    if not isinstance(element, UniformQuantizedType):
        return round_float(x, element)
    p = QuantParams.of(element)
    if rounding is round_half_away:
        return quantize(x, p.scale, p.zero_point, p.qmin, p.qmax)
    q = rounding(np.divide(x, np.float32(p.scale), dtype=np.float32))
    q += np.float32(p.zero_point)
    return np.clip(q, p.qmin, p.qmax, out=q)


def to_real(x: Array, element: Attribute) -> Array:
    """Stored values of `element` as real float32 values: S·(q − Z)."""
    if not isinstance(element, UniformQuantizedType):
        return np.asarray(x, np.float32)
    return dequantize(x, element.scale, element.zero_point)


@tpu_kernel(tpu.CastOp, kinds=("float", "int"))
def cast(op, args: list[Array]) -> Array:
    """Through the real value: dequantize (or take the float), apply TOP's
    Cast for `to`, store in the result type."""
    real = to_real(args[0], element_of(op.operands[0]))
    if op.value("to"):
        real = np.asarray(KERNELS[top.CastOp](op, [real]), np.float32)
    return from_real(real, element_of(op.results[0]), float_rounding(op))


# --- integer rescales ----------------------------------------------------------------------


def check_requant(op, per_channel: bool, channels: int) -> None:
    """Only MultiplierShift is defined; one value unless per channel."""
    mode = op.value("quant_mode") or "MultiplierShift"
    if mode != "MultiplierShift":
        raise TpucError(f"{op.name} '{op.names[0]}': quant_mode {mode!r} is not supported")
    counts = {len(op.value("multiplier") or [1]), len(op.value("rshift") or [0])}
    allowed = {1, channels} if per_channel else {1}
    if not counts <= allowed:
        raise TpucError(
            f"{op.name} '{op.names[0]}': multiplier/rshift must hold "
            f"{'1 or one per channel (' + str(channels) + ')' if per_channel else 'one value'}"
        )


def _channels(x: Array) -> int:
    return x.shape[1] if np.ndim(x) > 1 else 1


@tpu_kernel(tpu.RequantIntOp, tpu.RequantIntAxisOp)
def requant_int(op, args: list[Array]) -> Array:
    """requant(q − Z_in, M, r) + Z_out, saturated (per channel on axis 1)."""
    x = args[0]
    check_requant(op, isinstance(op, tpu.RequantIntAxisOp), _channels(x))
    return requant_output(op, centered(x, in_quant(op)), axis=1)


@tpu_kernel(tpu.RequantFpOp)
def requant_fp(op, args: list[Array]) -> Array:
    """clamp(round((q − Z_in)·scale) + Z_out), the product in float32."""
    x = centered(args[0], in_quant(op), np.float32)
    out = out_quant(op)
    q = float_rounding(op)(np.multiply(x, np.float32(op.value("scale")), dtype=np.float32))
    q += np.float32(out.zero_point)
    return saturate(q, out.qmin, out.qmax)


@tpu_kernel(tpu.DequantIntOp, kinds=("float", "int"))
def dequant_int(op, args: list[Array]) -> Array:
    """(q − Z_in)·M / 2^r per channel: the float epilogue of requant_output."""
    x = args[0]
    check_requant(op, True, _channels(x))
    return requant_output(op, centered(x, in_quant(op)))


# --- table lookup ------------------------------------------------------------------------


@tpu_kernel(tpu.LutOp, kinds=("float", "int"))
def lut(op, args: list[Array]) -> Array:
    """table[q − qmin_in]; a [C, 256] table picks row c for channel c (axis 1)."""
    x, table = args
    element = element_of(op.operands[0])
    if not isinstance(element, UniformQuantizedType):
        raise TpucError(f"{op.name} '{op.names[0]}': the input must be quantized, not {element}")
    qin = in_quant(op)
    needed = qin.qmax - qin.qmin + 1
    if table.ndim not in (1, 2) or table.shape[-1] < needed:
        raise TpucError(
            f"{op.name} '{op.names[0]}': table shape {list(table.shape)} is not "
            f"[{needed}] or [C, {needed}]"
        )
    index = (np.asarray(x, np.float32) - np.float32(qin.qmin)).astype(np.intp)
    if table.ndim == 1:
        y = table[index]
    else:
        if np.ndim(x) < 2 or x.shape[1] != table.shape[0]:
            raise TpucError(
                f"{op.name} '{op.names[0]}': {table.shape[0]} tables for input shape "
                f"{list(np.shape(x))} (one per channel on axis 1)"
            )
        channel = np.arange(table.shape[0]).reshape((1, -1) + (1,) * (np.ndim(x) - 2))
        y = table[channel, index]
    return round_float(np.asarray(y, np.float32), element_of(op.results[0]))
