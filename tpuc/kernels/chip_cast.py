"""BM168x's f32 -> f16/bf16 cast, as the chip rounds it.

The vendor's cast kernel (`backend_api_cast_global`) rounds to the half
type with the Cast's own round mode, where numpy (and the kernel library's
`round_float`) round to nearest even. TPU-MLIR and tpuc leave tpu.Cast at
its default, HalfAwayFromZero, so on the chip an f32 exactly halfway between
two half values goes to the one farther from zero. f32 subnormals become
(signed) zero in bf16. Measured in the vendor runtime on every kind of tie
(normal and f16-subnormal results, both signs) with HalfAwayFromZero and
HalfToEven: tests/native/test_cast_data.py.
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


def cast(p: lib.Cast, x: Array) -> Array:
    """The kernel library's cast, with an f32 -> f16/bf16 one rounded as the
    chip rounds it (round_to_half with the Cast's round mode)."""
    if p.to or p.src.dtype != "f32" or p.dst.dtype not in HALF_FORMS:
        return lib.cast(p, x)
    float_rounding(p.round_mode)  # an unknown mode is an error, as in lib.cast
    return round_to_half(x, p.dst.dtype, p.round_mode)


__all__ = ["cast", "round_to_half"]
