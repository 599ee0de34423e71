"""half_conv's fast path and its doubt bound: the outputs it does not
recompute product by product are the ones the exact arithmetic gives (the
exact arithmetic itself is checked against the chip model in
tests/native/test_half_conv.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.base.numerics import to_bf16, to_f16
from tpuc.kernels import half_conv as hc
from tpuc.kernels.element import Element


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("shape", [(3, 9, 50, 8), (70, 1, 40, 16), (96, 4, 30, 12)])
def test_screened_accumulators_equal_exact_ones(dtype, shape):
    c, k, p, o = shape
    rnd = to_bf16 if dtype == "bf16" else to_f16
    rng = np.random.default_rng(c + k)
    cols = rnd(np.maximum(rng.standard_normal((c, k, p)), 0).astype(np.float32) * 2)
    w = rnd((rng.standard_normal((o, c, k)) * 0.1).astype(np.float32))
    w[:, 0, 0] = rng.choice([-1.0, 1.0], o) * 2.0 ** (16 if dtype == "bf16" else 10)
    bias = -w[:, 0, 0] + rng.standard_normal(o).astype(np.float32)
    cols, w = cols.astype(np.float32), w.astype(np.float32)
    half = hc.Half.of(Element(dtype), cols, w)
    got = hc.accumulate(cols, w, bias, half)
    rows, pixels = np.divmod(np.arange(o * p), p)
    exact = hc.exact(
        np.ascontiguousarray(cols.transpose(2, 1, 0)),
        np.ascontiguousarray(w.transpose(0, 2, 1)),
        bias,
        rows,
        pixels,
    ).reshape(o, p)
    assert np.array_equal(half.rounder(got), half.rounder(exact))
