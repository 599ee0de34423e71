"""Normalizations and softmax on records against numpy references (no IR)."""

from __future__ import annotations

import numpy as np

from tpuc.kernels import norm as lib
from tpuc.kernels.requant import Relu

RNG = np.random.default_rng(3)
X = RNG.standard_normal((2, 4, 3, 5)).astype(np.float32)
C = np.arange(1, 5, dtype=np.float32)


def reference(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    x = x.astype(np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def test_batch_norm_with_relu():
    mean, var = C / 10, C
    ch = (-1, 1, 1)
    ref = (X - mean.reshape(ch)) / np.sqrt(var.reshape(ch) + 1e-3) * C.reshape(ch) + 1
    y = lib.batch_norm(lib.BatchNorm(1e-3, Relu(True)), X, mean, var, C, np.ones(4, np.float32))
    np.testing.assert_allclose(y, np.maximum(ref, 0), rtol=1e-5, atol=1e-5)


def test_layer_instance_group_norm():
    y = lib.layer_norm(lib.LayerNorm(-2, 1e-5), X, None, None)
    np.testing.assert_allclose(y, reference(X, (2, 3), 1e-5), rtol=1e-5, atol=1e-6)
    y = lib.instance_norm(lib.InstanceNorm(1e-5), X, C, None)
    ref = reference(X, (2, 3), 1e-5) * C.reshape(-1, 1, 1)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    y = lib.group_norm(lib.GroupNorm(2), X, np.array([1.0, 2.0], np.float32), None)
    ref = reference(X.reshape(2, 2, -1), (2,), 1e-5).reshape(X.shape)
    np.testing.assert_allclose(
        y, ref * np.repeat([1.0, 2.0], 2).reshape(-1, 1, 1), rtol=1e-5, atol=1e-5
    )


def test_lrn_and_softmax():
    sq = np.pad(X.astype(np.float64) ** 2, [(0, 0), (1, 1), (0, 0), (0, 0)])
    window = sq[:, :4] + sq[:, 1:5] + sq[:, 2:6]
    ref = X / (2.0 + 0.3 / 3 * window) ** 0.5
    np.testing.assert_allclose(lib.lrn(lib.LRN(3, 0.3, 0.5, 2.0), X), ref, rtol=1e-6)
    e = np.exp(X - X.max(axis=1, keepdims=True))
    np.testing.assert_allclose(
        lib.softmax(lib.Softmax(1), X), e / e.sum(1, keepdims=True), rtol=1e-6
    )
    log = lib.softmax(lib.Softmax(-3, log=True), X)
    np.testing.assert_allclose(log, np.log(e / e.sum(1, keepdims=True)), rtol=1e-5, atol=1e-6)
