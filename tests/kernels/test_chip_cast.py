"""`tpuc.kernels.chip_cast` (bm168x's f32 -> f16/bf16 cast) on ties worked
out by hand; the chip itself: tests/native/test_cast_data.py."""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.kernels import cast, chip_cast
from tpuc.kernels.chip_float import chip_kernel
from tpuc.kernels.element import Element

F = np.float32
# (x, f16 ties away from zero, f16 ties to even)
F16_CASES = [
    (1 + 2**-11, 1 + 2**-10, 1.0),  # tie above 1 (even mantissa below)
    (1 + 3 * 2**-11, 1 + 2**-9, 1 + 2**-9),  # tie whose even neighbour is above
    (-(1 + 2**-11), -(1 + 2**-10), -1.0),
    (2**-25, 2**-24, 0.0),  # half the smallest f16 subnormal
    (3 * 2**-25, 2**-23, 2**-23),
    (65520.0, np.inf, np.inf),  # halfway past the largest f16
    (1 + 2**-12, 1.0, 1.0),  # not a tie
]


@pytest.mark.parametrize("x, away, even", F16_CASES)
def test_f16_ties(x, away, even):
    x = np.array([x], F)
    assert chip_cast.round_to_half(x, "f16", "HalfAwayFromZero")[0] == F(away)
    assert chip_cast.round_to_half(x, "f16", "HalfToEven")[0] == F(even)
    with np.errstate(over="ignore"):
        assert F(even) == x.astype(np.float16).astype(F)[0]  # numpy's own rounding


def test_bf16_ties_and_subnormals():
    x = np.array([1 + 2**-8, -(1 + 3 * 2**-8), 2**-130, -(2**-140), np.nan, -np.inf], F)
    got = chip_cast.round_to_half(x, "bf16", "HalfAwayFromZero")
    assert list(got[:2]) == [F(1 + 2**-7), F(-(1 + 2**-6))]
    assert got[2] == 0 and np.signbit(got[3]) and got[3] == 0  # flushed, sign kept
    assert np.isnan(got[4]) and got[5] == -np.inf


def test_bm168x_cast_kernel_rounds_only_f32_to_half():
    kernel = chip_kernel("bm168x", cast.cast)
    x = np.array([1 + 2**-11, 2.5], F)
    to_f16 = cast.Cast(Element("f32"), Element("f16"))
    assert kernel(to_f16, x)[0] == F(1 + 2**-10)
    assert cast.cast(to_f16, x)[0] == F(1.0)  # the library's (other chips): nearest even
    to_i8 = cast.Cast(Element("f32"), Element("i8", 1.0, 0, -128, 127))
    assert list(kernel(to_i8, x)) == list(cast.cast(to_i8, x))
    assert chip_kernel(None, cast.cast) is cast.cast
