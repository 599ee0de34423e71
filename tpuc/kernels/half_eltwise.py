"""F16/BF16 constant arithmetic and Scale as the bm168x chips compute them
(probed on the vendor's chip model: tests/native/test_float_exact.py).

The constant of AddConst, SubConst and MulConst is rounded to the half type
before the operation (the chip's constbinary takes it in the operand's
type); a Scale (x·s + b per channel) rounds the product to the half type,
adds the bias rounded to it, and rounds the sum."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tpuc.kernels import elementwise as ew
from tpuc.kernels.arrays import Array, f32, relu
from tpuc.kernels.element import Element
from tpuc.kernels.rounding import half_rounder


@dataclass(frozen=True)
class HalfConst:
    attrs: ew.Const
    element: Element


@dataclass(frozen=True)
class HalfScale:
    attrs: ew.Scale
    element: Element


def const(p: HalfConst, x: Array) -> Array:
    """x <op> c with c rounded to the half type, rounded."""
    rounder = half_rounder(p.element)
    value = float(rounder(np.array([p.attrs.value], np.float32))[0])
    return f32(rounder(ew.const(replace(p.attrs, value=value), x)))


def scale(p: HalfScale, x: Array, s: Array, b: Array | None = None) -> Array:
    """r(r(x·s) + r(b)) per channel (axis 1), then the fused ReLU."""
    rounder = half_rounder(p.element)
    shape = (-1,) + (1,) * (x.ndim - 2)
    y = f32(rounder(np.multiply(f32(x), f32(s).reshape(shape))))
    if b is not None:
        y = f32(rounder(y + f32(rounder(f32(b))).reshape(shape)))
    if p.attrs.relu.on:
        relu(y, None if p.attrs.relu.limit is None else float(p.attrs.relu.limit))
    return y
