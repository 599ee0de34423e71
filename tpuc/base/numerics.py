"""The chip's rounding and fake quantization, in one place.

Python's `round()` and `np.round` round half to even; the TPU rounds half
away from zero. Every quantity that must match the chip goes through here
(issue 4 adds multiplier/shift and fp16/bf16 conversion). Test vectors are
in tests/base/test_numerics.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

INT8_MIN, INT8_MAX = -128, 127


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, ties away from zero (same float dtype).

    `trunc(x ± 0.5)` is wrong for the largest float below 0.5 (0.49999997 +
    0.5 rounds to 1.0 in float32); adding the float just below one half
    instead is exact for every float32 (checked exhaustively up to 2^24,
    above which all floats are integers) and is three cheap passes."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        return x.copy()
    half = np.nextafter(x.dtype.type(0.5), x.dtype.type(0))
    out = np.asarray(np.copysign(half, x))  # 0-d inputs give numpy scalars
    out += x
    return np.trunc(out, out=out)


def fake_quant(x: np.ndarray, threshold: float, qmin: int = INT8_MIN, qmax: int = INT8_MAX):
    """x quantized symmetrically to int8 with `threshold` mapped to qmax, and
    back to float32: what an INT8 tensor with this threshold can hold."""
    scale = np.float32(qmax / threshold)
    q = round_half_away(np.multiply(x, scale, dtype=np.float32))
    np.clip(q, qmin, qmax, out=q)
    q *= np.float32(1.0 / scale)
    return q


def fake_quant_per_channel(w: np.ndarray, axis: int | None) -> np.ndarray:
    """Weights quantized symmetrically to [-127, 127] per slice along `axis`
    (per tensor when None), each slice by its own abs-max, and back."""
    q, scale = quant_per_channel(w, axis)
    return (q * scale).astype(np.float32)


def quant_per_channel(w: np.ndarray, axis: int | None) -> tuple[np.ndarray, np.ndarray]:
    """`fake_quant_per_channel`'s int8 values and float32 scales (broadcastable
    to `w`): a quarter of the float copy's memory, the same floats back."""
    w = np.asarray(w, np.float32)
    if axis is None:
        absmax = np.abs(w).max(initial=0.0)
    else:
        axis %= w.ndim
        others = tuple(i for i in range(w.ndim) if i != axis)
        absmax = np.abs(w).max(axis=others, keepdims=True, initial=0.0)
    scale = np.where(absmax > 0, absmax / INT8_MAX, 1.0).astype(np.float32)
    q = np.clip(round_half_away(w / scale), -INT8_MAX, INT8_MAX)
    return q.astype(np.int8), scale


