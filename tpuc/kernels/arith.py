"""Integer elementwise arithmetic with requant: Add, Sub, Mul, Concat.

Add/Sub scale each input by its own multiplier and, where the chip rounds
each term (bm168x's bcbinary ADD/SUB), its own rshift, then apply the one
shared rshift (0 in that form) to the sum; Mul multiplies the centered
inputs and requantizes once, Concat requantizes each input to the output's
parameters (a plain copy when that is the identity). See dialects/tpu/ops.py for each op's contract.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpuc.base.numerics import requantize, rounding_rshift, saturate
from tpuc.kernels.arrays import Array, axis_of
from tpuc.kernels.element import Element
from tpuc.kernels.executor import current
from tpuc.kernels.requant import Requant, centered, relu_int, requant_output


@dataclass(frozen=True)
class Eltwise:
    """Add/Sub: per-input multipliers and rshifts (each term rounded on its
    own by `requant.round_mode`; () or all 0: exact terms), then `requant`
    (its one rshift on the sum, Z_out, ReLU, saturation). Mul: `requant`
    with its own multiplier."""

    inputs: tuple[Element, ...]
    requant: Requant
    multipliers: tuple[int, ...] = ()
    rshifts: tuple[int, ...] = ()


@dataclass(frozen=True)
class Concat:
    """Input i is requantized by (multipliers[i], rshifts[i]) into `requant.out`."""

    inputs: tuple[Element, ...]
    multipliers: tuple[int, ...]
    rshifts: tuple[int, ...]
    axis: int
    requant: Requant  # out, round mode and ReLU; its multiplier is unused


def int_centered(x: Array, element: Element) -> Array:
    """q − Z as int64."""
    return centered(x, element, np.int64)


def shifted_output(p: Requant, acc: Array) -> Array:
    """Add/Sub epilogue: the multipliers are per input (already applied), so
    only the one rshift, + Z_out, fused relu and saturation remain."""
    q = rounding_rshift(acc, p.rshift[0], p.round_mode) + p.out.zero_point
    return saturate(relu_int(p.relu, q, p.out), p.out.qmin, p.out.qmax)


def term(p: Eltwise, i: int, x: Array) -> Array:
    """Input i's term: round((q_i − Z_i)·multiplier[i] / 2^rshifts[i])."""
    scaled = int_centered(x, p.inputs[i]) * np.int64(p.multipliers[i])
    shift = p.rshifts[i] if p.rshifts else 0
    return rounding_rshift(scaled, shift, p.requant.round_mode) if shift else scaled


def add(p: Eltwise, *args: Array) -> Array:
    """Σ_i term_i >> rshift (numpy broadcasting)."""
    if len(args) != len(p.multipliers):
        raise ValueError(f"{len(args)} inputs for {len(p.multipliers)} multipliers")
    acc = None
    for i, x in enumerate(args):
        acc = term(p, i, x) if acc is None else acc + term(p, i, x)
    return shifted_output(p.requant, acc)


def sub(p: Eltwise, lhs: Array, rhs: Array) -> Array:
    """(term_0 − term_1) >> rshift: the subtrahend is rounded before its sign
    is applied, as the chip's SUB does."""
    return shifted_output(p.requant, term(p, 0, lhs) - term(p, 1, rhs))


def mul(p: Eltwise, *args: Array) -> Array:
    """Π_i (q_i − Z_i), requantized by the one multiplier and rshift."""
    acc = None
    for x, element in zip(args, p.inputs, strict=True):
        term = int_centered(x, element)
        acc = term if acc is None else acc * term
    return requant_output(p.requant, acc)


def concat(p: Concat, *args: Array) -> Array:
    """Each input requantized into its slice of the output, then relu and
    saturation."""
    out_q = p.requant.out
    axis = axis_of(p.axis, args[0].ndim)
    shape = list(args[0].shape)
    shape[axis] = sum(a.shape[axis] for a in args)
    out = current().empty(tuple(shape))
    start = 0
    parts = zip(args, p.inputs, p.multipliers, p.rshifts, strict=True)
    for x, in_q, m, r in parts:
        if m == 1 and r == 0 and in_q.zero_point == out_q.zero_point:
            q = x
        else:
            q = requantize(int_centered(x, in_q), m, r, p.requant.round_mode) + out_q.zero_point
        part = (slice(None),) * axis + (slice(start, start + x.shape[axis]),)
        out[part] = saturate(relu_int(p.requant.relu, q, out_q), out_q.qmin, out_q.qmax)
        start += x.shape[axis]
    return out
