"""Quantization parameters of one tensor, and where they come from.

A calibrated range becomes (scale, zero point, storage range) here and only
here, so the lowering (which writes the types) and the TPU interpreter
(which reads them) agree. TPU-MLIR's rules: symmetric ranges are
[-thr, thr] -> int8 with scale thr/127, or [0, thr] -> uint8 with scale
thr/255; asymmetric ranges [min, max] (holding 0) -> int8 with scale
(max − min)/255 and the zero point that maps 0 exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import Attribute

from tpuc.base.numerics import round_half_away
from tpuc.dialects.quant import CalibratedQuantizedType, UniformQuantizedType

MIN_SCALE = 1e-5 / 127  # an all-zero tensor (threshold 1e-5) still gets a usable scale


@dataclass(frozen=True)
class QuantParams:
    """real = scale · (q − zero_point), q in [qmin, qmax]."""

    scale: float
    zero_point: int
    qmin: int
    qmax: int

    @property
    def signed(self) -> bool:
        return self.qmin < 0

    def element_type(self) -> UniformQuantizedType:
        """The `!quant.uniform<i8|u8:f32, S:Z>` element type."""
        return UniformQuantizedType("i8" if self.signed else "u8", self.scale, self.zero_point)

    @staticmethod
    def of(element: Attribute) -> QuantParams:
        """Parameters of a `!quant.uniform` element type."""
        if not isinstance(element, UniformQuantizedType):
            raise TypeError(f"{element} is not a per-tensor quantized type")
        return QuantParams(
            element.scale, element.zero_point, element.storage_min, element.storage_max
        )


def from_range(lo: float, hi: float, asymmetric: bool) -> QuantParams:
    """Parameters of a tensor calibrated to [lo, hi] (lo <= 0 <= hi)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if not asymmetric:
        threshold = max(-lo, hi)
        if lo >= 0:
            return QuantParams(max(threshold / 255.0, MIN_SCALE), 0, 0, 255)
        return QuantParams(max(threshold / 127.0, MIN_SCALE), 0, -128, 127)
    scale = max((hi - lo) / 255.0, MIN_SCALE)
    zero_point = int(round_half_away(np.float64(-128 - lo / scale)))
    return QuantParams(scale, int(np.clip(zero_point, -128, 127)), -128, 127)


def from_calibrated(element: Attribute, asymmetric: bool) -> QuantParams:
    """Parameters of a `!quant.calibrated<f32<min:max>>` element type."""
    if not isinstance(element, CalibratedQuantizedType):
        raise TypeError(f"{element} carries no calibrated range")
    return from_range(element.min, element.max, asymmetric)
