"""Exact integer convolutions (tpu.Conv2D, tpu.Deconv) on float32 BLAS.

The sums are Σ (q_in − Z_in)·q_w + bias per output, exactly, in int64, as
chunks of input channels run through the float32 conv plans (see `exact`);
the `Requant` epilogue (per output channel, axis 1) follows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tpuc.kernels.arrays import Array, f32
from tpuc.kernels.conv_plan import ConvGeometry, ConvPlan, deconv_forward
from tpuc.kernels.element import Element
from tpuc.kernels.exact import accumulate, conv_chunks
from tpuc.kernels.executor import Executor, current
from tpuc.kernels.requant import Requant, centered, requant_output


@dataclass(frozen=True)
class Conv:
    """An integer (transposed) convolution: its geometry, the input's
    quantization, the epilogue; `output_padding` for a transposed one."""

    geometry: ConvGeometry
    input: Element
    requant: Requant
    output_padding: tuple[int, ...] = ()


def channel_slice(a: Array, groups: int, c0: int, c1: int) -> Array:
    """Channels c0:c1 of every group of axis 1 of `a` (all of it when whole)."""
    per_group = a.shape[1] // groups
    if c0 == 0 and c1 == per_group:
        return a
    if groups == 1:
        return a[:, c0:c1]
    split = a.reshape((a.shape[0], groups, per_group) + a.shape[2:])[:, :, c0:c1]
    return split.reshape((a.shape[0], groups * (c1 - c0)) + a.shape[2:])


def tap_slice(w: Array, t0: int, t1: int) -> Array:
    """w with every flat kernel tap outside t0:t1 zeroed (a copy), or w."""
    taps = math.prod(w.shape[2:])
    if t0 == 0 and t1 == taps:
        return w
    flat = np.zeros(w.shape[:2] + (taps,), np.float32)
    flat[:, :, t0:t1] = w.reshape(w.shape[:2] + (taps,))[:, :, t0:t1]
    return flat.reshape(w.shape)


def add_bias(acc: Array, bias: Array | None) -> Array:
    if bias is not None:
        acc += np.asarray(bias, np.float64).astype(np.int64).reshape((-1,) + (1,) * (acc.ndim - 2))
    return acc


def chunk_plan(rt: Executor, g: ConvGeometry, x_shape, w_shape) -> ConvPlan:
    """The float conv plan (no ReLU) of one chunk shape (kept by the executor)."""
    return rt.memo(
        ("int-conv", g, x_shape, w_shape), lambda: ConvPlan(g, None, x_shape, w_shape, rt)
    )


def conv_accumulator(p: Conv, x: Array, w: Array, bias: Array | None) -> Array:
    """Σ (q_in − Z_in)·q_w + bias over each output, exactly, as int64."""
    xc = centered(x, p.input, np.float32)
    w = f32(w)
    groups = p.geometry.group
    oc, cg = w.shape[:2]
    w_abs = np.abs(w).reshape(groups, oc // groups, cg, -1)
    rt, acc = current(), None
    for c0, c1, t0, t1 in conv_chunks(w_abs, p.input.term_bound()):
        xs = channel_slice(xc, groups, c0, c1)
        ws = np.ascontiguousarray(tap_slice(w[:, c0:c1], t0, t1))
        acc = accumulate(acc, chunk_plan(rt, p.geometry, xs.shape, ws.shape).run(xs, ws, None, rt))
    return add_bias(acc, bias)


def deconv_accumulator(p: Conv, x: Array, w: Array, bias: Array | None) -> Array:
    """The transposed conv's Σ (q_in − Z_in)·q_w + bias, exactly, as int64
    (each output sums the products of all taps that reach it)."""
    xc = centered(x, p.input, np.float32)
    w = f32(w)
    groups = p.geometry.group
    ic, m = w.shape[:2]
    cg = ic // groups
    w_abs = np.abs(w).reshape(groups, cg, m, -1).transpose(0, 2, 1, 3)
    acc = None
    for c0, c1, t0, t1 in conv_chunks(w_abs, p.input.term_bound()):
        xs = channel_slice(xc, groups, c0, c1)
        ws = np.ascontiguousarray(tap_slice(channel_slice(w[None], groups, c0, c1)[0], t0, t1))
        acc = accumulate(acc, deconv_forward(xs, ws, p.geometry, p.output_padding))
    return add_bias(acc, bias)


def conv(p: Conv, x: Array, w: Array, bias: Array | None) -> Array:
    """tpu.Conv2D in integers (or with a float epilogue)."""
    return requant_output(p.requant, conv_accumulator(p, x, w, bias), chip_float=True)


def deconv(p: Conv, x: Array, w: Array, bias: Array | None) -> Array:
    """tpu.Deconv in integers (or with a float epilogue)."""
    return requant_output(p.requant, deconv_accumulator(p, x, w, bias), chip_float=True)
