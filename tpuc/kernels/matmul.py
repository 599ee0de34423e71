"""Exact integer matmul (tpu.MatMul): (q_l − Z_l) @ (q_r − Z_r) + bias,
requantized per last axis (or per tensor). The right operand is an si8
weight (not quantized: Z = 0) or a quantized activation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpuc.base.errors import TpucError
from tpuc.kernels.arrays import Array, f32
from tpuc.kernels.element import Element
from tpuc.kernels.exact import EXACT, exact_cuts
from tpuc.kernels.requant import Requant, centered, requant_output


@dataclass(frozen=True)
class MatMul:
    left: Element
    right: Element
    requant: Requant  # axis -1
    right_transpose: bool = False


def matmul(p: MatMul, x: Array, r: Array, bias: Array | None) -> Array:
    acc = matmul_accumulator(p, x, r)
    if bias is not None:
        acc += np.asarray(bias, np.float64).astype(np.int64)
    return requant_output(p.requant, acc, chip_float=True)


def matmul_accumulator(p: MatMul, x: Array, r: Array) -> Array:
    """The exact int64 product, as float32 matmuls over slices of K whose
    partial sums stay within 2^24, added in int64."""
    lhs = centered(x, p.left, np.float32)
    quantized = p.right.quantized
    rhs = centered(r, p.right, np.float32) if quantized else f32(r)
    if p.right_transpose:
        rhs = np.swapaxes(rhs, -1, -2)
    k = lhs.shape[-1]
    if quantized:  # every term within the two activations' ranges
        cost = np.ones((k, 1), np.float32)
        limit = EXACT / (p.left.term_bound() * p.right.term_bound())
    else:
        cost = np.abs(np.moveaxis(rhs, -2, 0) if rhs.ndim > 1 else rhs).reshape(k, -1)
        limit = EXACT / p.left.term_bound()
    acc = None
    for k0, k1 in exact_cuts(cost, limit):
        if k1 - k0 == 1 and cost[k0].max(initial=0.0) > limit:  # not with 8-bit values
            raise TpucError("operands exceed 8-bit ranges")
        rs = rhs[..., k0:k1, :] if rhs.ndim > 1 else rhs[k0:k1]
        y = np.matmul(lhs[..., k0:k1], rs)
        acc = y.astype(np.int64) if acc is None else acc + y.astype(np.int64)
    return acc
