"""Unary activations on `Unary` records against numpy references (no IR)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tpuc.kernels import activation as lib

X = np.linspace(-4, 4, 33, dtype=np.float32)


def run(kind: str, **params) -> np.ndarray:
    y = lib.unary(lib.Unary(kind, **params), X)
    assert y.dtype == np.float32 and y.shape == X.shape
    return y


def test_every_kind_runs():
    for kind in lib.UNARY:
        option = "F16" if kind == "Cast" else ""
        lib.unary(lib.Unary(kind, 1.0, 0.5, option), np.abs(X) + 0.5)
    with pytest.raises(ValueError, match="unknown unary kind"):
        lib.Unary("Swish")


def test_parameterised_kinds():
    np.testing.assert_array_equal(run("Relu", alpha=1.5), np.clip(X, 0, 1.5))
    np.testing.assert_array_equal(run("Relu"), np.maximum(X, 0))
    np.testing.assert_array_equal(
        run("LeakyRelu", alpha=0.1), np.where(X >= 0, X, X * np.float32(0.1))
    )
    np.testing.assert_array_equal(run("Clip", alpha=-1.0), np.maximum(X, -1))
    np.testing.assert_array_equal(
        run("HardSigmoid", alpha=0.2, beta=0.5), np.clip(X * 0.2 + 0.5, 0, 1)
    )
    np.testing.assert_allclose(
        run("Sigmoid", alpha=2.0, beta=-1.0), 2 / (1 + np.exp(-X)) - 1, rtol=1e-6, atol=1e-6
    )
    np.testing.assert_array_equal(run("Pow", alpha=2.0), X * X)
    np.testing.assert_array_equal(run("Cast", option="INT8"), np.trunc(X))


def test_erf_and_gelu_in_float64():
    ref = np.array([math.erf(v) for v in X.astype(np.float64)], np.float32)
    np.testing.assert_allclose(run("Erf"), ref, atol=2e-7)
    gelu = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in X.astype(np.float64)])
    np.testing.assert_allclose(run("GELU"), gelu.astype(np.float32), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(run("GELU", option="tanh"), gelu.astype(np.float32), atol=1e-3)


def test_prelu_broadcasts_the_slope():
    x = X.reshape(1, 3, 11)
    slope = np.array([0.1, 0.2, 0.3], np.float32).reshape(3, 1)
    np.testing.assert_array_equal(lib.prelu(lib.PRelu(), x, slope), np.where(x >= 0, x, x * slope))
