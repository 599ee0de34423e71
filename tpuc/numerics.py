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
    out = np.copysign(half, x)
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
