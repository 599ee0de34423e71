"""half_deconv on hand-computed vectors (the vendor runtime's values:
tests/native/test_half_deconv.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.kernels import float_conv, half_deconv
from tpuc.kernels.element import Element
from tpuc.kernels.float_conv import ConvAttrs, Deconv

BF16 = Element("bf16")


def test_a_units_products_are_cut():
    """One input pixel, stride 2: output (0, 1) sums 2^25 − 2^25 + 1 in one
    unit, whose products are cut toward zero to multiples of 2^(25−24): 0
    (the exact sum is 1); output (1, 0) keeps its lone 1."""
    x = np.ones((1, 3, 1, 1), np.float32)
    w = np.zeros((3, 1, 2, 2), np.float32)
    w[:, 0, 0, 1] = [2.0**25, -(2.0**25), 1.0]
    w[2, 0, 1, 0] = 1.0
    y = half_deconv.deconv(half_deconv.HalfDeconv(Deconv(ConvAttrs((2, 2))), BF16), x, w)
    assert y[0, 0].tolist() == [[0.0, 0.0], [1.0, 0.0]]


@pytest.mark.parametrize(
    "strides, dilations, pads, group, output_padding",
    [
        ((2, 2), (), (), 1, ()),
        ((2, 3), (), (1, 0, 2, 1), 1, (1, 2)),
        ((1, 1), (2, 1), (0, 1, 1, 0), 2, ()),
        ((3, 2), (), (4, 3, 4, 3), 1, ()),  # pads beyond the kernel's reach: a crop
    ],
)
def test_geometry_as_the_library(strides, dilations, pads, group, output_padding):
    """Small integers (every sum exact): the library's transposed convolution."""
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, (2, 4, 5, 6)).astype(np.float32)
    w = rng.integers(-3, 4, (4, 6 // group, 3, 3)).astype(np.float32)
    b = rng.integers(-3, 4, 6).astype(np.float32)
    attrs = Deconv(ConvAttrs(strides, dilations, pads, group), output_padding)
    got = half_deconv.deconv(half_deconv.HalfDeconv(attrs, BF16), x, w, b)
    want = float_conv.deconv(attrs, x, w, b)
    assert got.shape == want.shape
    assert np.array_equal(got, want)
