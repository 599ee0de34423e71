"""Exact integer sums on float32 BLAS.

Integers up to 2^24 are exact in float32, and so is every partial sum of a
dot product whose terms' magnitudes add up to at most 2^24, in whatever
order BLAS adds them. So an integer conv or matmul runs float32 BLAS on
(q − Z) and the operands, cut into chunks of the summed axis whose bound
stays within 2^24, and adds the chunks' results in int64. The bound uses a
filter's actual values: typical filters need one or two chunks, a filter of
all ±127 over K inputs about K/1000 (int8) or K/500 (uint8). A single input
channel whose taps alone exceed the bound is cut further by taps.
"""

from __future__ import annotations

import math

import numpy as np

from tpuc.kernels.arrays import Array

EXACT = 1 << 24  # float32 holds every integer of magnitude <= 2^24

Chunk = tuple[int, int, int, int]  # channels c0:c1 of every group, flat taps t0:t1


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


def accumulate(acc: Array | None, y: Array) -> Array:
    """acc + y in int64 (y: a float32 chunk result, exact integers)."""
    if acc is None:
        return y.astype(np.int64)
    np.add(acc, y, out=acc, casting="unsafe")  # float64 loop: exact
    return acc
