"""The requant epilogue record on hand-computed integer vectors (no IR)."""

from __future__ import annotations

import numpy as np

from tpuc.kernels.element import Element, quantized
from tpuc.kernels.requant import Relu, Requant, centered, relu_int, requant_output, round_once

I8 = quantized("i8", 0.5, 0, -128, 127)
U8_Z10 = quantized("u8", 0.25, 10, 0, 255)


def test_per_tensor_rounds_half_away_and_saturates():
    # acc·3 >> 2: 10 -> 7.5 -> 8, -10 -> -8, 5 -> 3.75 -> 4, 200 -> 150 -> 127
    p = Requant(I8, (3,), (2,))
    out = requant_output(p, np.array([10, -10, 5, 200], np.int64))
    assert out.dtype == np.float32
    assert out.tolist() == [8, -8, 4, 127]


def test_per_channel_on_axis_1_adds_the_zero_point():
    p = Requant(U8_Z10, (1, 2), (0, 1))
    acc = np.array([[[3, -20]], [[3, -20]]], np.int64).reshape(1, 2, 2)
    # channel 0: acc + 10; channel 1: round(acc·2/2) + 10 = acc + 10, -20 + 10 < 0 -> 0
    assert requant_output(p, acc).tolist() == [[[13, 0], [13, 0]]]


def test_round_modes():
    acc = np.array([5, -5, 3, -3], np.int64)  # /2: 2.5, -2.5, 1.5, -1.5
    table = {
        "HalfAwayFromZero": [3, -3, 2, -2],
        "HalfToEven": [2, -2, 2, -2],
        "HalfUp": [3, -2, 2, -1],
        "Down": [2, -3, 1, -2],
    }
    for mode, want in table.items():
        assert requant_output(Requant(I8, (1,), (1,), round_mode=mode), acc).tolist() == want


def test_relu_on_stored_integers_clamps_at_the_zero_point_and_the_limit():
    # limit 6.0 / scale 0.25 = 24 steps above Z = 10
    q = np.array([0, 9, 10, 20, 40], np.int64)
    assert relu_int(Relu(True, 6.0), q, U8_Z10).tolist() == [10, 10, 10, 20, 34]
    assert relu_int(Relu(True, -1.0), q, U8_Z10).tolist() == [10, 10, 10, 20, 40]
    assert relu_int(Relu(), q, U8_Z10).tolist() == q.tolist()


def test_float_result_dequantizes_with_relu_on_real_values():
    # acc·M·2^-r = acc·3/4, relu limit 2: [-4, 1, 8] -> [-3, 0.75, 6] -> [0, 0.75, 2]
    p = Requant(Element("f32"), (3,), (2,), relu=Relu(True, 2.0))
    assert requant_output(p, np.array([-4, 1, 8], np.int64)).tolist() == [0.0, 0.75, 2.0]


def test_round_once_to_f16_and_bf16():
    x = np.array([1.0 + 2.0**-11 + 2.0**-30], np.float64)  # just above an f16 tie
    assert round_once(x, Element("f16"))[0] == np.float32(1.0 + 2.0**-10)
    y = np.array([1.0 + 2.0**-8 + 2.0**-30], np.float64)  # just above a bf16 tie
    assert round_once(y, Element("bf16"))[0] == np.float32(1.0 + 2.0**-7)
    assert round_once(y, Element("f32"))[0] == np.float32(y[0])


def test_centered_and_term_bound():
    assert centered(np.array([10, 0, 255]), U8_Z10).tolist() == [0, -10, 245]
    assert U8_Z10.term_bound() == 245 and I8.term_bound() == 128
