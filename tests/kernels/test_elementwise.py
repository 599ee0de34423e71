"""Float elementwise kernels on records against numpy references (no IR)."""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.kernels import elementwise as lib
from tpuc.kernels.requant import Relu

RNG = np.random.default_rng(2)
A = RNG.standard_normal((2, 3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 1)).astype(np.float32)


def test_folds_broadcast_with_coeff_and_relu():
    np.testing.assert_array_equal(lib.fold(lib.Fold("Add"), A, B), A + B)
    np.testing.assert_array_equal(lib.fold(lib.Fold("Mul"), A, B, B), A * B * B)
    np.testing.assert_array_equal(lib.fold(lib.Fold("Max"), A, B), np.maximum(A, B))
    y = lib.fold(lib.Fold("Add", Relu(True, 0.5), (2.0, -1.0)), A, B)
    np.testing.assert_array_equal(y, np.clip(A * np.float32(2) - B, 0, 0.5))
    single = lib.fold(lib.Fold("Min"), A)
    assert single is not A and np.array_equal(single, A)
    with pytest.raises(ValueError, match="unknown variadic"):
        lib.Fold("Avg")


def test_binary_ops():
    np.testing.assert_array_equal(
        lib.binary(lib.Binary("Sub", Relu(True)), A, B), np.maximum(A - B, 0)
    )
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(lib.binary(lib.Binary("Div"), A, B), A / B)
    p = lib.binary(lib.Binary("Pow"), np.abs(A), B)
    assert p.dtype == np.float32
    np.testing.assert_array_equal(p, np.power(np.abs(A), B))


def test_compare_and_const_forms():
    assert lib.compare(lib.Compare("Greater"), A, B).tolist() == (A > B).astype(np.float32).tolist()
    c = lib.compare(lib.Compare("Less", 0.0, inversed=True), A)  # 0 < A
    np.testing.assert_array_equal(c, (A > 0).astype(np.float32))
    with pytest.raises(ValueError, match="unknown compare mode"):
        lib.Compare("Near")
    np.testing.assert_array_equal(lib.const(lib.Const("Sub", 1.5, reverse=True), A), 1.5 - A)
    np.testing.assert_array_equal(
        lib.const(lib.Const("Mul", 2.0, relu=Relu(True)), A), np.maximum(A * 2, 0)
    )


def test_where_and_scale():
    cond = (A > 0).astype(np.float32)
    np.testing.assert_array_equal(lib.where(lib.Where(), cond, A, B), np.where(A > 0, A, B))
    x = RNG.standard_normal((1, 3, 2, 2)).astype(np.float32)
    s, b = np.array([1.0, 2.0, 3.0], np.float32), np.array([0.5, 0.0, -1.0], np.float32)
    ref = x * s.reshape(-1, 1, 1) + b.reshape(-1, 1, 1)
    np.testing.assert_array_equal(lib.scale(lib.Scale(), x, s, b), ref)
