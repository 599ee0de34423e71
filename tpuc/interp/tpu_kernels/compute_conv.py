"""Exact integer convolutions (tpu.Conv2D, tpu.Deconv) on float32 BLAS.

Integers up to 2^24 are exact in float32, and so is every partial sum of a
dot product whose terms' magnitudes add up to at most 2^24, in whatever
order BLAS adds them. So the integer conv runs the fast float32 TOP conv
kernels on (q − Z_in) and the si8 filter, cut into chunks of input channels
for which max|q − Z_in| · Σ|q_w| (per output channel) stays within 2^24, and
adds the chunks' results in int64. The bound uses the filter's actual
values: typical filters need one or two chunks, a filter of all ±127 over
K inputs about K/1000 (int8) or K/500 (uint8). A single channel whose taps
alone exceed the bound is cut further by taps (the other taps zeroed).

`conv_accumulator`/`deconv_accumulator` are the exact int64 sums that the
kernels then requantize per output channel (axis 1).
"""

from __future__ import annotations

import math

import numpy as np

from tpuc.dialects import tpu
from tpuc.interp.kernels.conv import ConvPlan, deconv
from tpuc.interp.kernels.executor import current
from tpuc.interp.kernels.registry import Array, f32
from tpuc.interp.tpu_kernels.registry import centered, in_quant, requant_output, tpu_kernel
from tpuc.qparams import QuantParams

EXACT = 1 << 24  # float32 holds every integer of magnitude <= 2^24

Chunk = tuple[int, int, int, int]  # channels c0:c1 of every group, flat taps t0:t1


class Bare:
    """An op as the float kernels see it for an integer accumulator: its
    geometry, without the fused ReLU (the integer epilogue applies that)."""

    def __init__(self, op):
        self.op = op

    def value(self, key: str):
        return None if key == "do_relu" else self.op.value(key)


def term_bound(quant: QuantParams) -> int:
    """The largest |q − Z| a tensor of these parameters can hold."""
    return max(quant.qmax - quant.zero_point, quant.zero_point - quant.qmin)


def exact_cuts(cost: Array, limit: float) -> list[tuple[int, int]]:
    """Equal consecutive row ranges of `cost` ([K, P]: bounds of |term| per
    row and output column) whose column sums stay within `limit`, as few as
    it takes; rows above the limit on their own end up in one-row ranges."""
    rows, pieces = cost.shape[0], 1
    if rows == 0:
        return [(0, 0)]
    while True:
        size = -(-rows // pieces)
        starts = np.arange(0, rows, size)
        worst = np.add.reduceat(cost, starts, axis=0, dtype=np.float64).max(initial=0.0)
        if worst <= limit or size == 1:
            return [(int(s), min(int(s) + size, rows)) for s in starts]
        pieces = max(pieces + 1, math.ceil(pieces * worst / limit))


def conv_chunks(w_abs: Array, bound: int) -> list[Chunk]:
    """Chunks of a filter given as |q_w| [G, M, CG, T] (groups, output
    channels per group, input channels per group, taps) for inputs with
    |q − Z| <= bound."""
    groups, m, cg, taps = w_abs.shape
    limit = EXACT / bound
    cost = w_abs.sum(axis=3).transpose(2, 0, 1).reshape(cg, groups * m)  # exact: < 2^24
    chunks: list[Chunk] = []
    for c0, c1 in exact_cuts(cost, limit):
        if c1 - c0 > 1 or cost[c0].max(initial=0.0) <= limit:
            chunks.append((c0, c1, 0, taps))
            continue
        tap_cost = w_abs[:, :, c0, :].reshape(groups * m, taps).T
        chunks.extend((c0, c1, t0, t1) for t0, t1 in exact_cuts(tap_cost, limit))
    return chunks


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


def accumulate(acc: Array | None, y: Array) -> Array:
    """acc + y in int64 (y: a float32 chunk result, exact integers)."""
    if acc is None:
        return y.astype(np.int64)
    np.add(acc, y, out=acc, casting="unsafe")  # float64 loop: exact
    return acc


def add_bias(acc: Array, bias: Array | None) -> Array:
    if bias is not None:
        acc += np.asarray(bias, np.float64).astype(np.int64).reshape((-1,) + (1,) * (acc.ndim - 2))
    return acc


def conv_plan(rt, op, bare: Bare, x_shape, w_shape) -> ConvPlan:
    """The TOP conv plan of one chunk shape (kept by the executor)."""
    return rt.memo(
        ("tpu-int-conv", op, x_shape, w_shape), lambda: ConvPlan(bare, x_shape, w_shape, rt)
    )


def conv_accumulator(op, x: Array, w: Array, bias: Array | None) -> Array:
    """Σ (q_in − Z_in)·q_w + bias over each output, exactly, as int64."""
    xc = centered(x, in_quant(op), np.float32)
    w = f32(w)
    groups = int(op.value("group") or 1)
    oc, cg = w.shape[:2]
    w_abs = np.abs(w).reshape(groups, oc // groups, cg, -1)
    rt, bare, acc = current(), Bare(op), None
    for c0, c1, t0, t1 in conv_chunks(w_abs, term_bound(in_quant(op))):
        xs = channel_slice(xc, groups, c0, c1)
        ws = np.ascontiguousarray(tap_slice(w[:, c0:c1], t0, t1))
        acc = accumulate(acc, conv_plan(rt, op, bare, xs.shape, ws.shape).run(xs, ws, None, rt))
    return add_bias(acc, bias)


def deconv_accumulator(op, x: Array, w: Array, bias: Array | None) -> Array:
    """The transposed conv's Σ (q_in − Z_in)·q_w + bias, exactly, as int64
    (each output sums the products of all taps that reach it)."""
    xc = centered(x, in_quant(op), np.float32)
    w = f32(w)
    groups = int(op.value("group") or 1)
    ic, m = w.shape[:2]
    cg = ic // groups
    w_abs = np.abs(w).reshape(groups, cg, m, -1).transpose(0, 2, 1, 3)
    bare, acc = Bare(op), None
    for c0, c1, t0, t1 in conv_chunks(w_abs, term_bound(in_quant(op))):
        xs = channel_slice(xc, groups, c0, c1)
        ws = np.ascontiguousarray(tap_slice(channel_slice(w[None], groups, c0, c1)[0], t0, t1))
        acc = accumulate(acc, deconv(bare, [xs, ws, None]))
    return add_bias(acc, bias)


@tpu_kernel(tpu.Conv2DOp)
def conv(op, args: list[Array | None]) -> Array:
    return requant_output(op, conv_accumulator(op, *args))


@tpu_kernel(tpu.DeconvOp)
def deconv_int(op, args: list[Array | None]) -> Array:
    return requant_output(op, deconv_accumulator(op, *args))
