"""tpu.Cast, the Requant/Dequant family and tpu.Lut on hand-computed vectors.

Each kernel is called on an op built with explicit result types; expected
values are worked out by hand (ties, saturation) or are bit patterns of
f16/bf16 written out, never recomputed with the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import TensorType, bf16, f16, f32

from tpuc.base.errors import TpucError
from tpuc.dialects import top, tpu
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.interp.tpu_ops import TPU_KERNELS
from tpuc.ir.core import kind_of


def q8(storage: str, scale: float, zero_point: int = 0) -> UniformQuantizedType:
    return UniformQuantizedType(storage, scale, zero_point)


def make(cls, in_elements, out_element, shape=(4,), **attrs):
    """A TPU op reading dummy values of the given element types."""
    operands = [
        top.WeightOp.make([], f"arg{i}", result_types=[TensorType(e, list(s))]).output
        for i, (e, s) in enumerate(in_elements)
    ]
    return cls.make(operands, "out", attrs, result_types=[TensorType(out_element, list(shape))])


def run(cls, in_element, out_element, x, **attrs):
    x = np.asarray(x, np.float32)
    op = make(cls, [(in_element, x.shape)], out_element, x.shape, **attrs)
    y = TPU_KERNELS[(cls, kind_of(op))](op, [x])
    assert y.dtype == np.float32
    return y


def f16_bits(*bits: int) -> np.ndarray:
    return np.array(bits, np.uint16).view(np.float16).astype(np.float32)


def bf16_from_bits(*bits: int) -> np.ndarray:
    return (np.array(bits, np.uint32) << 16).view(np.float32)


# --- tpu.Cast ------------------------------------------------------------------------------


def test_cast_f32_to_i8_rounds_half_away_and_saturates():
    y = run(tpu.CastOp, f32, q8("i8", 0.5), [0.25, 0.75, -0.75, 1000])
    assert y.tolist() == [1, 2, -2, 127]


def test_cast_f32_to_u8_with_zero_point_saturates_both_ends():
    # x / 0.25 = [-20, 400, 0.5, -0.5, 1.5], + 3, clamped to [0, 255]
    y = run(tpu.CastOp, f32, q8("u8", 0.25, 3), [-5, 100, 0.125, -0.125, 0.375])
    assert y.tolist() == [0, 255, 4, 2, 5]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("HalfAwayFromZero", [1, 2, -1, -2, 3]),
        ("HalfToEven", [0, 2, 0, -2, 2]),
        ("HalfUp", [1, 2, 0, -1, 3]),
        ("Down", [0, 1, -1, -2, 2]),
    ],
)
def test_cast_round_modes(mode, expected):
    y = run(tpu.CastOp, f32, q8("i8", 1.0), [0.5, 1.5, -0.5, -1.5, 2.5], round_mode=mode)
    assert y.tolist() == expected


def test_cast_unknown_round_mode_names_the_op():
    with pytest.raises(TpucError, match="tpu.Cast 'out'.*round_mode 'Sideways'"):
        run(tpu.CastOp, f32, q8("i8", 1.0), [0.5], round_mode="Sideways")


def test_cast_quant_to_f32():
    assert run(tpu.CastOp, q8("i8", 0.5), f32, [-128, 0, 127]).tolist() == [-64, 0, 63.5]
    assert run(tpu.CastOp, q8("u8", 0.25, 3), f32, [0, 3, 255]).tolist() == [-0.75, 0, 63]


def test_cast_quant_to_f16_rounds_the_real_value():
    # 1 * float32(1/3) = 0.33333334 -> f16 0x3555 (1365 * 2^-12); 3 * (1/3) -> 1.0
    y = run(tpu.CastOp, q8("i8", 1 / 3), f16, [1, 3, -1])
    np.testing.assert_array_equal(y, f16_bits(0x3555, 0x3C00, 0xB555))


def test_cast_f32_to_f16_ties_to_even_and_overflows():
    x = [1 + 2**-11, 1 + 3 * 2**-11, 65520.0, 1e-8]
    y = run(tpu.CastOp, f32, f16, x)
    np.testing.assert_array_equal(y, f16_bits(0x3C00, 0x3C02, 0x7C00, 0x0000))


def test_cast_f32_to_bf16_ties_to_even():
    x = [1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1 + 2**-8 + 2**-20]
    y = run(tpu.CastOp, f32, bf16, x)
    np.testing.assert_array_equal(y, bf16_from_bits(0x3F80, 0x3F82, 0xBF80, 0x3F81))


def test_cast_bf16_to_f16_rounds_again():
    # 1 + 2^-7 is a bf16 value; f16 holds it exactly. 4096 + 8 (bf16 0x4580 + ..)
    x = bf16_from_bits(0x3F81, 0x4580)  # 1.0078125, 4096
    y = run(tpu.CastOp, bf16, f16, x)
    np.testing.assert_array_equal(y, [1.0078125, 4096.0])


def test_cast_quant_to_quant_requantizes_through_the_real_value():
    # real = 0.5 q = [-1.5, 0, 30, -64]; / 0.25 = [-6, 0, 120, -256]; + 10, clamped
    y = run(tpu.CastOp, q8("i8", 0.5), q8("u8", 0.25, 10), [-3, 0, 60, -128])
    assert y.tolist() == [4, 10, 130, 0]


def test_cast_to_attribute_applies_tops_cast_first():
    # INT32 truncates toward zero before quantizing
    y = run(tpu.CastOp, f32, q8("i8", 1.0), [2.7, -2.7, 0.5], to="INT32")
    assert y.tolist() == [2, -2, 0]
    assert run(tpu.CastOp, f32, f32, [2.7, -2.7], to="INT32").tolist() == [2, -2]


# --- RequantInt / RequantIntAxis ---------------------------------------------------


@pytest.mark.parametrize(
    ("q", "rshift", "expected"),
    [  # rounding divide by 2^r, half away from zero (quantization-notes §6.7 RDBPOT vectors)
        ([5, -5, 1, -1, 3, -3], 1, [3, -3, 1, -1, 2, -2]),
        ([6, -6, 10, -10, -7, 7], 2, [2, -2, 3, -3, -2, 2]),
    ],
)
def test_requant_int_ties_half_away(q, rshift, expected):
    y = run(tpu.RequantIntOp, q8("i8", 1.0), q8("i8", 1.0), q, multiplier=[1], rshift=[rshift])
    assert y.tolist() == expected


def test_requant_int_multiplier_zero_points_and_saturation():
    # acc = q - (-3) = [4, -4, 130]; * 5 / 2 = [10, -10, 325]; + Z_out 7 -> clamp to u8
    y = run(
        tpu.RequantIntOp,
        q8("i8", 1.0, -3),
        q8("u8", 1.0, 7),
        [1, -7, 127],
        multiplier=[5],
        rshift=[1],
    )
    assert y.tolist() == [17, 0, 255]
    # 7 * 5 / 2 = 17.5 -> 18 and -17.5 -> -18 (TFLite's double rounding gives -17)
    y = run(tpu.RequantIntOp, q8("i8", 1.0), q8("i8", 1.0), [7, -7], multiplier=[5], rshift=[1])
    assert y.tolist() == [18, -18]


def test_requant_int_round_mode_half_to_even():
    y = run(
        tpu.RequantIntOp,
        q8("i8", 1.0),
        q8("i8", 1.0),
        [1, 3, 5, -1, -3],
        multiplier=[1],
        rshift=[1],
        round_mode="HalfToEven",
    )
    assert y.tolist() == [0, 2, 2, 0, -2]


def test_requant_int_rejects_per_channel_lists_and_other_modes():
    with pytest.raises(TpucError, match="one value"):
        run(tpu.RequantIntOp, q8("i8", 1.0), q8("i8", 1.0), [[1, 2]], multiplier=[1, 2], rshift=[0])
    with pytest.raises(TpucError, match="quant_mode 'TFLite'"):
        run(tpu.RequantIntOp, q8("i8", 1.0), q8("i8", 1.0), [1], quant_mode="TFLite")


def test_requant_int_axis_per_channel():
    x = np.array([[[1, 3], [1, 3]], [[-5, 5], [-1, 2]]], np.float32).transpose(1, 0, 2)
    # shape [2, 2, 2]; channel 0: * 1 >> 0, channel 1: * 3 / 2 (half away)
    y = run(tpu.RequantIntAxisOp, q8("i8", 1.0), q8("i8", 1.0), x, multiplier=[1, 3], rshift=[0, 1])
    expected = np.array([[[1, 3], [1, 3]], [[-8, 8], [-2, 3]]], np.float32).transpose(1, 0, 2)
    np.testing.assert_array_equal(y, expected)


def test_dequant_int_f32():
    y = run(tpu.DequantIntOp, q8("i8", 1.0, 2), f32, [-1, 7, 2], multiplier=[3], rshift=[2])
    assert y.tolist() == [-2.25, 3.75, 0.0]  # (q - 2) * 3 / 4


def test_dequant_int_rounds_once_to_f16_and_bf16():
    # 2049 lies halfway between the f16 values 2048 and 2050: ties to even
    y = run(tpu.DequantIntOp, q8("i8", 1.0), f16, [1, -1], multiplier=[2049], rshift=[0])
    assert y.tolist() == [2048, -2048]
    # 1 + 2^-8 + 2^-30 is just above a bf16 tie: a float32 detour would land
    # on the tie (1 + 2^-8) and round to 1.0; rounding once gives 1 + 2^-7
    m = 2**30 + 2**22 + 1
    y = run(tpu.DequantIntOp, q8("i8", 1.0), bf16, [1, -1], multiplier=[m], rshift=[30])
    np.testing.assert_array_equal(y, bf16_from_bits(0x3F81, 0xBF81))


def test_dequant_int_per_channel():
    x = np.array([[4, 4]], np.float32)
    y = run(tpu.DequantIntOp, q8("i8", 1.0), f32, x, multiplier=[1, 3], rshift=[1, 3])
    assert y.tolist() == [[2.0, 1.5]]


# --- Lut ------------------------------------------------------------------------------------


def lut(in_element, out_element, x, table):
    x = np.asarray(x, np.float32)
    table = np.asarray(table, np.float32)
    op = make(tpu.LutOp, [(in_element, x.shape), (out_element, table.shape)], out_element, x.shape)
    return TPU_KERNELS[(tpu.LutOp, kind_of(op))](op, [x, table])


def test_lut_per_tensor_indexes_from_qmin():
    table = np.arange(256) * 2 - 300  # entry i = 2i - 300
    y = lut(q8("i8", 0.1), f32, [-128, -1, 0, 127], table)
    assert y.tolist() == [-300, -46, -44, 210]  # indices 0, 127, 128, 255
    y = lut(q8("u8", 0.1), f32, [0, 255, 7], table)
    assert y.tolist() == [-300, 210, -286]


def test_lut_per_channel_and_output_rounding():
    table = np.stack([np.arange(256), 1000 + np.arange(256) + 0.5])  # [2, 256]
    x = np.array([[[-128, 0], [-128, 127]]], np.float32)  # [1, 2, 2]
    y = lut(q8("i8", 0.1), f32, x, table)
    assert y.tolist() == [[[0, 128], [1000.5, 1255.5]]]
    # to bf16: 1000.5 -> 1000 (bf16 spacing 4 there), 1255.5 -> 1256
    y = lut(q8("i8", 0.1), bf16, x, table)
    assert y.tolist() == [[[0, 128], [1000, 1256]]]


def test_lut_rejects_bad_tables():
    with pytest.raises(TpucError, match="table shape \\[100\\]"):
        lut(q8("i8", 0.1), f32, [0], np.zeros(100))
    with pytest.raises(TpucError, match="3 tables"):
        lut(q8("i8", 0.1), f32, [[0, 0]], np.zeros((3, 256)))
