"""tpu.Cast, the integer rescales and the device boundary on records (no IR).

Expected values are worked out by hand (ties, saturation) or written as
f16/bf16 bit patterns, never recomputed with the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.base.errors import TpucError
from tpuc.kernels.cast import (
    Cast,
    Rescale,
    cast,
    convert,
    from_real,
    rescale,
    stored_input,
    to_real,
)
from tpuc.kernels.element import F32, Element, quantized
from tpuc.kernels.requant import Relu, Requant
from tpuc.kernels.rounding import float_rounding, round_float, round_results

I8_HALF = quantized("i8", 0.5, 0, -128, 127)
I8_ONE = quantized("i8", 1.0, 0, -128, 127)
U8_Z3 = quantized("u8", 0.25, 3, 0, 255)
U8_Z10 = quantized("u8", 0.25, 10, 0, 255)
F16 = Element("f16")
BF16 = Element("bf16")


def a(*values) -> np.ndarray:
    return np.array(values, np.float32)


def f16_bits(*bits: int) -> np.ndarray:
    return np.array(bits, np.uint16).view(np.float16).astype(np.float32)


def bf16_from_bits(*bits: int) -> np.ndarray:
    return (np.array(bits, np.uint32) << 16).view(np.float32)


# --- the device boundary -------------------------------------------------------------------


def test_from_real_rounds_half_away_and_saturates():
    # x / 0.5 = [0.5, 1.5, -1.5, 2000] -> [1, 2, -2, 127]
    y = from_real(a(0.25, 0.75, -0.75, 1000), I8_HALF)
    assert y.dtype == np.float32
    assert y.tolist() == [1, 2, -2, 127]


def test_from_real_adds_the_zero_point_and_clamps_both_ends():
    # x / 0.25 = [-20, 400, 0.5, -0.5, 1.5] -> [-20, 400, 1, -1, 2] + 3, clamped
    assert from_real(a(-5, 100, 0.125, -0.125, 0.375), U8_Z3).tolist() == [0, 255, 4, 2, 5]


def test_stored_input_takes_integers_as_stored_and_quantizes_reals():
    # an int8 array is the stored values; the same numbers as floats are real values
    assert stored_input(np.array([-3, 5], np.int8), I8_HALF, "x").tolist() == [-3, 5]
    assert stored_input(a(-3, 5), I8_HALF, "x").tolist() == [-6, 10]
    assert stored_input(np.array([0, 255], np.uint8), U8_Z3, "x").tolist() == [0, 255]
    with pytest.raises(
        TpucError, match=r"input 'x': stored values -1\.\.255 outside u8's \[0, 255\]"
    ):
        stored_input(np.array([-1, 255], np.int16), U8_Z3, "x")
    assert stored_input(np.array([1, 2], np.int32), F16, "x").tolist() == [1, 2]  # float input


def test_bmodel_input_scale_round_trips_to_the_chips_multiplier():
    """A bmodel input stores f32(1/S) (TPU-MLIR); the runtimes rebuild S from
    it and from_real multiplies by f32(1/S) again: the very same float32."""
    from tpuc.target.bmodel import input_scale

    rng = np.random.default_rng(0)
    for s in np.concatenate([rng.uniform(1e-4, 1.0, 2000), [1 / 127, 2.64 / 127, 1 / 255]]):
        stored = np.float32(input_scale(float(s)))  # what the bmodel holds
        again = np.float32(1.0 / input_scale(float(stored)))
        assert again == stored == np.float32(1.0 / float(s))


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("HalfAwayFromZero", [1, 2, -1, -2, 3]),
        ("HalfToEven", [0, 2, 0, -2, 2]),
        ("HalfUp", [1, 2, 0, -1, 3]),
        ("Down", [0, 1, -1, -2, 2]),
    ],
)
def test_from_real_round_modes(mode, expected):
    assert from_real(a(0.5, 1.5, -0.5, -1.5, 2.5), I8_ONE, mode).tolist() == expected


def test_from_real_to_floats_rounds_to_nearest_even():
    # 1 + 2^-11 is the f16 tie between 1 and 1 + 2^-10: even -> 1
    # 1 + 3·2^-11 ties between 1 + 2^-10 and 1 + 2^-9: even -> 1 + 2^-9
    y = from_real(a(1 + 2**-11, 1 + 3 * 2**-11, 70000), F16)
    assert y.tolist() == f16_bits(0x3C00, 0x3C02, 0x7C00).tolist()  # 70000 overflows to inf
    # bf16: 1 + 2^-8 ties to 1 (0x3F80), 1 + 3·2^-8 ties up to 0x3F82
    assert (
        from_real(a(1 + 2**-8, 1 + 3 * 2**-8), BF16).tolist()
        == bf16_from_bits(0x3F80, 0x3F82).tolist()
    )
    assert from_real(a(1 + 2**-20), F32).tolist() == [np.float32(1 + 2**-20)]


def test_to_real_dequantizes_and_passes_floats():
    assert to_real(a(-3, 0, 13), U8_Z10).tolist() == [-3.25, -2.5, 0.75]
    x = a(1.5, -2.25)
    assert to_real(x, F16).tolist() == [1.5, -2.25]


# --- tpu.Cast ------------------------------------------------------------------------------


def test_cast_quant_to_quant_goes_through_the_real_value():
    # real = 0.5 q = [-1.5, 0, 30, -64]; / 0.25 = [-6, 0, 120, -256]; + 10, clamped
    assert cast(Cast(I8_HALF, U8_Z10), a(-3, 0, 60, -128)).tolist() == [4, 10, 130, 0]


def test_cast_quant_to_f16_rounds_the_real_value():
    # 0.1·q: q = 1 -> 0.1 (float32) -> f16 0x2E66; q = 3 -> 0.3 -> f16 0x34CD
    p = Cast(quantized("i8", 0.1, 0, -128, 127), F16)
    assert cast(p, a(1, 3)).tolist() == f16_bits(0x2E66, 0x34CD).tolist()


def test_cast_bf16_to_f16_rounds_again():
    # bf16 1 + 2^-7 is exact in f16; 2^-20 + 2^-27 is an f16 subnormal (step 2^-24)
    # rounded down to 2^-20; 2^17 is beyond f16's range: inf
    y = cast(Cast(BF16, F16), a(1 + 2**-7, 2**-20 + 2**-27, 2**17))
    assert y.tolist() == [1 + 2**-7, 2**-20, float("inf")]


def test_cast_float_to_quant_round_modes_and_unknown_mode():
    p = Cast(F32, I8_ONE, round_mode="HalfToEven")
    assert cast(p, a(0.5, 1.5, 2.5)).tolist() == [0, 2, 2]
    with pytest.raises(TpucError, match="unknown round_mode 'Sideways'"):
        cast(Cast(F32, F32, round_mode="Sideways"), a(0.5))


def test_cast_to_truncates_before_storing():
    assert cast(Cast(F32, I8_ONE, "INT32"), a(2.7, -2.7, 0.5)).tolist() == [2, -2, 0]
    assert cast(Cast(F32, F32, "INT32"), a(2.7, -2.7)).tolist() == [2, -2]


def test_convert_targets():
    x = a(300.7, -1.5, 0.0)
    assert convert(x, "UINT8").tolist() == [44, 255, 0]  # trunc, then wraps: 300 - 256, -1 + 256
    assert convert(x, "int8").tolist() == [44, -1, 0]
    assert convert(x, "BOOL").tolist() == [1, 1, 0]
    assert convert(a(1 + 2**-11), "F16").tolist() == [1.0]
    assert convert(a(1 + 3 * 2**-8), "BF16").tolist() == bf16_from_bits(0x3F82).tolist()
    assert convert(x, "F32") is x
    with pytest.raises(TpucError, match="unknown cast target 'X7'"):
        convert(x, "x7")


# --- integer rescales ----------------------------------------------------------------------


def test_rescale_per_tensor_ties_half_away_and_saturates():
    # (q − 10)·3 >> 2: q = [12, 8, 60, 255] -> [6, -6, 150, 735] / 4 = [1.5, -1.5, 37.5, 183.75]
    # -> [2, -2, 38, 184] + 0, saturated to i8
    p = Rescale(U8_Z10, Requant(I8_ONE, (3,), (2,)))
    assert rescale(p, a(12, 8, 60, 255)).tolist() == [2, -2, 38, 127]


def test_rescale_half_to_even_and_relu():
    p = Rescale(I8_ONE, Requant(I8_ONE, (1,), (1,), round_mode="HalfToEven"))
    assert rescale(p, a(1, 3, 5, -1, -3)).tolist() == [0, 2, 2, 0, -2]
    p = Rescale(I8_ONE, Requant(I8_ONE, (1,), (1,), relu=Relu(True, 2.0)))
    assert rescale(p, a(-4, 3, 9)).tolist() == [0, 2, 2]  # limit 2.0 / scale 1 = 2


def test_rescale_per_channel_on_axis_1():
    p = Rescale(I8_ONE, Requant(I8_ONE, (1, 3), (0, 1)), per_channel=True)
    x = a(5, 5, -5, -5).reshape(1, 2, 2)  # channel 1: ·3 / 2 = 7.5 -> 8
    assert rescale(p, x).tolist() == [[[5, 5], [-8, -8]]]


def test_rescale_rejects_lists_and_modes():
    with pytest.raises(TpucError, match="must hold one value"):
        rescale(Rescale(I8_ONE, Requant(I8_ONE, (1, 2), (0, 0))), a(1, 2).reshape(1, 2))
    with pytest.raises(TpucError, match=r"one per channel \(3\)"):
        p = Rescale(I8_ONE, Requant(I8_ONE, (1, 2), (0, 0)), per_channel=True)
        rescale(p, a(1, 2, 3).reshape(1, 3))
    with pytest.raises(TpucError, match="quant_mode 'TFLite' is not supported"):
        rescale(Rescale(I8_ONE, Requant(I8_ONE), quant_mode="TFLite"), a(1))


def test_dequant_to_float_rounds_once():
    # (q − 10)·3·2^-2: q = [12, 4] -> [1.5, -4.5]
    p = Rescale(U8_Z10, Requant(F32, (3,), (2,)), per_channel=True)
    assert rescale(p, a(12, 4)).tolist() == [1.5, -4.5]
    # (q)·1·2^-11 for q = 2049: 1 + 2^-11 is an f16 tie -> 1 (even)
    p = Rescale(I8_ONE, Requant(F16, (1,), (11,)), per_channel=True)
    assert rescale(p, np.array([2049.0])).tolist() == [1.0]


def test_round_float_and_results():
    x = a(1 + 2**-11, 1 + 3 * 2**-11)
    assert round_float(x, F16).tolist() == f16_bits(0x3C00, 0x3C02).tolist()
    assert round_float(x, I8_ONE) is x  # quantized and integer elements hold values as they are
    assert round_float(x, Element("i32")) is x
    out = round_results((F16, F32), (x, x))
    assert out[0].tolist() == f16_bits(0x3C00, 0x3C02).tolist() and out[1] is x
    assert round_results((BF16,), a(1 + 3 * 2**-8)).tolist() == bf16_from_bits(0x3F82).tolist()
    with pytest.raises(TpucError, match="unknown round_mode 'Up'"):
        float_rounding("Up")
