"""Float32 convolution, transposed convolution and matmul on records, over
the BLAS plans of `conv_plan` (shared with the exact integer convolutions).
The filter's spatial shape comes from the weight array, so the records hold
only the op's attributes; plans are kept by the executor per record and
shapes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpuc.kernels.arrays import Array, f32, relu
from tpuc.kernels.conv_plan import ConvGeometry, ConvPlan, deconv_forward
from tpuc.kernels.executor import current
from tpuc.kernels.requant import NO_RELU, Relu


@dataclass(frozen=True)
class ConvAttrs:
    """Strides, dilations, pads (begins then ends), group; empty: ONNX
    defaults. `relu`: the fused ReLU."""

    strides: tuple[int, ...] = ()
    dilations: tuple[int, ...] = ()
    pads: tuple[int, ...] = ()
    group: int = 1
    relu: Relu = NO_RELU

    def geometry(self, kernel: tuple[int, ...]) -> ConvGeometry:
        return ConvGeometry.of(kernel, self.strides, self.dilations, self.pads, self.group)

    def relu_limit(self) -> float | None:
        """The fused ReLU as the conv plans take it: None, or its limit (< 0: none)."""
        if not self.relu.on:
            return None
        return -1.0 if self.relu.limit is None else float(self.relu.limit)


@dataclass(frozen=True)
class Deconv:
    attrs: ConvAttrs
    output_padding: tuple[int, ...] = ()


@dataclass(frozen=True)
class MatMul:
    """x @ r (r's last two axes swapped when `right_transpose`) + bias."""

    right_transpose: bool = False
    relu: Relu = NO_RELU


def conv_plan(p: ConvAttrs, x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> ConvPlan:
    rt = current()
    return rt.memo(
        ("float-conv", p, x_shape, w_shape),
        lambda: ConvPlan(p.geometry(tuple(w_shape[2:])), p.relu_limit(), x_shape, w_shape, rt),
    )


def conv(p: ConvAttrs, x: Array, w: Array, b: Array | None = None) -> Array:
    x, w = f32(x), f32(w)
    return conv_plan(p, x.shape, w.shape).run(x, w, None if b is None else f32(b), current())


def fused(r: Relu, y: Array) -> Array:
    return relu(y, r.limit) if r.on else y


def deconv(p: Deconv, x: Array, w: Array, b: Array | None = None) -> Array:
    w = f32(w)
    n = w.ndim - 2
    g = p.attrs.geometry(tuple(w.shape[2:]))
    y = deconv_forward(x, w, g, p.output_padding or (0,) * n)
    if b is not None:
        y += f32(b).reshape((-1,) + (1,) * (y.ndim - 2))
    return fused(p.attrs.relu, y)


def matmul(p: MatMul, x: Array, r: Array, b: Array | None = None) -> Array:
    r = f32(r)
    if p.right_transpose:
        r = np.swapaxes(r, -1, -2)
    y = np.matmul(np.ascontiguousarray(f32(x)), np.ascontiguousarray(r))
    if b is not None:
        y += f32(b)
    return fused(p.relu, f32(y))
