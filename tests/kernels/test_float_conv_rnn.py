"""Float conv/deconv/matmul and LSTM/GRU on records against numpy
references (no IR)."""

from __future__ import annotations

import numpy as np

from tpuc.kernels import float_conv, rnn
from tpuc.kernels.requant import Relu

RNG = np.random.default_rng(4)


def direct_conv(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    k = w.shape[-1]
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win, w.astype(np.float64))


def test_conv_with_bias_and_relu_limit():
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    p = float_conv.ConvAttrs(pads=(1, 1, 1, 1), relu=Relu(True, 2.0))
    ref = np.clip(direct_conv(x, w, 1) + b.reshape(-1, 1, 1), 0, 2)
    np.testing.assert_allclose(float_conv.conv(p, x, w, b), ref, rtol=1e-4, atol=1e-4)


def test_deconv_inverts_the_conv_adjoint():
    x = RNG.standard_normal((1, 2, 3, 3)).astype(np.float32)
    w = RNG.standard_normal((2, 1, 2, 2)).astype(np.float32)
    y = float_conv.deconv(float_conv.Deconv(float_conv.ConvAttrs(strides=(2, 2))), x, w)
    ref = np.einsum("nchw,coij->nohiwj", x, w).reshape(1, 1, 6, 6)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_matmul_transposed_with_bias():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    r = RNG.standard_normal((4, 3)).astype(np.float32)
    b = np.ones(4, np.float32)
    y = float_conv.matmul(float_conv.MatMul(True, Relu(True)), x, r, b)
    np.testing.assert_allclose(y, np.maximum(x @ r.T + 1, 0), rtol=1e-6)


def sig(v):
    return 1 / (1 + np.exp(-v))


def test_one_lstm_and_gru_step():
    hid, inp = 3, 2
    x = RNG.standard_normal((1, 1, inp)).astype(np.float32)
    w4 = RNG.standard_normal((1, 4 * hid, inp)).astype(np.float32)
    r4 = RNG.standard_normal((1, 4 * hid, hid)).astype(np.float32)
    y, h, c = rnn.lstm(rnn.Recurrent(hid), x, w4, r4, None, None)
    g = x[0].astype(np.float64) @ w4[0].T
    i, o, cand = sig(g[:, :3]), sig(g[:, 3:6]), np.tanh(g[:, 9:])  # c0 = 0: f unused
    np.testing.assert_allclose(c[0], i * cand, rtol=1e-6)
    np.testing.assert_allclose(h[0], o * np.tanh(i * cand), rtol=1e-6)
    assert y.shape == (1, 1, 1, hid) and y.dtype == np.float32
    w3, r3 = w4[:, : 3 * hid], r4[:, : 3 * hid]
    y, h = rnn.gru(rnn.Recurrent(hid, linear_before_reset=True), x, w3, r3, None, None)
    g = x[0].astype(np.float64) @ w3[0].T
    z, cand = sig(g[:, :3]), np.tanh(g[:, 6:])
    np.testing.assert_allclose(h[0], (1 - z) * cand, rtol=1e-6)


def test_matmul_does_not_depend_on_the_operands_memory_layout():
    """The interpreter hands the kernel contiguous arrays, the simulator views
    of its memory: the same values must give the same bits (a strided operand
    once took numpy's non-BLAS loop, whose other summation order flipped F16
    roundings between the two in an attention MatMul of PP-OCRv4 rec)."""
    x = RNG.standard_normal((1, 8, 40, 72)).astype(np.float32)
    r = RNG.standard_normal((1, 8, 72, 15)).astype(np.float32)
    p = float_conv.MatMul()
    contiguous = float_conv.matmul(p, x, r)
    strided_x = np.swapaxes(np.swapaxes(x, -1, -2).copy(), -1, -2)  # same values, other strides
    strided_r = np.asfortranarray(r)
    assert not strided_x.flags.c_contiguous
    np.testing.assert_array_equal(float_conv.matmul(p, strided_x, strided_r), contiguous)
    ref = np.matmul(x.astype(np.float64), r.astype(np.float64))
    np.testing.assert_allclose(contiguous, ref, rtol=1e-4, atol=1e-4)
