"""Rounding and fake quantization against hand-computed vectors."""

import numpy as np
import pytest

from tpuc.numerics import fake_quant, fake_quant_per_channel, round_half_away


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_half_away_vectors(dtype):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 2.4, -2.6, 0.0])
    want = np.array([1, 2, 3, -1, -2, -3, 0, 0, 2, -3, 0])
    got = round_half_away(x.astype(dtype))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


def test_round_half_away_near_half_and_large():
    below = np.nextafter(np.float32(0.5), np.float32(0))  # 0.49999997
    x = np.array([below, -below, 1.5 - 2**-23, 2**23 + 1, 2**24 + 2, 8388607.5], np.float32)
    np.testing.assert_array_equal(round_half_away(x), [0, 0, 1, 2**23 + 1, 2**24 + 2, 8388608])


def test_round_half_away_matches_exact_float64_reference():
    # float32 + 0.5 is exact in float64, so trunc there is a reference
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(200_000) * 300, np.arange(-1000, 1000) + 0.5]).astype(
        np.float32
    )
    x64 = x.astype(np.float64)
    ref = np.trunc(x64 + np.copysign(0.5, x64))
    np.testing.assert_array_equal(round_half_away(x), ref)


def test_round_half_away_differs_from_numpy_on_ties():
    ties = np.array([0.5, 2.5, -0.5], np.float32)
    assert list(np.round(ties)) == [0.0, 2.0, -0.0]
    assert list(round_half_away(ties)) == [1.0, 3.0, -1.0]


def test_fake_quant_threshold_127():
    # threshold 127: scale 1, values round half away and saturate at [-128, 127]
    x = np.array([0.5, -0.5, 1.49, 126.5, 300.0, -300.0], np.float32)
    np.testing.assert_array_equal(fake_quant(x, 127.0), [1, -1, 1, 127, 127, -128])


def test_fake_quant_scaled():
    # threshold 2: step 2/127; 1.0 -> 63.5 -> 64 -> 64*2/127
    got = fake_quant(np.array([1.0, -1.0], np.float32), 2.0)
    np.testing.assert_allclose(got, [128 / 127, -128 / 127], rtol=1e-6)


def test_fake_quant_per_channel():
    w = np.array([[1.0, -0.5, 0.25], [10.0, 3.0, -10.0]], np.float32)
    got = fake_quant_per_channel(w, 0)
    # row 0: scale 1/127 -> 127, -63.5 -> -64, 31.75 -> 32
    np.testing.assert_allclose(got[0], [1.0, -64 / 127, 32 / 127], rtol=1e-6)
    # row 1: scale 10/127 -> 127, 38.1 -> 38, -127
    np.testing.assert_allclose(got[1], [10.0, 380 / 127, -10.0], rtol=1e-6)
    per_tensor = fake_quant_per_channel(w, None)
    # one scale 10/127 for all: 12.7 -> 13, -6.35 -> -6, 3.175 -> 3
    np.testing.assert_allclose(per_tensor[0], np.array([13, -6, 3]) * 10 / 127, rtol=1e-6)


def test_fake_quant_per_channel_zero_slice():
    w = np.zeros((2, 3), np.float32)
    np.testing.assert_array_equal(fake_quant_per_channel(w, 0), w)
