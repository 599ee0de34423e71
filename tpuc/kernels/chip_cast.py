"""BM168x's f32 -> f16/bf16 cast, as the chip rounds it.

The vendor's cast kernel (`backend_api_cast_global`) rounds to the half
type with the Cast's own round mode, where numpy (and the kernel library's
`round_float`) round to nearest even. TPU-MLIR and tpuc leave tpu.Cast at
its default, HalfAwayFromZero, so on the chip an f32 exactly halfway between
two half values goes to the one farther from zero. f32 subnormals become
(signed) zero in bf16. Measured in the vendor runtime on every kind of tie
(normal and f16-subnormal results, both signs) with HalfAwayFromZero and
HalfToEven: tests/native/test_cast_data.py.

A dequantize to a half type (INT8 -> f16/bf16, `dequant_fp_param_t`)
works in the half type itself: q − Z and the scale are each converted to
it, and their product is rounded to it (to nearest even), where the
library rounds S·(q − Z) once from float32. The two differ by one half ulp
on ~3% of an f16 tensor (ppocr_det's INT8 network with two layers kept in
F16: 25,572 of 819,200 values). A quantize from a half type
(`requant_fp_param_t`) likewise multiplies in it: half(x · half(f32(1/S))),
then rounds to the integer with the Cast's round mode (275 of 204,800
values differed there).
"""

from __future__ import annotations

import numpy as np

from tpuc.kernels import cast as lib
from tpuc.kernels.arrays import Array
from tpuc.kernels.rounding import float_rounding

HALF_FORMS = {"f16": (10, -14, np.float16), "bf16": (7, -126, None)}
"""Half type -> (mantissa bits, smallest normal exponent, numpy dtype)."""
TINY = np.float32(2.0**-126)  # smallest normal f32: the bf16 cast flushes below it


def round_to_half(x: Array, dtype: str, round_mode: str) -> Array:
    """float32 `x` rounded to the half type `dtype` (as float32 values) with
    the integer rounding `round_mode` applied in units of the half's ulp at
    each value (exact in float64: the ulp is a power of two); past the
    largest half value, ±inf."""
    mantissa, min_exponent, _ = HALF_FORMS[dtype]
    x = np.asarray(x, np.float32)
    wide = x.astype(np.float64)
    _, exponent = np.frexp(wide)  # wide = m·2^exponent, m in [0.5, 1)
    ulp = np.ldexp(1.0, np.maximum(exponent - 1, min_exponent) - mantissa)
    with np.errstate(invalid="ignore", over="ignore"):
        rounded = (float_rounding(round_mode)(wide / ulp) * ulp).astype(np.float32)
        if dtype == "f16":  # beyond 65504: inf, as f16 holds it
            rounded = rounded.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        rounded = np.where(np.abs(x) < TINY, np.copysign(np.float32(0), x), rounded)
    return np.where(np.isfinite(x), rounded, x).astype(np.float32)


def dequantize_to_half(p: lib.Cast, x: Array) -> Array:
    """S·(q − Z) as the chip computes it in the half type: half(q − Z) ·
    half(S), the product rounded to the half type (to nearest even)."""
    dtype = p.dst.dtype
    q = np.asarray(x, np.float32) - np.float32(p.src.zero_point)
    terms = round_to_half(q, dtype, "HalfToEven")
    scale = round_to_half(np.float32(p.src.scale), dtype, "HalfToEven")
    return round_to_half(terms * scale, dtype, "HalfToEven")  # exact in f32: 2 x 11 bits


def quantize_from_half(p: lib.Cast, x: Array) -> Array:
    """x/S as the chip computes it from a half type: the product with the
    half-rounded f32 reciprocal, rounded to the half type, then to the
    integer with the Cast's round mode, plus Z, saturated."""
    dtype, element = p.src.dtype, p.dst
    inverse = round_to_half(np.float32(1.0 / element.scale), dtype, "HalfToEven")
    scaled = round_to_half(np.asarray(x, np.float32) * inverse, dtype, "HalfToEven")
    q = float_rounding(p.round_mode)(scaled) + np.float32(element.zero_point)
    return np.clip(q, element.qmin, element.qmax).astype(np.float32)


def cast(p: lib.Cast, x: Array) -> Array:
    """The kernel library's cast, with an f32 -> f16/bf16 one rounded as the
    chip rounds it (round_to_half with the Cast's round mode) and a
    dequantize to a half type computed in it (dequantize_to_half)."""
    if not p.to and p.src.quantized and p.dst.dtype in HALF_FORMS:
        return dequantize_to_half(p, x)
    if not p.to and p.src.dtype in HALF_FORMS and p.dst.quantized:
        return quantize_from_half(p, x)
    if p.to or p.src.dtype != "f32" or p.dst.dtype not in HALF_FORMS:
        return lib.cast(p, x)
    float_rounding(p.round_mode)  # an unknown mode is an error, as in lib.cast
    return round_to_half(x, p.dst.dtype, p.round_mode)


__all__ = ["cast", "dequantize_to_half", "quantize_from_half", "round_to_half"]
