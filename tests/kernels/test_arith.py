"""Add/Sub/Mul/Concat, average pooling and ReduceSum on records and
hand-computed integer vectors (no IR)."""

from __future__ import annotations

import numpy as np

from tpuc.kernels import arith, sums
from tpuc.kernels.element import quantized
from tpuc.kernels.requant import Relu, Requant

I8 = quantized("i8", 0.1, 0, -128, 127)
I8_Z3 = quantized("i8", 0.1, 3, -128, 127)
U8_Z10 = quantized("u8", 0.1, 10, 0, 255)


def test_add_scales_each_input_then_shifts_once():
    # (5 − 3)·3 + (12 − 10)·2 = 10, >> 2 -> 2.5 -> 3
    p = arith.Eltwise((I8_Z3, U8_Z10), Requant(I8, (1,), (2,)), (3, 2))
    assert arith.add(p, np.array([5.0]), np.array([12.0])).tolist() == [3]


def test_add_broadcasts_and_applies_relu_at_the_zero_point():
    p = arith.Eltwise((I8, I8), Requant(I8_Z3, (1,), (0,), relu=Relu(True)), (1, 1))
    out = arith.add(p, np.array([[-10.0], [4.0]]), np.array([1.0, 2.0]))
    assert out.tolist() == [[3, 3], [8, 9]]  # [-9, -8] + 3 -> relu at 3; [5, 6] + 3


def test_sub_and_mul():
    p = arith.Eltwise((I8, I8_Z3), Requant(I8, (1,), (1,)), (2, 1))
    assert arith.sub(p, np.array([4.0]), np.array([0.0])).tolist() == [6]  # (8 + 3) / 2 = 5.5
    m = arith.Eltwise((I8_Z3, I8), Requant(I8, (3,), (4,)))
    assert arith.mul(m, np.array([7.0]), np.array([-6.0])).tolist() == [-5]  # -24·3/16 = -4.5


def test_concat_copies_identities_and_requantizes_the_rest():
    p = arith.Concat((I8_Z3, I8), (1, 1), (0, 1), 1, Requant(I8_Z3))
    out = arith.concat(p, np.array([[1.0, 200.0]]), np.array([[5.0]]))
    assert out.tolist() == [[1, 127, 6]]  # copy (saturated), round(5 / 2) + 3


def test_avg_pool_sums_windows_with_zero_padding():
    p = sums.Pool((2, 2), (2, 2), (0, 0, 1, 1), False, I8_Z3, Requant(I8))
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3) + 3  # q − Z = 0..8
    # windows [[0,1,3,4], [2,5], [6,7], [8]] (end padding adds 0)
    assert sums.avg_pool(p, x).tolist() == [[[[8, 7], [13, 8]]]]


def test_reduce_sum_over_all_and_negative_axes():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    everything = sums.Reduce((), False, I8, Requant(I8))
    assert sums.reduce_sum(everything, x).tolist() == 10
    last = sums.Reduce((-1,), True, I8_Z3, Requant(I8))
    assert sums.reduce_sum(last, x).tolist() == [[-3], [1]]
