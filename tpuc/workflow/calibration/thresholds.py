"""Symmetric int8 thresholds from a tensor's calibration statistics.

These are the `--cali_method` choices of TPU-MLIR's run_calibration.py (`kl`,
`max`, `percentile9999`, `mse`, `aciq_gauss`, `aciq_laplace`): each reads a
`TensorStats` and returns the T that maps to int8 127. Methods are registered
by name in `METHODS` (the CLI lists and validates them from there), and
`threshold` applies the guards every method shares, so a method only handles
a tensor with finite, non-zero values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpuc.base.errors import TpucError
from tpuc.base.registry import Registry
from tpuc.workflow.calibration.stats import TensorStats

ZERO_TENSOR_THRESHOLD = 1e-5  # TPU-MLIR's threshold for an all-zero tensor
KL_EPSILON = 1e-12  # Q where P > 0 but the merged level is empty
PERCENTILE = 0.9999

# ACIQ (Banner et al., arXiv 1810.05723) clipping constants alpha/scale for
# 8 bits, and for 7 bits: a non-negative tensor uses only int8's 128
# non-negative levels.
ACIQ_GAUSS = {8: 3.92, 7: 3.61}  # alpha / std
ACIQ_LAPLACE = {8: 9.89, 7: 8.64}  # alpha / b, b = mean |x - mean|


@dataclass(frozen=True)
class Method:
    """One threshold method and what it needs from the statistics pass."""

    name: str
    fn: Callable[[TensorStats], float]
    needs_histogram: bool
    needs_moments: bool  # mean, std, mean_abs_dev
    help: str


METHODS: Registry[str, Method] = Registry("calibration methods")


def register(name: str, *, histogram: bool, moments: bool = False, help: str):
    """Decorator: add `fn(stats) -> float` to METHODS under `name`."""

    def wrap(fn: Callable[[TensorStats], float]) -> Callable[[TensorStats], float]:
        METHODS.add(name, Method(name, fn, histogram, moments, help))
        return fn

    return wrap


def threshold(method: str, stats: TensorStats) -> float:
    """The symmetric threshold of `stats` by `method`, in (0, absmax].

    An empty or all-zero tensor gets 1e-5 (the caller warns about it); a
    result above absmax would only waste int8 range, so it is clamped."""
    entry = METHODS.get(method)
    if entry is None:
        raise TpucError(
            f"unknown calibration method '{method}' (known: {', '.join(sorted(METHODS))})"
        )
    absmax = stats.absmax
    if stats.count == 0 or absmax == 0.0:
        return ZERO_TENSOR_THRESHOLD
    if entry.needs_histogram and (stats.hist is None or not stats.width > 0.0):
        raise TpucError(f"tensor '{stats.name}': method '{method}' needs a histogram")
    value = float(entry.fn(stats))
    if not value > 0.0:  # also NaN: fall back to the full range
        return float(absmax)
    return float(min(value, absmax))


# ---------------------------------------------------------------- KL (TensorRT)


def kl_cuts(bins: int, levels: int = 128) -> list[int]:
    """Candidate cut points: multiples of `levels` below `bins`, then `bins`.

    With TPU-MLIR's 2048 bins these are 128, 256, ..., 2048 (the full range is
    a candidate, unlike the book's loop). A histogram shorter than `levels`
    has the single cut `bins`."""
    return [*range(levels, bins, levels), bins]


def _kl_at(hist: np.ndarray, cut: int, levels: int) -> float:
    """KL(P || Q) for one cut: P keeps the outliers in its last bin, Q is
    hist[:cut] merged into `levels` groups and spread back over P's non-empty
    bins. Groups hold cut // levels bins; the last group takes any remainder."""
    head = hist[:cut].astype(np.float64)
    p = head.copy()
    p[-1] += float(hist[cut:].sum())
    step = max(cut // levels, 1)
    group = np.minimum(np.arange(cut) // step, levels - 1)
    nonzero = p > 0
    totals = np.bincount(group, weights=head)
    filled = np.bincount(group, weights=nonzero.astype(np.float64))
    q = np.where(nonzero, totals[group] / np.maximum(filled[group], 1.0), 0.0)
    p /= p.sum()
    q_sum = q.sum()
    if q_sum > 0:
        q /= q_sum
    q[nonzero & (q == 0)] = KL_EPSILON
    return float(np.sum(p[nonzero] * np.log(p[nonzero] / q[nonzero])))


def kl_divergences(hist: np.ndarray, levels: int = 128) -> dict[int, float]:
    """KL divergence at every cut of `kl_cuts`, in cut order."""
    hist = np.asarray(hist)
    if hist.ndim != 1 or hist.size == 0 or not hist.sum() > 0:
        raise TpucError("KL calibration: the histogram is empty")
    return {cut: _kl_at(hist, cut, levels) for cut in kl_cuts(hist.size, levels)}


def kl_threshold(hist: np.ndarray, width: float, levels: int = 128) -> float:
    """TensorRT's KL threshold: (i + 0.5) * width for the cut i of least KL
    (the first one on ties). May exceed absmax by half a bin at the full cut;
    `threshold` clamps it."""
    kls = kl_divergences(hist, levels)
    cuts = list(kls)
    best = cuts[int(np.argmin(list(kls.values())))]
    return (best + 0.5) * width


@register("kl", histogram=True, help="TensorRT KL-divergence search over 128-bin cuts")
def _kl(stats: TensorStats) -> float:
    return kl_threshold(stats.hist, stats.width)


# ---------------------------------------------------------------- range based


@register("max", histogram=False, help="the absolute maximum: no clipping")
def _max(stats: TensorStats) -> float:
    return stats.absmax


def _counts_with_zeros(stats: TensorStats) -> np.ndarray:
    """The |x| histogram with the exact zeros put back into bucket 0."""
    counts = np.asarray(stats.hist, dtype=np.float64).copy()
    counts[0] += stats.zeros
    return counts


@register("percentile9999", histogram=True, help="the 99.99th percentile of |x|, zeros included")
def _percentile(stats: TensorStats) -> float:
    """Smallest bucket k whose cumulative count reaches 99.99% of the values.

    Bucket k holds |x| in [(k-0.5)w, (k+0.5)w), so the threshold is its upper
    edge (k+0.5)w: the whole bucket, hence the percentile, stays unclipped
    (k == 0 gives w/2; `threshold` clamps to absmax)."""
    cum = np.cumsum(_counts_with_zeros(stats))
    k = int(np.searchsorted(cum, PERCENTILE * stats.count, side="left"))
    k = min(k, cum.size - 1)
    return (k + 0.5) * stats.width


def _suffix_after(values: np.ndarray) -> np.ndarray:
    """out[i] = sum(values[i+1:]), summed from the tail (no cancellation)."""
    rev = np.cumsum(values[::-1])[::-1]
    return np.append(rev[1:], 0.0)


def mse_errors(counts: np.ndarray) -> np.ndarray:
    """Expected squared int8 error (in width^2 units) for T = i*width,
    i = 1..len(counts)-1, values at bucket centres j*width.

    err(i) = sum_{j>i} c_j (j - i)^2  +  (i/127)^2 / 12 * sum_{j<=i} c_j:
    clipping of values beyond T plus uniform rounding noise of step T/127 for
    the rest. The clipping sum expands into three suffix sums, so all
    candidates cost O(bins)."""
    c = np.asarray(counts, dtype=np.float64)
    j = np.arange(c.size, dtype=np.float64)
    s0, s1, s2 = _suffix_after(c), _suffix_after(c * j), _suffix_after(c * j * j)
    i = j[1:]
    clip = np.maximum(s2[1:] - 2.0 * i * s1[1:] + i * i * s0[1:], 0.0)
    below = np.cumsum(c)[1:]
    return clip + (i / 127.0) ** 2 / 12.0 * below


@register("mse", histogram=True, help="least expected squared int8 error over bucket centres")
def _mse(stats: TensorStats) -> float:
    # exact zeros quantize exactly at any threshold: they add no error
    counts = np.asarray(stats.hist)
    if counts.size < 2:
        return stats.absmax
    best = int(np.argmin(mse_errors(counts))) + 1
    return best * stats.width


# ---------------------------------------------------------------- ACIQ


def _aciq_bits(stats: TensorStats) -> int:
    return 7 if stats.min >= 0 else 8


@register("aciq_gauss", histogram=False, moments=True, help="ACIQ Gaussian: |mean| + 3.92*std")
def _aciq_gauss(stats: TensorStats) -> float:
    return abs(stats.mean) + ACIQ_GAUSS[_aciq_bits(stats)] * stats.std


@register(
    "aciq_laplace",
    histogram=False,
    moments=True,
    help="ACIQ Laplace: |mean| + 9.89*mean_abs_dev",
)
def _aciq_laplace(stats: TensorStats) -> float:
    return abs(stats.mean) + ACIQ_LAPLACE[_aciq_bits(stats)] * stats.mean_abs_dev
