"""F16/BF16 transposed convolution as the bm168x chip computes it.

The chip's deconvolution is its convolution (`half_conv`: blocks of 32
input channels outer, kernel positions inner, cut products, an f32
accumulator from the bias) over the input with stride − 1 zeros inserted
between its pixels and padded by dilation·(k − 1) − pad (plus the output
padding at the end), with the filter flipped and its channel axes swapped
per group. Products with the inserted zeros are zero, so only the order
of the real taps matters: the flipped kernel's row-major order. Probed on
the vendor's chip model (tests/native/test_half_deconv.py); f32 sums in
BLAS's order miss the chip's F16 roundings in about 1 output in 5000.
A depthwise deconvolution keeps the library's arithmetic, rounded.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tpuc.kernels import float_conv, half_conv
from tpuc.kernels.arrays import Array, f32
from tpuc.kernels.element import Element
from tpuc.kernels.float_conv import Deconv
from tpuc.kernels.rounding import half_rounder


@dataclass(frozen=True)
class HalfDeconv:
    """A transposed convolution whose operands and result are of the half
    type `element`."""

    attrs: Deconv
    element: Element


def flipped_filter(w: Array, groups: int) -> Array:
    """ONNX's [ic, oc/g, *k] as the equivalent convolution's [oc, ic/g, *k],
    each kernel flipped."""
    ic, ocg = w.shape[:2]
    kernel = w.shape[2:]
    per_group = w.reshape((groups, ic // groups, ocg) + kernel).swapaxes(1, 2)
    flipped = per_group[(Ellipsis,) + (slice(None, None, -1),) * len(kernel)]
    return np.ascontiguousarray(flipped.reshape((groups * ocg, ic // groups) + kernel))


def dilated_input(x: Array, strides: tuple[int, ...]) -> Array:
    """x with stride − 1 zeros between its pixels on each spatial axis."""
    spatial = x.shape[2:]
    shape = x.shape[:2] + tuple((s - 1) * st + 1 for s, st in zip(spatial, strides, strict=True))
    out = np.zeros(shape, x.dtype)
    out[(slice(None), slice(None)) + tuple(slice(None, None, st) for st in strides)] = x
    return out


def as_conv(p: Deconv, x: Array, kernel: tuple[int, ...]) -> tuple[Array, tuple[int, ...]]:
    """The zero-inserted input, cropped where a pad exceeds the kernel's
    reach, and the equivalent convolution's pads (begins then ends)."""
    g = p.attrs.geometry(kernel)
    extra = p.output_padding or (0,) * len(kernel)
    xi = dilated_input(x, g.strides)
    begins, ends, crop = [], [], [slice(None), slice(None)]
    for i, k in enumerate(kernel):
        reach = g.dilations[i] * (k - 1)
        begin, end = reach - g.begins[i], reach - g.ends[i] + extra[i]
        crop.append(slice(max(0, -begin), xi.shape[2 + i] - max(0, -end)))
        begins.append(max(0, begin))
        ends.append(max(0, end))
    return np.ascontiguousarray(xi[tuple(crop)]), tuple(begins + ends)


def deconv(p: HalfDeconv, x: Array, w: Array, b: Array | None = None) -> Array:
    """The transposed convolution as the chip computes it, rounded to the half type."""
    x, w = f32(x), f32(w)
    groups = p.attrs.attrs.group
    kernel = tuple(w.shape[2:])
    if 1 < groups == x.shape[1] and w.shape[1] == 1:  # depthwise
        return f32(half_rounder(p.element)(float_conv.deconv(p.attrs, x, w, b)))
    xi, pads = as_conv(p.attrs, x, kernel)
    attrs = replace(p.attrs.attrs, strides=(), pads=pads)
    conv = half_conv.HalfConv(attrs, p.element, fold=False)
    return half_conv.conv(conv, xi, flipped_filter(w, groups), b)
