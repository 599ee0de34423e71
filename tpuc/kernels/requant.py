"""The epilogue of every integer kernel, as one record.

An integer family sums exactly (int64, or floats holding exact integers)
and then hands the accumulator to `requant_output`: requant(acc, M, r) per
tensor or per channel of `axis`, + Z_out, the fused ReLU on stored integers,
saturation to the output's storage range. A float result dequantizes
instead (acc·M·2^−r, ReLU on real values, one rounding to the float type);
the convolution and matmul families (tpuc's INT8 "float epilogue") compute
it as the chip does (`chip_float_epilogue`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpuc.base.numerics import (
    f64_to_bf16,
    f64_to_f16,
    requantize,
    round_half_away,
    saturate,
)
from tpuc.kernels.arrays import Array
from tpuc.kernels.element import Element

DEFAULT_ROUND = "HalfAwayFromZero"


@dataclass(frozen=True)
class Relu:
    """A fused ReLU: off, or on with an optional upper limit (real units;
    None or < 0: unbounded)."""

    on: bool = False
    limit: float | None = None

    def upper(self) -> float | None:
        return self.limit if self.limit is not None and self.limit >= 0 else None


NO_RELU = Relu()


@dataclass(frozen=True)
class Requant:
    """requant(acc, multiplier, rshift) with `round_mode`: one value per
    tensor, or one per channel of `axis`; then `out`'s zero point, `relu`,
    saturation (or, for a float `out`, the float epilogue)."""

    out: Element
    multiplier: tuple[int, ...] = (1,)
    rshift: tuple[int, ...] = (0,)
    axis: int = 1
    round_mode: str = DEFAULT_ROUND
    relu: Relu = NO_RELU


def channel_params(values: tuple[int, ...], rank: int, axis: int = 1) -> np.ndarray:
    """A per-tensor (one value) or per-channel list, shaped to broadcast
    along `axis` of a rank-`rank` accumulator."""
    array = np.asarray(values, np.int64)
    if array.size == 1:
        return array.reshape(())
    shape = [1] * rank
    shape[axis % rank] = array.size
    return array.reshape(shape)


def requant_output(p: Requant, acc: Array, chip_float: bool = False) -> Array:
    """The integer epilogue (see the module docstring); `chip_float`: a
    float result by `chip_float_epilogue`."""
    rank = np.ndim(acc)
    multiplier = channel_params(p.multiplier, rank, p.axis)
    rshift = channel_params(p.rshift, rank, p.axis)
    if not p.out.quantized:
        dequant = chip_float_epilogue if chip_float else dequant_output
        return dequant(p, acc, multiplier, rshift)
    q = requantize(acc, multiplier, rshift, p.round_mode)
    q += p.out.zero_point
    return saturate(relu_int(p.relu, q, p.out), p.out.qmin, p.out.qmax)


def dequant_output(p: Requant, acc: Array, multiplier, rshift) -> Array:
    """The float epilogue: acc·M·2^−r in float64, fused relu (and limit) on
    the real values, rounded once to the float result type."""
    real = np.asarray(acc, np.float64) * np.ldexp(multiplier.astype(np.float64), -rshift)
    if p.relu.on:
        real = np.clip(real, 0.0, p.relu.upper())
    return round_once(real, p.out)


def chip_float_epilogue(p: Requant, acc: Array, multiplier, rshift) -> Array:
    """The float epilogue of an INT8 convolution or matmul, as the chip
    computes it (it has no single op for it; the native target writes
    conv -> int32, cast -> f32, multiply by the f32 scale with the fused
    ReLU): f32(acc) (rounded half to even above 2^24) times f32(M·2^−r) in
    float32, ReLU (and its limit, in f32) on the product, then rounded (to
    nearest even) to an f16/bf16 result type."""
    scale = np.ldexp(multiplier.astype(np.float64), -rshift).astype(np.float32)
    real = np.multiply(np.asarray(acc).astype(np.float32), scale, dtype=np.float32)
    if p.relu.on:
        real = np.maximum(real, np.float32(0.0))
        if p.relu.upper() is not None:
            real = np.minimum(real, np.float32(p.relu.upper()))
    return round_once(real, p.out)


ROUND_ONCE = {"f16": f64_to_f16, "bf16": f64_to_bf16}


def round_once(x: Array, element: Element) -> Array:
    """float64 values rounded once (to nearest even) to the float type
    `element`, as float32."""
    fn = ROUND_ONCE.get(element.dtype)
    return np.asarray(x, np.float32) if fn is None else fn(x)


def relu_int(relu: Relu, q: np.ndarray, out: Element) -> np.ndarray:
    """A fused ReLU on stored integers: clamp at Z_out (and at Z_out plus
    the limit quantized by the output scale)."""
    if not relu.on:
        return q
    upper = None
    if relu.upper() is not None:
        upper = out.zero_point + int(round_half_away(np.float64(relu.limit / out.scale)))
    return np.clip(q, out.zero_point, upper)


def centered(x: Array, element: Element, dtype=np.float64) -> Array:
    """q − Z as floats of `dtype` (exact: 9-bit values)."""
    x = np.asarray(x, dtype)
    return x - element.zero_point if element.zero_point else x
