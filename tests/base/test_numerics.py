"""Rounding and fake quantization against hand-computed vectors."""

import numpy as np
import pytest

from tpuc.base.numerics import fake_quant, fake_quant_per_channel, round_half_away


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


# --- fixed-point vectors (../shared/reference/quantization-notes.md §6.7) ---------------

from tpuc.base.numerics import (  # noqa: E402
    bf16_bits,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    to_bf16,
    to_f16,
)


@pytest.mark.parametrize(
    "m, mantissa, shift",
    [
        (0.75, 1610612736, 0),
        (0.5, 1073741824, 0),
        (1.0, 1073741824, 1),
        (0.1234, 2119995857, -3),
        (0.3, 1288490189, -1),
        (1 / 3, 1431655765, -1),
        (2.5, 1342177280, 2),
        (0.999999999, 2147483646, 0),
        (0.9999999999, 1073741824, 1),
        (1e-10, 0, 0),
        (0.0, 0, 0),
    ],
)
def test_quantize_multiplier(m, mantissa, shift):
    assert quantize_multiplier(m) == (mantissa, shift)


def test_quantize_multiplier_rejects_negative():
    with pytest.raises(ValueError):
        quantize_multiplier(-0.5)


@pytest.mark.parametrize(
    "a, b, want",
    [
        (100, 1610612736, 75),
        (-100, 1610612736, -75),
        (3, 2**30, 2),
        (-3, 2**30, -1),
        (-1, 2**30, 0),
        (5, 2**30, 3),
        (-5, 2**30, -2),
        (-(2**31), -(2**31), 2**31 - 1),
    ],
)
def test_srdhm(a, b, want):
    assert int(saturating_rounding_doubling_high_mul(a, b)) == want


@pytest.mark.parametrize(
    "x, e, want",
    [(5, 1, 3), (-5, 1, -3), (6, 2, 2), (-6, 2, -2), (10, 2, 3), (-10, 2, -3), (1, 1, 1),
     (-1, 1, -1), (-7, 2, -2), (3, 0, 3)],
)  # fmt: skip
def test_rounding_divide_by_pot(x, e, want):
    assert int(rounding_divide_by_pot(x, e)) == want


def test_rounding_divide_by_pot_vectorized_per_channel():
    got = rounding_divide_by_pot(np.array([[5, -5], [10, -10]]), np.array([[1], [2]]))
    np.testing.assert_array_equal(got, [[3, -3], [3, -3]])


@pytest.mark.parametrize(
    "x, m, want",
    [(100, 0.75, 75), (-100, 0.75, -75), (1000, 0.1234, 123), (-1000, 0.1234, -123),
     (7, 2.5, 18), (-7, 2.5, -17), (3, 0.5, 2), (-3, 0.5, -1)],
)  # fmt: skip
def test_multiply_by_quantized_multiplier(x, m, want):
    mantissa, shift = quantize_multiplier(m)
    assert int(multiply_by_quantized_multiplier(x, mantissa, shift)) == want


def test_f16_rounds_to_nearest_even_and_overflows():
    # 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0)
    x = np.array([1 + 2**-11, 1 + 3 * 2**-11, 65520.0, 1e-8], np.float32)
    np.testing.assert_array_equal(to_f16(x), [1.0, 1 + 2 * 2**-10, np.inf, 0.0])


def test_bf16_vectors():
    # bit patterns: 1.0 = 0x3F80; 1 + 2^-8 is halfway between 0x3F80 and 0x3F81 -> even 0x3F80;
    # 1 + 3*2^-8 halfway between 0x3F81 and 0x3F82 -> even 0x3F82; just above half rounds up
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -2.0, 3.0e38], np.float32)
    np.testing.assert_array_equal(
        bf16_bits(x), np.array([0x3F80, 0x3F80, 0x3F82, 0x3F81, 0xC000, 0x7F62], np.uint16)
    )
    assert np.isnan(to_bf16(np.array([np.nan], np.float32)))[0]
    np.testing.assert_array_equal(to_bf16(np.array([1 + 3 * 2**-8], np.float32)), [1 + 2**-6])


def test_f64_to_half_rounds_once():
    """1 + 2^-8 + 2^-30 is just above a bf16 tie: one rounding goes up, while
    float64 -> float32 -> bf16 would first land on the tie and go to even."""
    from tpuc.base.numerics import f64_to_bf16, f64_to_f16

    x = np.array([1 + 2**-8 + 2**-30, -(1 + 2**-8 + 2**-30), 1 + 2**-8])
    assert f64_to_bf16(x).tolist() == [1 + 2**-7, -(1 + 2**-7), 1.0]
    y = np.array([1 + 2**-11 + 2**-40, 1 + 2**-11, 70000.0])
    assert f64_to_f16(y).tolist() == [1 + 2**-10, 1.0, np.inf]


def test_requantize_double_round_is_tflites_multiply_by_quantized_multiplier():
    """DoubleRound (pre-quantized TFLite models) rounds the high half of
    acc·M, then shifts by rshift − 31 rounding again: -4968·(2/3)/32 is
    -103.4999.. (one rounding: -103) but -103.5 after the high multiply
    (TFLite: -104)."""
    from tpuc.base.numerics import requantize

    acc = np.arange(-5000, 5000)
    got = requantize(acc, 1431655765, 36, "DoubleRound")
    np.testing.assert_array_equal(got, multiply_by_quantized_multiplier(acc, 1431655765, -5))
    assert int(requantize(np.array([-4968]), 1431655765, 36, "DoubleRound")[0]) == -104
    assert int(requantize(np.array([-4968]), 1431655765, 36)[0]) == -103
