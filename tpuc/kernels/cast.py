"""Precision changes: tpu.Cast, the integer rescales (RequantInt/-Axis,
DequantInt) and the device boundary's real <-> stored values.

Values follow the TPU convention (float32 arrays holding f16/bf16 values or
stored integers). Every rounding goes through `tpuc.base.numerics` or an explicit
round mode, never Python's round-half-even unless the op asks HalfToEven.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpuc.base.dtypes import ELEMENT_TYPES
from tpuc.base.errors import TpucError
from tpuc.base.numerics import dequantize, to_bf16
from tpuc.kernels.arrays import Array, f32
from tpuc.kernels.element import Element
from tpuc.kernels.requant import DEFAULT_ROUND, Requant, centered, requant_output
from tpuc.kernels.rounding import float_rounding, round_float

# --- the device boundary ---------------------------------------------------------------------


def from_real(x: Array, element: Element, round_mode: str = DEFAULT_ROUND) -> Array:
    """Real values as stored in `element`: clamp(round(x · f32(1/S)) + Z) for
    a quantized element, rounded floats otherwise. As the chip quantizes
    (bm1684x's requant_float: a multiply by the float32 reciprocal of S, then
    the rounding; `x / S` differs at some ties)."""
    x = np.asarray(x, np.float32)
    if not element.quantized:
        return round_float(x, element)
    inverse = np.float32(1.0 / element.scale)
    q = float_rounding(round_mode)(np.multiply(x, inverse, dtype=np.float32))
    q += np.float32(element.zero_point)
    return np.clip(q, element.qmin, element.qmax, out=q)


def stored_input(x: np.ndarray, element: Element, name: str) -> Array:
    """A network input as the device stores it (TPU-MLIR's model_runner):
    an integer array for a quantized input is taken as its stored values
    (checked against the type's range), anything else is a real value,
    quantized by `from_real`."""
    array = np.asarray(x)
    if not (element.quantized and array.dtype.kind in "iu"):
        return from_real(np.asarray(array, np.float32), element)
    low, high = (int(array.min()), int(array.max())) if array.size else (0, 0)
    if low < element.qmin or high > element.qmax:
        raise TpucError(
            f"input '{name}': stored values {low}..{high} outside {element.dtype}'s "
            f"[{element.qmin}, {element.qmax}] (give real values as float)"
        )
    return np.asarray(array, np.float32)


def to_real(x: Array, element: Element) -> Array:
    """Stored values of `element` as real float32 values: S·(q − Z)."""
    if not element.quantized:
        return np.asarray(x, np.float32)
    return dequantize(x, element.scale, element.zero_point)


# --- tpu.Cast ------------------------------------------------------------------------------

_INT_NAMES = {
    "INT8": "i8", "UINT8": "u8", "INT16": "i16", "UINT16": "u16",
    "INT32": "i32", "UINT32": "u32", "INT64": "i64", "UINT64": "u64",
    "I8": "i8", "U8": "u8", "I16": "i16", "I32": "i32", "I64": "i64",
}  # fmt: skip
INT_TYPES = {to: np.dtype(ELEMENT_TYPES[name].storage) for to, name in _INT_NAMES.items()}
"""Cast's integer `to` spellings -> numpy dtype (from tpuc.base.dtypes)."""

FLOAT_NAMES = ("F32", "FLOAT32", "FLOAT", "F64", "FLOAT64", "DOUBLE")


def convert(x: Array, to: str) -> Array:
    """TOP Cast's conversion of real values through the type `to`, back to
    float32: floats round (f16/bf16 to nearest even), integers truncate
    toward zero and wrap to the type's width, BOOL is x != 0."""
    to = to.upper()
    if to in FLOAT_NAMES:
        return x
    if to in ("F16", "FLOAT16"):
        return f32(x.astype(np.float16))
    if to in ("BF16", "BFLOAT16"):
        return f32(to_bf16(x))
    if to == "BOOL":
        return f32(x != 0)
    dtype = INT_TYPES.get(to)
    if dtype is None:
        raise TpucError(f"unknown cast target {to!r}")
    with np.errstate(invalid="ignore"):
        return f32(np.trunc(x).astype(np.int64).astype(dtype))


@dataclass(frozen=True)
class Cast:
    """From `src` to `dst` through the real value; `to` (TOP Cast's target,
    or None) converts the real value first; `round_mode` rounds to `dst`'s
    integers."""

    src: Element
    dst: Element
    to: str | None = None
    round_mode: str = DEFAULT_ROUND


def cast(p: Cast, x: Array) -> Array:
    """Dequantize (or take the float), convert through `to`, store in `dst`."""
    float_rounding(p.round_mode)  # an unknown mode is an error for every pair
    real = to_real(x, p.src)
    if p.to:
        real = convert(real, p.to)
    return from_real(real, p.dst, p.round_mode)


# --- integer rescales ----------------------------------------------------------------------


@dataclass(frozen=True)
class Rescale:
    """RequantInt(-Axis) / DequantInt: requant(q − Z_in) through `requant`
    (per channel of axis 1 when `per_channel`; a float `requant.out`
    dequantizes). Only `quant_mode` MultiplierShift is defined."""

    inp: Element
    requant: Requant
    per_channel: bool = False
    quant_mode: str = "MultiplierShift"


def check_rescale(p: Rescale, channels: int) -> None:
    """Only MultiplierShift is defined; one value unless per channel."""
    if p.quant_mode != "MultiplierShift":
        raise TpucError(f"quant_mode {p.quant_mode!r} is not supported")
    counts = {len(p.requant.multiplier), len(p.requant.rshift)}
    allowed = {1, channels} if p.per_channel else {1}
    if not counts <= allowed:
        raise TpucError(
            "multiplier/rshift must hold "
            f"{'1 or one per channel (' + str(channels) + ')' if p.per_channel else 'one value'}"
        )


def channels_of(x: Array) -> int:
    return x.shape[1] if np.ndim(x) > 1 else 1


def rescale(p: Rescale, x: Array) -> Array:
    """requant(q − Z_in, M, r) + Z_out, saturated (or the float epilogue)."""
    check_rescale(p, channels_of(x))
    return requant_output(p.requant, centered(x, p.inp))