# --- fixed-point requantization (gemmlowp / TFLite forms) -----------------------------

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def quantize_multiplier(m: float) -> tuple[int, int]:
    """A positive real multiplier as (M, shift) with M in [2^30, 2^31) and
    m ≈ M · 2^(shift − 31); TPU-MLIR's rshift is 31 − shift. Multipliers
    below 2^-31 flush to (0, 0)."""
    import math

    if m < 0 or not math.isfinite(m):
        raise ValueError(f"multiplier {m} must be finite and non-negative")
    if m == 0:
        return 0, 0
    q, shift = math.frexp(m)
    mantissa = int(round_half_away(np.float64(q * 2**31)))
    if mantissa == 2**31:  # the mantissa rounded up to 1.0
        mantissa, shift = 2**30, shift + 1
    if shift < -31:
        return 0, 0
    return mantissa, shift


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """round(a·b / 2^31) with ties toward +inf, int32 in and out; the one
    overflow (−2^31 · −2^31) saturates. C++ truncating division of the nudged
    product equals this floor shift."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    out = (a * b + (1 << 30)) >> 31
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, out)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """x / 2^exponent rounded half away from zero (0 <= exponent <= 62)."""
    x = np.asarray(x, np.int64)
    e = np.asarray(exponent, np.int64)
    half = np.where(e > 0, np.left_shift(np.int64(1), np.maximum(e - 1, 0)), 0)
    magnitude = (np.abs(x) + half) >> e
    return np.where(x < 0, -magnitude, magnitude)


def multiply_by_quantized_multiplier(x, multiplier, shift) -> np.ndarray:
    """x · M · 2^(shift − 31) as TFLite computes it (double rounding: the
    high multiply, then a rounding right shift)."""
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    scaled = np.asarray(x, np.int64) << left
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(scaled, multiplier), right)


# --- half-precision floats ---------------------------------------------------------------


def to_f16(x) -> np.ndarray:
    """float32 → nearest float16 (ties to even; overflow to inf), as float32."""
    with np.errstate(over="ignore"):  # beyond 65504 the chip gives inf as well
        return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def bf16_bits(x) -> np.ndarray:
    """float32 → bfloat16 bit patterns (uint16): round to nearest, ties to
    even, on the upper 16 bits; NaN stays a quiet NaN."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    rounding = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    rounded = ((bits + rounding) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(np.asarray(x, np.float32))
    return np.where(nan, ((bits >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16), rounded)


def to_bf16(x) -> np.ndarray:
    """float32 → nearest bfloat16, returned as float32."""
    return (bf16_bits(x).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_round_to_odd(x) -> np.ndarray:
    """float64 -> float32 rounding to odd: inexact results take the
    neighbour (of the two around x) whose last mantissa bit is 1."""
    x = np.asarray(x, np.float64)
    y = x.astype(np.float32)
    fix = (y.astype(np.float64) != x) & ((y.view(np.uint32) & 1) == 0)
    if not fix.any():
        return y
    toward = np.where(x > y, np.float32(np.inf), np.float32(-np.inf))
    return np.where(fix, np.nextafter(y, toward), y)


def f64_to_f16(x) -> np.ndarray:
    """float64 → nearest float16 in one rounding (ties to even), as float32."""
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float64).astype(np.float16).astype(np.float32)


def f64_to_bf16(x) -> np.ndarray:
    """float64 → nearest bfloat16 in one rounding: through float32 rounded
    to odd, which keeps the second rounding exact."""
    return to_bf16(f32_round_to_odd(x))


def round_half_up(x: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, ties toward +inf (same float dtype)."""
    floor = np.floor(x)
    return floor + (x - floor >= 0.5)  # exact: x − floor(x) is representable


FLOAT_ROUNDING: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "HalfAwayFromZero": round_half_away,
    "HalfUp": round_half_up,
    "HalfToEven": np.rint,
    "Down": np.floor,
}
"""`round_mode` -> rounding of float values to integers (float dtype kept);
the same modes as a right shift's (`ROUND_MODES`)."""


# --- multiplier/rshift requantization (the TPU's integer rescale) -------------------------

ROUND_MODES = ("HalfAwayFromZero", "HalfUp", "HalfToEven", "Down", "DoubleRound")
"""Rounding of a right shift: ties away from zero (the chip's default), ties
toward +inf, ties to even, and floor (a plain arithmetic shift). A requant
also takes DoubleRound: TFLite's MultiplyByQuantizedMultiplier (the rounded
high half of acc·M, then a rounding shift by rshift − 31; TPU-MLIR's
RequantMode TFLite), for pre-quantized TFLite models with 31-bit multipliers."""


def multiplier_rshift(scale: float, bits: int = 32) -> tuple[int, int]:
    """A positive real scale as (multiplier, rshift) with scale ≈ M / 2^rshift
    and M in [2^(bits−2), 2^(bits−1)): a signed `bits`-wide multiplier with
    as many significant bits as it holds. rshift may be negative (a left
    shift) for scales >= 2^(bits−1). For bits=32 this is TFLite's
    QuantizeMultiplier with rshift = 31 − shift; 0.8 at 8 bits is (102, 7)."""
    import math

    if scale < 0 or not math.isfinite(scale):
        raise ValueError(f"scale {scale} must be finite and non-negative")
    if scale == 0:
        return 0, 0
    q, exponent = math.frexp(scale)
    top = 1 << (bits - 1)
    mantissa = int(round_half_away(np.float64(q * top)))
    if mantissa == top:
        mantissa, exponent = top >> 1, exponent + 1
    rshift = bits - 1 - exponent
    if rshift > 62:  # below what any int32 accumulator can show
        return 0, 0
    return mantissa, rshift


def shared_rshift_multipliers(scales, bits: int) -> tuple[list[int], int]:
    """Several scales on one rshift (add/sub inputs): the largest gets a full
    `bits`-wide multiplier, the others as many bits as that rshift allows."""
    scales = [float(s) for s in scales]
    largest = max(abs(s) for s in scales)
    _, rshift = multiplier_rshift(largest, bits)
    limit = (1 << (bits - 1)) - 1
    multipliers = []
    for s in scales:
        m = int(round_half_away(np.float64(math.ldexp(s, rshift))))
        multipliers.append(max(-limit, min(limit, m)))
    return multipliers, rshift


def rounding_rshift(x, rshift, mode: str = "HalfAwayFromZero") -> np.ndarray:
    """Integer x / 2^rshift rounded by `mode` (rshift <= 0 shifts left); int64."""
    x = np.asarray(x, np.int64)
    r = np.asarray(rshift, np.int64)
    if np.all(r <= 0):
        return x << (-r)
    pos = np.maximum(r, 0)
    left = x << np.maximum(-r, 0)
    half = np.where(pos > 0, np.left_shift(np.int64(1), np.maximum(pos - 1, 0)), 0)
    if mode == "HalfAwayFromZero":
        magnitude = (np.abs(left) + half) >> pos
        return np.where(left < 0, -magnitude, magnitude)
    if mode == "HalfUp":
        return (left + half) >> pos
    if mode == "Down":
        return left >> pos
    if mode == "HalfToEven":
        floor = left >> pos
        rest = left - (floor << pos)
        up = (rest > half) | ((rest == half) & (pos > 0) & ((floor & 1) == 1))
        return floor + up
    raise ValueError(f"unknown round mode '{mode}' (known: {', '.join(ROUND_MODES)})")


def requantize(acc, multiplier, rshift, mode: str = "HalfAwayFromZero") -> np.ndarray:
    """round(acc · multiplier / 2^rshift) in int64 (|acc|, |M| < 2^31 keep the
    product exact). multiplier/rshift broadcast against acc (per channel)."""
    if mode == "DoubleRound":
        shift = 31 - np.asarray(rshift, np.int64)
        # an int32 accumulator wraps (a saturated INT32_MIN bias plus a
        # negative sum, as ai-edge-quantizer writes for all-zero channels)
        acc32 = (np.asarray(acc, np.int64) - INT32_MIN) % (1 << 32) + INT32_MIN
        return multiply_by_quantized_multiplier(acc32, multiplier, shift)
    product = np.asarray(acc, np.int64) * np.asarray(multiplier, np.int64)
    r = np.asarray(rshift, np.int64)
    in_place = product.ndim > 0 and product.shape == np.broadcast(product, r).shape
    if mode != "HalfAwayFromZero" or np.any(r < 0) or not in_place:
        return rounding_rshift(product, rshift, mode)
    # the chip's default mode on the hot path: in place on the fresh product
    # (the same integers as rounding_rshift, in fewer passes)
    negative = product < 0
    np.abs(product, out=product)
    product += np.where(r > 0, np.left_shift(np.int64(1), np.maximum(r - 1, 0)), 0)
    product >>= r
    np.negative(product, out=product, where=negative)
    return product


def saturate(q, qmin: int, qmax: int) -> np.ndarray:
    """Integers clamped to the storage range, as float32 (how the TPU
    interpreter holds 8-bit tensors)."""
    return np.clip(q, qmin, qmax).astype(np.float32)


def quantize(x, scale: float, zero_point: int, qmin: int, qmax: int) -> np.ndarray:
    """float -> stored integers: clamp(round_half_away(x / scale) + zp), float32."""
    q = round_half_away(np.divide(x, np.float32(scale), dtype=np.float32))
    q += np.float32(zero_point)
    return np.clip(q, qmin, qmax, out=q)


def dequantize(q, scale: float, zero_point: int) -> np.ndarray:
    """Stored integers -> real values: scale · (q − zp) in float32."""
    q = np.asarray(q, np.float32)
    return (q - np.float32(zero_point)) * np.float32(scale)
