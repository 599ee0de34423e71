"""chip_depthwise on hand-computed vectors (the vendor runtime's values for
the same probes: tests/native/test_chip_depthwise.py)."""

from __future__ import annotations

import numpy as np

from tpuc.kernels import chip_depthwise, chip_float, float_conv
from tpuc.kernels.float_conv import ConvAttrs
from tpuc.kernels.requant import NO_RELU, Relu

E25 = 2.0**25


def one_pixel(products: dict[int, float], bias: float, relu: Relu = NO_RELU) -> float:
    """A 3x3 depthwise conv of one channel over a 3x3 input of ones."""
    w = np.zeros((2, 1, 3, 3), np.float32)
    for pos, v in products.items():
        w[0, 0, pos // 3, pos % 3] = v
    x = np.ones((1, 2, 3, 3), np.float32)
    b = np.array([bias, 0], np.float32)
    y = chip_depthwise.depthwise(ConvAttrs(group=2, relu=relu), x, w, b)
    return float(y[0, 0, 0, 0])


def test_even_and_odd_positions_in_two_sums():
    assert one_pixel({0: E25, 1: 1.0, 2: -E25}, 0.0) == 1.0
    assert one_pixel({0: E25, 2: 1.0, 4: -E25}, 0.0) == 0.0
    assert one_pixel({0: E25, 1: 1.0, 3: 2.0}, 0.0) == E25 + 4


def test_bias_starts_the_odd_sum():
    assert one_pixel({1: E25, 3: -E25}, 1.0) == 0.0
    assert one_pixel({0: E25, 2: -E25}, 1.0) == 1.0


def test_fused_relu_after_the_sum():
    assert one_pixel({0: -3.0, 1: 1.0}, 0.0, Relu(True)) == 0.0
    assert one_pixel({0: 3.0, 1: 4.0}, 0.0, Relu(True, 6.0)) == 6.0


def test_same_sum_as_blas_up_to_rounding():
    """Padding, stride and dilation place the windows as float_conv's do."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 6, 11, 10)).astype(np.float32)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    attrs = ConvAttrs((2, 1), (1, 2), (1, 2, 0, 1), 6)
    got = chip_depthwise.depthwise(attrs, x, w, b)
    want = float_conv.conv(attrs, x, w, b)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_registered_for_bm168x_only():
    assert chip_float.chip_kernel("bm168x", float_conv.conv) is chip_depthwise.conv
    assert chip_float.chip_kernel("cv18xx", float_conv.conv) is float_conv.conv
