"""The exact integer conv, deconv and matmul of the kernel library, on
records and integer arrays (no IR), against brute-force int64 loops."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from int_refs import RNG, extreme_case, ref_conv, ref_deconv, ref_output

from tpuc.base.errors import TpucError
from tpuc.kernels import conv as lib
from tpuc.kernels.conv_plan import ConvGeometry
from tpuc.kernels.element import Element, quantized
from tpuc.kernels.exact import EXACT, conv_chunks, exact_cuts
from tpuc.kernels.executor import Executor
from tpuc.kernels.matmul import MatMul, matmul, matmul_accumulator
from tpuc.kernels.requant import Requant

I8 = quantized("i8", 0.1, 0, -128, 127)
W8 = Element("i8")  # an si8 weight: not quantized, Z = 0


def element(storage: str, zp: int) -> Element:
    return quantized(storage, 0.1, zp, *(-128, 127) if storage == "i8" else (0, 255))


def conv_record(geometry, storage="i8", zp=0, m=(1,), r=(0,), output_padding=()):
    return lib.Conv(geometry, element(storage, zp), Requant(I8, m, r), output_padding)


def test_conv_by_hand():
    # 1x1x3 input (q − Z = [1, 2, 3] with Z = -1), filter [1, -1], pad 1 each side
    g = ConvGeometry.of((2,), (), (), (1, 1))
    x = np.array([[[0, 1, 2]]], np.float32)
    w = np.array([[[1, -1]]], np.float32)
    acc = lib.conv_accumulator(conv_record(g, zp=-1), x, w, np.array([10.0]))
    assert acc.tolist() == [[[9, 9, 9, 13]]]  # [0-1, 1-2, 2-3, 3-0] + 10


@pytest.mark.parametrize(
    "storage,zp,group,threads",
    [("u8", 0, 1, None), ("i8", 127, 1, None), ("i8", -128, 1, 2), ("u8", 0, 2, 2)],
)
def test_conv_large_k_is_exact(storage, zp, group, threads):
    x, w = extreme_case(storage, zp, group)
    g = ConvGeometry.of((3, 3), (), (), (1, 1, 1, 1), group)
    acc = ref_conv(x, w, zp, [1, 1], [1, 1, 1, 1], [1, 1], group)
    assert np.abs(acc).max() > 2**24
    p = conv_record(g, storage, zp, (1,), (20,))
    with Executor(threads, min_shard_work=1).active() if threads else contextlib.nullcontext():
        assert np.array_equal(lib.conv_accumulator(p, x, w, None), acc)
        assert np.array_equal(lib.conv(p, x, w, None), ref_output(acc, 1, 20, 0, "i8"))


@pytest.mark.parametrize("storage,zp,group", [("i8", 127, 1), ("u8", 0, 2)])
def test_conv_chunks_bound_every_partial_sum_in_exact_integers(storage, zp, group):
    """A single sum may exceed 2^24, where float32 stops holding every
    integer; inside each chunk the worst-case partial sum, in exact Python
    integers, stays within 2^24."""
    _, w = extreme_case(storage, zp, group)
    bound = 255  # |q − Z| reaches 255 for both cases
    w_abs = np.abs(w).reshape(group, 4, 64, 9).astype(np.int64)
    assert int(w_abs.sum(axis=(2, 3)).max()) * bound > 2**24
    covered = np.zeros((64, 9), np.int64)
    for c0, c1, t0, t1 in conv_chunks(w_abs.astype(np.float32), bound):
        covered[c0:c1, t0:t1] += 1
        worst = int(w_abs[:, :, c0:c1, t0:t1].sum(axis=(2, 3)).max()) * bound
        assert worst <= 2**24, (c0, c1, t0, t1, worst)
    assert (covered == 1).all()  # every (channel, tap) term summed exactly once


def test_exact_cuts_by_hand():
    cost = np.array([[3.0], [3.0], [3.0], [3.0]])
    assert exact_cuts(cost, 12.0) == [(0, 4)]
    assert exact_cuts(cost, 6.0) == [(0, 2), (2, 4)]
    assert exact_cuts(cost, 2.0) == [(0, 1), (1, 2), (2, 3), (3, 4)]  # rows above the limit


def test_conv_cuts_a_long_kernel_by_taps():
    """One channel whose 600 taps alone exceed 2^24."""
    x = np.full((1, 1, 640), 255, np.float32)
    x[0, 0, ::3] = 254
    w = np.full((2, 1, 600), 127, np.float32)
    w[1, 0, ::2] = -128
    chunks = conv_chunks(np.abs(w).reshape(1, 2, 1, 600), 255)
    assert len(chunks) > 1 and all(c[:2] == (0, 1) for c in chunks)
    p = conv_record(ConvGeometry.of((600,)), "u8")
    assert np.array_equal(
        lib.conv_accumulator(p, x, w, None), ref_conv(x, w, 0, [1], [0, 0], [1], 1)
    )


@pytest.mark.parametrize(
    "x_shape,w_shape,strides,pads,dils,group,out_pad",
    [
        ((1, 4, 4, 4), (4, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, (1, 1)),
        ((2, 4, 3, 5), (4, 2, 3, 2), (1, 2), (0, 1, 1, 0), (1, 1), 2, ()),
        ((1, 2, 3, 3), (2, 3, 3, 3), (3, 2), (0, 0, 0, 0), (2, 1), 1, (2, 0)),
        ((1, 64, 3, 3), (64, 2, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, ()),  # beyond 2^24
    ],
)
def test_deconv_matches_int64_loops(x_shape, w_shape, strides, pads, dils, group, out_pad):
    zp = -9
    x = RNG.integers(-128, 128, x_shape).astype(np.float32)
    w = RNG.integers(-128, 128, w_shape).astype(np.float32)
    if x_shape[1] >= 64:
        x[:], w[:] = 127, -128
    g = ConvGeometry.of(tuple(w_shape[2:]), strides, dils, pads, group)
    acc = ref_deconv(x, w, zp, strides, pads, dils, group, out_pad or (0, 0))
    p = conv_record(g, "i8", zp, output_padding=out_pad)
    assert np.array_equal(lib.deconv_accumulator(p, x, w, None), acc)


def test_matmul_weight_by_hand():
    # (q − Z) = [[1, 2], [3, 4]] with Z = 5; weight [[1, 0], [-1, 2]]; bias [1, -1]
    x = np.array([[6, 7], [8, 9]], np.float32)
    w = np.array([[1, 0], [-1, 2]], np.float32)
    p = MatMul(element("i8", 5), W8, Requant(I8, (1, 2), (0, 1), axis=-1))
    # acc = [[-1, 4], [-1, 8]] + [1, -1] = [[0, 3], [0, 7]]; column 1 ·2 >> 1
    assert matmul(p, x, w, np.array([1.0, -1.0])).tolist() == [[0, 3], [0, 7]]


def test_matmul_large_k_is_exact():
    x = np.full((3, 2000), 255, np.float32)
    x[1, ::5] = 0
    w = np.where(RNG.random((2000, 4)) < 0.9, 127, -128).astype(np.float32)
    acc = x.astype(np.int64) @ w.astype(np.int64)
    assert np.abs(acc).max() > 2**24
    p = MatMul(element("u8", 0), W8, Requant(I8, (3,), (26,), axis=-1))
    assert np.array_equal(matmul_accumulator(p, x, w), acc)


def test_matmul_operands_beyond_8_bits_raise():
    x = np.full((1, 1), 1.0, np.float32)
    w = np.full((1, 1), float(EXACT), np.float32)
    p = MatMul(element("i8", 0), W8, Requant(I8))
    with pytest.raises(TpucError, match="exceed 8-bit"):
        matmul_accumulator(p, x, w)
