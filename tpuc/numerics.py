"""The chip's rounding and fake quantization, in one place.

Python's `round()` and `np.round` round half to even; the TPU rounds half
away from zero. Every quantity that must match the chip goes through here
(issue 4 adds multiplier/shift and fp16/bf16 conversion). Test vectors are
in tests/test_numerics.py.
"""

from __future__ import annotations

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
    w = np.asarray(w, np.float32)
    if axis is None:
        absmax = np.abs(w).max(initial=0.0)
    else:
        axis %= w.ndim
        others = tuple(i for i in range(w.ndim) if i != axis)
        absmax = np.abs(w).max(axis=others, keepdims=True, initial=0.0)
    scale = np.where(absmax > 0, absmax / INT8_MAX, 1.0).astype(np.float32)
    q = np.clip(round_half_away(w / scale), -INT8_MAX, INT8_MAX)
    return (q * scale).astype(np.float32)


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
