"""Resize on `Interp` records against onnxruntime-style references (no IR)."""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.kernels import resize as lib

X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(1, 2, 3, 4)


def test_nearest_doubles_by_repeating():
    y = lib.interp(lib.Interp((6, 8), coord_mode="asymmetric", nearest_mode="floor"), X)
    np.testing.assert_array_equal(y, X.repeat(2, axis=2).repeat(2, axis=3))


def test_linear_align_corners_hits_the_corners_and_midpoints():
    y = lib.interp(lib.Interp((1, 2, 5, 7), mode="linear", coord_mode="align_corners"), X)
    assert y.shape == (1, 2, 5, 7) and y.dtype == np.float32
    np.testing.assert_array_equal(y[..., ::2, ::2], X)
    np.testing.assert_allclose(y[0, 0, 1, 0], (X[0, 0, 0, 0] + X[0, 0, 1, 0]) / 2)


def test_cubic_keeps_a_constant_and_bad_modes_fail():
    ones = np.ones((1, 1, 4, 4), np.float32)
    y = lib.interp(lib.Interp((8, 8), mode="cubic", exclude_outside=True), ones)
    np.testing.assert_allclose(y, 1.0, rtol=1e-6)
    with pytest.raises(ValueError, match="unsupported coord_mode"):
        lib.interp(lib.Interp((8, 8), coord_mode="diagonal"), ones)
    with pytest.raises(ValueError, match="more dims"):
        lib.interp(lib.Interp((1, 1, 1, 8, 8)), ones)
