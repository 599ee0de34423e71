"""Weight equalization (`run_calibration.py --we`): cross-layer equalization
of consecutive linear layers (Nagel et al., arXiv 1906.04721).

For a pair y = W2·f(W1·x + b1) with f positive-homogeneous (ReLU, leaky
ReLU, PReLU, or nothing), f(z/s) = f(z)/s for s > 0, so dividing output
channel c of W1 and b1 by s_c and multiplying the input channel c of W2 by
s_c keeps the float function. s_c = sqrt(r1_c / r2_c), r = the channel's
weight abs-max, makes both ranges sqrt(r1_c·r2_c): no channel is left with
a range far below its layer's, which per-tensor scales round away. As in
TPU-MLIR, pairs are equalized in turn until the weights stop moving, so a
layer in the middle of a chain settles between its neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import top
from tpuc.ir.weights import WeightStore
from tpuc.workflow.calibration.linear import Linear, users

POSITIVE_HOMOGENEOUS = (top.ReluOp, top.LeakyReluOp, top.PReluOp)
"""Activations with f(x/s) = f(x)/s for s > 0 (a bounded ReLU is not one)."""

TINY = 1e-6  # channel ranges below this are dead channels: left alone
MAX_ROUNDS = 50
TOLERANCE = 1e-4  # relative change of the weights below which a round stops


@dataclass
class Pair:
    """Two layers the equalization may rescale, and the activation between."""

    first: Linear
    second: Linear

    @property
    def label(self) -> str:
        return f"{self.first.name} -> {self.second.name}"


def _bounded(op: Operation) -> bool:
    limit = op.value("relu_limit")
    return bool(op.value("do_relu")) and limit is not None and limit >= 0


def _next_linear(first: Linear, store: WeightStore) -> Linear | None:
    """The one layer reading `first`'s output, through at most one
    positive-homogeneous activation; None when anything else reads it."""
    if _bounded(first.op):
        return None
    readers = users(first.op.results[0])
    if len(readers) != 1:
        return None
    reader = readers[0]
    if isinstance(reader, POSITIVE_HOMOGENEOUS):
        if isinstance(reader, top.ReluOp) and (reader.value("relu_limit") or -1) >= 0:
            return None
        if isinstance(reader, top.PReluOp) and reader.operands[0] is not first.op.results[0]:
            return None
        readers = users(reader.results[0])
        if len(readers) != 1:
            return None
        reader = readers[0]
    second = Linear.of(reader, store)
    if second is None or reader.operands[0].owner not in (first.op, *_between(first)):
        return None
    if second.in_channels() != first.out_channels:
        return None
    return second


def _between(first: Linear) -> list[Operation]:
    return [op for op in users(first.op.results[0]) if isinstance(op, POSITIVE_HOMOGENEOUS)]


def find_pairs(ops, store: WeightStore) -> list[Pair]:
    """Every pair of consecutive layers equalization may rescale, in order."""
    pairs = []
    for op in ops:
        first = Linear.of(op, store)
        if first is None:
            continue
        second = _next_linear(first, store)
        if second is not None:
            pairs.append(Pair(first, second))
    return pairs


def equalization_scales(r1: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """s_c = sqrt(r1_c / r2_c); 1 where either range is (near) zero."""
    r1, r2 = np.asarray(r1, np.float64), np.asarray(r2, np.float64)
    live = (r1 > TINY) & (r2 > TINY)
    return np.where(live, np.sqrt(np.where(live, r1, 1.0) / np.where(live, r2, 1.0)), 1.0)


def equalize_pair(pair: Pair) -> float:
    """Rescale one pair in place; the relative change of its weights."""
    first, second = pair.first, pair.second
    rows = first.out_major().astype(np.float64)
    w2 = second.weight.astype(np.float64)
    slices = second.in_slices(rows.shape[0])
    r1 = np.abs(rows).max(axis=1)
    r2 = np.array([np.abs(w2[s]).max() for s in slices])
    scales = equalization_scales(r1, r2)
    new_rows = rows / scales[:, None]
    for c, s in enumerate(slices):
        w2[s] *= scales[c]
    before = np.linalg.norm(rows) + np.linalg.norm(second.weight)
    change = np.linalg.norm(new_rows - rows) + np.linalg.norm(w2 - second.weight)
    first.set_out_major(new_rows)
    second.weight = w2
    bias = first.bias
    if bias is not None:
        first.set_bias(bias / scales)
    return float(change / before) if before > 0 else 0.0


def equalize(ops, store: WeightStore) -> list[Pair]:
    """Equalize every pair among `ops` (in place in `store`); the pairs."""
    pairs = find_pairs(list(ops), store)
    for _ in range(MAX_ROUNDS):
        if max((equalize_pair(p) for p in pairs), default=0.0) < TOLERANCE:
            break
    return pairs
