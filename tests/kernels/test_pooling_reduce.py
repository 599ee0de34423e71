"""Float pooling and reductions on records against numpy references (no IR)."""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.kernels import pooling
from tpuc.kernels import reduce as lib
from tpuc.kernels.requant import Relu

RNG = np.random.default_rng(1)
X = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)


def windows(x: np.ndarray, k: int, s: int) -> np.ndarray:
    """Every k×k window at stride s: [..., oh, ow, k, k] (no padding)."""
    v = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(-2, -1))
    return v[..., ::s, ::s, :, :]


def test_max_and_avg_pool_match_window_reductions():
    p = pooling.Pooling((3, 3), (2, 2))
    np.testing.assert_array_equal(pooling.max_pool(p, X), windows(X, 3, 2).max(axis=(-2, -1)))
    np.testing.assert_allclose(
        pooling.avg_pool(p, X), windows(X, 3, 2).mean(axis=(-2, -1)), rtol=1e-6, atol=1e-6
    )


def test_padding_counts_and_relu():
    p = pooling.Pooling((3, 3), (1, 1), (1, 1, 1, 1), count_include_pad=False)
    xp = np.pad(X, [(0, 0), (0, 0), (1, 1), (1, 1)])
    ones = np.pad(np.ones_like(X), [(0, 0), (0, 0), (1, 1), (1, 1)])
    ref = windows(xp, 3, 1).sum(axis=(-2, -1)) / windows(ones, 3, 1).sum(axis=(-2, -1))
    np.testing.assert_allclose(pooling.avg_pool(p, X), ref, rtol=1e-5, atol=1e-6)
    q = pooling.Pooling((7, 6), relu=Relu(True, 0.1))
    np.testing.assert_array_equal(
        pooling.max_pool(q, X), np.clip(X.max(axis=(2, 3), keepdims=True), 0, 0.1)
    )


def test_ceil_mode_adds_a_partial_window():
    p = pooling.Pooling((2, 2), (2, 2), ceil_mode=True)
    assert pooling.max_pool(p, X).shape == (2, 3, 4, 3)


@pytest.mark.parametrize("mode", sorted(lib.REDUCE))
def test_reduce_modes_in_float64(mode):
    x = np.abs(X) + 0.5
    y = lib.reduce(lib.Reduction(mode, (1, -1), False), x)
    assert y.shape == (2, 7) and y.dtype == np.float32
    ref = lib.REDUCE[mode](x.astype(np.float64), (1, 3), False)
    np.testing.assert_array_equal(y, ref.astype(np.float32))


def test_reduce_all_axes_and_unknown_mode():
    assert lib.reduce(lib.Reduction("ReduceSum"), X).shape == (1, 1, 1, 1)
    with pytest.raises(ValueError, match="unknown reduce mode"):
        lib.reduce(lib.Reduction("ReduceFoo"), X)


def test_arg_and_topk():
    x = np.array([[1.0, 3.0, 3.0, 0.0]], np.float32)
    assert lib.arg(lib.Arg("ArgMax", 1), x).tolist() == [[1.0]]
    assert lib.arg(lib.Arg("ArgMax", -1, False, True), x).tolist() == [2.0]
    assert lib.arg(lib.Arg("ArgMin", 1, False), x).tolist() == [3.0]
    values, idx = lib.topk(lib.TopK(-1, 2), x)
    assert values.tolist() == [[3.0, 3.0]] and idx.tolist() == [[1.0, 2.0]]
    with pytest.raises(ValueError, match="K=5"):
        lib.topk(lib.TopK(1, 5), x)
