"""Normalization and softmax kernels against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import assert_close, rand, run_kernel, run_ort

from tpuc.dialects import top

X = rand(2, 6, 5, 4, low=-3, high=3)


def test_batch_norm():
    gamma, beta, mean, var = rand(6), rand(6), rand(6), rand(6, low=0.1, high=2)
    ref = run_ort("BatchNormalization", [X, gamma, beta, mean, var], dict(epsilon=1e-3))[0]
    ours = run_kernel(top.BatchNormOp, [X, mean, var, gamma, beta], dict(epsilon=1e-3))
    assert_close(ours, ref)
    no_affine = run_kernel(top.BatchNormOp, [X, mean, var, None, None], dict(epsilon=1e-3))
    ones, zeros = np.ones(6, np.float32), np.zeros(6, np.float32)
    ref2 = run_ort("BatchNormalization", [X, ones, zeros, mean, var], dict(epsilon=1e-3))[0]
    assert_close(no_affine, ref2)


@pytest.mark.parametrize("axis", [-1, 2, 1])
def test_layer_norm(axis):
    shape = X.shape[axis:]
    w, b = rand(*shape), rand(*shape)
    ref = run_ort("LayerNormalization", [X, w, b], dict(axis=axis, epsilon=1e-5))[0]
    ours = run_kernel(top.LayerNormOp, [X, w, b], dict(axis=axis, eps=1e-5))
    assert_close(ours, ref)


def test_instance_norm():
    w, b = rand(6), rand(6)
    ref = run_ort("InstanceNormalization", [X, w, b], dict(epsilon=1e-4))[0]
    assert_close(run_kernel(top.InstanceNormOp, [X, w, b], dict(eps=1e-4)), ref)


def test_group_norm_per_channel_opset21():
    w, b = rand(6), rand(6)
    ref = run_ort("GroupNormalization", [X, w, b], dict(num_groups=3, epsilon=1e-5), opset=21)[0]
    assert_close(run_kernel(top.GroupNormOp, [X, w, b], dict(num_groups=3, eps=1e-5)), ref)


def test_group_norm_per_group_opset18():
    w, b = rand(3), rand(3)
    ref = run_ort("GroupNormalization", [X, w, b], dict(num_groups=3, epsilon=1e-5), opset=18)[0]
    assert_close(run_kernel(top.GroupNormOp, [X, w, b], dict(num_groups=3, eps=1e-5)), ref)


@pytest.mark.parametrize("size", [1, 3, 5])  # ORT accepts odd sizes only
def test_lrn(size):
    attrs = dict(size=size, alpha=1e-2, beta=0.75, bias=1.5)
    ref = run_ort("LRN", [X], attrs)[0]
    assert_close(run_kernel(top.LRNOp, [X], attrs), ref)


@pytest.mark.parametrize("axis", [1, -1, 0])
@pytest.mark.parametrize("log", [False, True])
def test_softmax(axis, log):
    ref = run_ort("LogSoftmax" if log else "Softmax", [X * 4], dict(axis=axis))[0]
    assert_close(run_kernel(top.SoftmaxOp, [X * 4], dict(axis=axis, log=log)), ref)
