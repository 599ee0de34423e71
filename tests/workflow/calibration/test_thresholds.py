"""Threshold methods on hand-made distributions with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.base.errors import TpucError
from tpuc.workflow.calibration.stats import TensorStats
from tpuc.workflow.calibration.thresholds import (
    METHODS,
    kl_cuts,
    kl_divergences,
    kl_threshold,
    threshold,
)

BINS = 2048


def make_stats(x: np.ndarray, bins: int = BINS, name: str = "t") -> TensorStats:
    """TensorStats of one array, histogram binned exactly as TPU-MLIR does:
    width = absmax/(bins-1), bucket floor(|v|/width + 0.5), zeros left out."""
    x = np.asarray(x, dtype=np.float64).ravel()
    finite = x[np.isfinite(x)]
    s = TensorStats(name=name, count=finite.size, nonfinite=x.size - finite.size)
    if finite.size == 0:
        return s
    s.min, s.max = float(finite.min()), float(finite.max())
    s.zeros = int(np.count_nonzero(finite == 0))
    s.total, s.total_sq = float(finite.sum()), float((finite * finite).sum())
    s.total_abs_dev = float(np.abs(finite - finite.mean()).sum())
    absmax = float(np.abs(finite).max())
    s.hist = np.zeros(bins, np.int64)
    if absmax > 0:
        s.width = absmax / (bins - 1)
        nz = np.abs(finite[finite != 0])
        idx = np.minimum(np.floor(nz / s.width + 0.5).astype(np.int64), bins - 1)
        s.hist = np.bincount(idx, minlength=bins).astype(np.int64)
    return s


def test_registry_names_and_flags():
    assert set(METHODS) == {"kl", "max", "percentile9999", "mse", "aciq_gauss", "aciq_laplace"}
    assert METHODS["kl"].needs_histogram and not METHODS["kl"].needs_moments
    assert METHODS["aciq_gauss"].needs_moments and not METHODS["aciq_gauss"].needs_histogram
    assert not METHODS["max"].needs_histogram
    assert all(m.help and m.name == k for k, m in METHODS.items())


def test_max_is_absmax():
    s = make_stats(np.array([0.5, -3.25, 2.0, 0.0, np.nan]))
    t = threshold("max", s)
    assert t == 3.25 and type(t) is float


# ---------------------------------------------------------------- percentile


def test_percentile_counts_zeros_in_bucket_zero():
    # 500k zeros, grid values k*w (k=1..500, 1000 each), 50 outliers at 2047*w:
    # 0.01% of 1_000_050 values is 100.005, and only the 50 outliers lie
    # beyond bucket 500, so k = 500 and T = 500.5*w. Without the zeros in the
    # count the answer would be the outlier bucket.
    w = 0.01
    grid = np.repeat(np.arange(1, 501) * w, 1000)
    x = np.concatenate([np.zeros(500_000), grid, np.full(50, 2047 * w)])
    s = make_stats(x)
    assert s.width == pytest.approx(w)
    t = threshold("percentile9999", s)
    assert t == pytest.approx(500.5 * w)
    q = np.quantile(np.abs(x), 0.9999, method="inverted_cdf")
    assert q == pytest.approx(500 * w) and abs(t - q) <= s.width / 2 + 1e-12


def test_percentile_bucket_zero_and_clamp():
    # 99.99% zeros: bucket 0 -> w/2.
    x = np.concatenate([np.zeros(100_000), [1.0]])
    s = make_stats(x)
    assert threshold("percentile9999", s) == pytest.approx(s.width / 2)
    # everything in the last bucket: (2047.5)*w clamps to absmax.
    s = make_stats(np.full(10, -4.0))
    assert threshold("percentile9999", s) == 4.0


# ---------------------------------------------------------------- KL


def test_kl_cuts():
    assert kl_cuts(2048) == [128 * k for k in range(1, 17)]
    assert kl_cuts(300) == [128, 256, 300]
    assert kl_cuts(100) == [100]


def test_kl_book_flat_vector():
    hist = np.zeros(BINS, np.int64)
    hist[:100] = 1000
    assert kl_threshold(hist, 0.001) == pytest.approx(0.1285)
    kls = kl_divergences(hist)
    assert kls[128] == pytest.approx(0.0, abs=1e-12)


def test_kl_book_exponential_vector():
    j = np.arange(BINS)
    hist = np.round(1e6 * np.exp(-j / 60)).astype(np.int64)
    hist[2047] += 5
    kls = kl_divergences(hist)
    assert min(kls, key=kls.get) == 640
    assert kl_threshold(hist, 0.01) == pytest.approx(6.405)
    book = {128: 0.368, 256: 0.0443, 512: 0.00079, 640: 0.00035, 1024: 0.00073, 2048: 0.0029}
    for cut, value in book.items():
        assert kls[cut] == pytest.approx(value, rel=0.03), cut


def test_kl_flat_full_range_clamps_to_absmax():
    # a flat histogram over every bucket: KL = 0 only at the full cut 2048,
    # whose (2048.5)*w exceeds absmax and is clamped.
    x = np.tile(np.arange(1, BINS) / (BINS - 1), 50)
    s = make_stats(x)
    assert kl_threshold(s.hist, s.width) > s.absmax
    assert threshold("kl", s) == s.absmax


def test_kl_gaussian_with_heavy_tail_clips():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(200_000), rng.uniform(-40, 40, 20)])
    s = make_stats(x)
    t = threshold("kl", s)
    assert 2.0 < t < 0.25 * s.absmax


# ---------------------------------------------------------------- MSE


def brute_force_mse(s: TensorStats) -> tuple[float, np.ndarray]:
    """Direct evaluation of the MSE objective at every candidate i*width."""
    counts = s.hist.astype(np.float64)
    counts[0] += s.zeros
    centres = np.arange(counts.size) * s.width
    errs = []
    for t in centres[1:]:
        over = centres > t
        clip = np.sum(counts[over] * (centres[over] - t) ** 2)
        rnd = (t / 127) ** 2 / 12 * counts[~over].sum()
        errs.append(clip + rnd)
    errs = np.array(errs)
    return float(centres[1 + int(np.argmin(errs))]), errs


def test_mse_uniform_keeps_full_range():
    rng = np.random.default_rng(1)
    s = make_stats(rng.uniform(-1, 1, 100_000))
    t = threshold("mse", s)
    assert t > 0.98 * s.absmax
    assert t == pytest.approx(brute_force_mse(s)[0])


def test_mse_gaussian_with_outliers_clips():
    rng = np.random.default_rng(2)
    # squared error is outlier-sensitive: the bulk must be large enough that
    # the rounding noise of T = absmax outweighs clipping the two outliers.
    x = np.concatenate([rng.standard_normal(1_000_000), [20.0, -18.0]])
    s = make_stats(x)
    t = threshold("mse", s)
    assert 2.0 < t < 0.3 * s.absmax
    best, errs = brute_force_mse(s)
    idx = int(round(t / s.width)) - 1
    assert errs[idx] == pytest.approx(errs.min(), rel=1e-9)
    assert t == pytest.approx(best, rel=1e-3)


# ---------------------------------------------------------------- ACIQ


def test_aciq_gauss_on_normal():
    x = np.random.default_rng(3).standard_normal(400_000)
    s = make_stats(x)
    assert threshold("aciq_gauss", s) == pytest.approx(3.92, rel=0.03)


def test_aciq_laplace_on_laplace():
    x = np.random.default_rng(4).laplace(0.0, 1.0, 400_000)
    s = make_stats(x)
    assert threshold("aciq_laplace", s) == pytest.approx(9.89, rel=0.03)


def test_aciq_non_negative_uses_7_bit_constants():
    x = np.abs(np.random.default_rng(5).standard_normal(400_000))
    s = make_stats(x)
    expected = abs(x.mean()) + 3.61 * x.std()
    assert threshold("aciq_gauss", s) == pytest.approx(expected, rel=1e-6)
    b = np.abs(x - x.mean()).mean()
    assert threshold("aciq_laplace", s) == pytest.approx(min(x.mean() + 8.64 * b, x.max()))


def test_aciq_clamps_to_absmax():
    s = make_stats(np.random.default_rng(6).uniform(-1, 1, 10_000))
    assert threshold("aciq_gauss", s) == s.absmax  # 3.92*0.577 > 1
    assert threshold("aciq_laplace", s) == s.absmax


# ---------------------------------------------------------------- guards


@pytest.mark.parametrize("method", sorted(METHODS))
def test_all_zero_or_empty_tensor(method):
    assert threshold(method, make_stats(np.zeros(64))) == 1e-5
    assert threshold(method, make_stats(np.array([np.nan, np.inf]))) == 1e-5


def test_unknown_method_lists_known():
    with pytest.raises(TpucError, match="unknown calibration method 'foo'.*kl.*mse"):
        threshold("foo", make_stats(np.ones(4)))


def test_missing_histogram_is_an_error():
    s = make_stats(np.ones(4))
    s.hist = None
    with pytest.raises(TpucError, match="tensor 't'.*histogram"):
        threshold("kl", s)
    assert threshold("max", s) == 1.0
