"""Integer kernels of the TPU compute ops against independent references:
brute-force int64 loops (conv, deconv, pooling), int64 numpy (matmul,
elementwise, reduce), requantization in Python integers, and the worked
examples of the TPU-MLIR book (§5.4) and quantization-notes (§7, §8)."""

from __future__ import annotations

import contextlib
import math
from fractions import Fraction

import numpy as np
import pytest
from int_refs import RANGES, RNG, extreme_case, geometry, ref_conv, ref_deconv, ref_output, rq
from xdsl.dialects.builtin import IntegerType, NoneType, Signedness, TensorType, i32
from xdsl.ir import Block

from tpuc.base.errors import TpucError
from tpuc.base.numerics import multiplier_rshift, shared_rshift_multipliers
from tpuc.dialects import top, tpu
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.interp.tpu_ops import compute  # noqa: F401  (registers the kernels)
from tpuc.interp.tpu_ops.compute_conv import conv_params
from tpuc.interp.tpu_ops.registry import TPU_KERNELS
from tpuc.ir.core import kind_of
from tpuc.kernels import conv as conv_lib
from tpuc.kernels.exact import conv_chunks
from tpuc.kernels.executor import Executor
from tpuc.kernels.matmul import matmul_accumulator

SI8 = IntegerType(8, Signedness.SIGNED)


# --- building ops ------------------------------------------------------------------------


def qtype(shape, storage="i8", scale=0.1, zp=0) -> TensorType:
    return TensorType(UniformQuantizedType(storage, scale, zp), list(shape))


def make(cls, operand_types, result_type, **attrs):
    """A TPU op over block arguments of `operand_types` (None: top.None)."""
    block = Block(arg_types=[t for t in operand_types if t is not None])
    args = iter(block.args)
    operands = [
        top.NoneOp.build(result_types=[NoneType()]).output if t is None else next(args)
        for t in operand_types
    ]
    op = cls.make(operands, "out", attrs, result_types=[result_type])
    assert kind_of(op) == "int"
    return op


def run(op, args):
    return TPU_KERNELS[(type(op), "int")](op, list(args))


def qrand(shape, storage="i8") -> np.ndarray:
    lo, hi = RANGES[storage]
    return RNG.integers(lo, hi + 1, size=shape).astype(np.float32)


# --- reference requantization in Python integers ------------------------------------------


def spread(acc, channels: int, target: float = 100.0) -> tuple[list[int], list[int]]:
    """Per-channel multipliers/shifts that map |acc| to about `target`."""
    peak = max(1.0, float(np.abs(acc).max()))
    pairs = [multiplier_rshift(target / peak * RNG.uniform(0.5, 1.5)) for _ in range(channels)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


# --- brute-force convolutions --------------------------------------------------------------


CONVS = [
    # x shape, w shape, attrs, (input storage, Z_in), (output storage, Z_out)
    ((1, 3, 7, 7), (4, 3, 3, 3), dict(pads=[1, 1, 1, 1]), ("i8", 0), ("i8", 0)),
    (
        (2, 4, 8, 7),
        (6, 2, 3, 3),
        dict(strides=[2, 1], pads=[0, 1, 2, 1], group=2),
        ("i8", -7),
        ("i8", 5),
    ),
    ((1, 6, 7, 7), (6, 1, 3, 3), dict(pads=[1, 1, 1, 1], group=6), ("u8", 0), ("u8", 0)),
    (
        (1, 6, 8, 8),
        (6, 1, 3, 3),
        dict(strides=[2, 2], pads=[1, 0, 1, 2], group=6),
        ("i8", 3),
        ("i8", -2),
    ),
    (
        (1, 3, 7, 7),
        (6, 1, 3, 3),
        dict(pads=[2, 2, 2, 2], group=3, dilations=[2, 2]),
        ("i8", 0),
        ("i8", 0),
    ),
    ((1, 4, 9, 9), (5, 4, 3, 3), dict(strides=[2, 2], dilations=[2, 3]), ("u8", 0), ("i8", 0)),
    ((1, 8, 5, 5), (5, 8, 1, 1), dict(pads=[1, 0, 0, 1]), ("i8", 11), ("u8", 0)),
    ((1, 8, 5, 5), (5, 8, 1, 1), dict(strides=[2, 2]), ("i8", 0), ("i8", 0)),
    ((1, 3, 12), (4, 3, 5), dict(strides=[2], pads=[2, 1]), ("i8", -20), ("i8", 0)),  # 1-D
    ((1, 2, 4, 5, 5), (3, 2, 3, 3, 3), dict(strides=[1, 2, 1], pads=[1] * 6), ("i8", 0), ("i8", 0)),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs,inq,outq", CONVS)
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_matches_int64_loops(x_shape, w_shape, attrs, inq, outq, with_bias):
    x, w = qrand(x_shape, inq[0]), qrand(w_shape)
    bias = RNG.integers(-5000, 5000, w_shape[0]).astype(np.float64) if with_bias else None
    strides, pads, dils, group = geometry(attrs, len(w_shape) - 2)
    acc = ref_conv(x, w, inq[1], strides, pads, dils, group)
    if bias is not None:
        acc += bias.astype(np.int64).reshape((-1,) + (1,) * (acc.ndim - 2))
    m, r = spread(acc, w_shape[0])
    op = make(
        tpu.Conv2DOp,
        [
            qtype(x_shape, *inq[:1], 0.05, inq[1]),
            TensorType(SI8, w_shape),
            TensorType(i32, [w_shape[0]]) if with_bias else None,
        ],
        qtype(acc.shape, outq[0], 0.1, outq[1]),
        kernel_shape=list(w_shape[2:]),
        multiplier=m,
        rshift=r,
        **attrs,
    )
    assert np.array_equal(conv_lib.conv_accumulator(conv_params(op), x, w, bias), acc)
    assert np.array_equal(run(op, [x, w, bias]), ref_output(acc, m, r, outq[1], outq[0]))


@pytest.mark.parametrize("storage,zp,limit", [("i8", 0, 6.0), ("i8", -10, -1.0), ("u8", 0, 3.0)])
def test_conv_fused_relu_and_saturation(storage, zp, limit):
    x, w = qrand((1, 4, 6, 6)), qrand((3, 4, 3, 3))
    acc = ref_conv(x, w, 0, [1, 1], [1, 1, 1, 1], [1, 1], 1)
    m, r = spread(acc, 1, target=400.0)  # beyond the storage range: saturates
    op = make(
        tpu.Conv2DOp,
        [qtype(x.shape), TensorType(SI8, w.shape), None],
        qtype(acc.shape, storage, 0.1, zp),
        kernel_shape=[3, 3],
        pads=[1, 1, 1, 1],
        multiplier=m,
        rshift=r,
        do_relu=True,
        relu_limit=limit,
    )
    limit_q = zp + round(limit / 0.1) if limit >= 0 else None  # limit/0.1 is no tie
    ours = run(op, [x, w, None])
    assert np.array_equal(ours, ref_output(acc, m, r, zp, storage, relu=True, limit_q=limit_q))
    assert ours.min() == zp and (limit_q is None or ours.max() == limit_q)


@pytest.mark.parametrize(
    "storage,zp,group,threads",
    [
        ("u8", 0, 1, None),
        ("i8", 127, 1, None),
        ("i8", 0, 1, None),
        ("u8", 0, 2, None),
        ("i8", -128, 1, 2),
        ("u8", 0, 2, 2),
    ],
)
def test_conv_large_k_is_exact(storage, zp, group, threads):
    x, w = extreme_case(storage, zp, group)
    op = make(
        tpu.Conv2DOp,
        [qtype(x.shape, storage, 0.1, zp), TensorType(SI8, w.shape), None],
        qtype((1, 4 * group, 5, 5)),
        multiplier=[1],
        rshift=[20],
        kernel_shape=[3, 3],
        pads=[1, 1, 1, 1],
        group=group,
    )
    acc = ref_conv(x, w, zp, [1, 1], [1, 1, 1, 1], [1, 1], group)
    if storage == "u8" or zp:
        assert np.abs(acc).max() > 2**24
        w_abs = np.abs(w).reshape(group, 4, 64, 9)
        assert len(conv_chunks(w_abs, 255)) > 1  # |q − Z| reaches 255 here
    with Executor(threads, min_shard_work=1).active() if threads else contextlib.nullcontext():
        assert np.array_equal(conv_lib.conv_accumulator(conv_params(op), x, w, None), acc)
        assert np.array_equal(run(op, [x, w, None]), ref_output(acc, 1, 20, 0, "i8"))


DECONVS = [
    ((1, 4, 4, 4), (4, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])),
    ((2, 4, 3, 5), (4, 2, 3, 2), dict(strides=[1, 2], pads=[0, 1, 1, 0], group=2)),
    ((1, 6, 3, 3), (6, 1, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1], group=6)),
    ((1, 2, 3, 3), (2, 3, 3, 3), dict(strides=[3, 2], dilations=[2, 1], output_padding=[2, 0])),
    ((1, 3, 6), (3, 2, 4), dict(strides=[2], pads=[1, 2])),  # 1-D
    ((1, 64, 3, 3), (64, 2, 3, 3), dict(strides=[1, 1], pads=[1, 1, 1, 1])),  # K = 576
    ((1, 128, 3, 3), (128, 2, 3, 3), dict(strides=[2, 1], pads=[1, 1, 1, 1], group=2)),
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", DECONVS)
def test_deconv_matches_int64_loops(x_shape, w_shape, attrs):
    zp = -9
    x, w = qrand(x_shape), qrand(w_shape)
    if x_shape[1] >= 64:  # extremes: sums beyond 2^24
        x[:], w[:] = 127, -128
    n = len(w_shape) - 2
    strides, pads, dils, group = geometry(attrs, n)
    acc = ref_deconv(x, w, zp, strides, pads, dils, group, attrs.get("output_padding", [0] * n))
    bias = RNG.integers(-999, 999, acc.shape[1]).astype(np.float64)
    acc += bias.astype(np.int64).reshape((-1,) + (1,) * n)
    m, r = spread(acc, acc.shape[1])
    op = make(
        tpu.DeconvOp,
        [qtype(x_shape, "i8", 0.1, zp), TensorType(SI8, w_shape), TensorType(i32, [acc.shape[1]])],
        qtype(acc.shape, "i8", 0.1, 3),
        kernel_shape=list(w_shape[2:]),
        multiplier=m,
        rshift=r,
        **attrs,
    )
    assert np.array_equal(conv_lib.deconv_accumulator(conv_params(op), x, w, bias), acc)
    assert np.array_equal(run(op, [x, w, bias]), ref_output(acc, m, r, 3, "i8"))


# --- matmul ----------------------------------------------------------------------------------


def matmul_op(l_type, r_type, bias_type, out_shape, **attrs):
    return make(tpu.MatMulOp, [l_type, r_type, bias_type], qtype(out_shape, "i8", 0.1, -4), **attrs)


@pytest.mark.parametrize("per_column", [True, False])
def test_matmul_weight(per_column):
    x, w = qrand((2, 3, 5, 40), "u8"), qrand((40, 6))
    bias = RNG.integers(-3000, 3000, 6).astype(np.float64)
    acc = (x.astype(np.int64) - 9) @ w.astype(np.int64) + bias.astype(np.int64)
    m, r = spread(acc, 6 if per_column else 1)
    op = matmul_op(
        qtype(x.shape, "u8", 0.1, 9),
        TensorType(SI8, w.shape),
        TensorType(i32, [6]),
        acc.shape,
        multiplier=m,
        rshift=r,
    )
    assert np.array_equal(run(op, [x, w, bias]), ref_output(acc, m, r, -4, "i8", axis=-1))


def test_matmul_two_activations_transposed_broadcast():
    lhs, rhs = qrand((2, 1, 4, 30)), qrand((1, 3, 7, 30), "u8")
    acc = (lhs.astype(np.int64) + 3) @ np.swapaxes(rhs.astype(np.int64) - 128, -1, -2)
    m, r = spread(acc, 1)
    op = matmul_op(
        qtype(lhs.shape, "i8", 0.1, -3),
        qtype(rhs.shape, "u8", 0.1, 128),
        None,
        acc.shape,
        multiplier=m,
        rshift=r,
        right_transpose=True,
    )
    assert np.array_equal(run(op, [lhs, rhs, None]), ref_output(acc, m, r, -4, "i8"))


def test_matmul_large_k_is_exact():
    x = np.full((3, 2000), 255, np.float32)
    x[1, ::5] = 0
    w = np.where(RNG.random((2000, 4)) < 0.9, 127, -128).astype(np.float32)
    acc = x.astype(np.int64) @ w.astype(np.int64)
    assert np.abs(acc).max() > 2**24
    op = matmul_op(
        qtype(x.shape, "u8"), TensorType(SI8, w.shape), None, acc.shape, multiplier=[3], rshift=[26]
    )
    assert np.array_equal(matmul_accumulator(compute.matmul_params(op), x, w), acc)
    assert np.array_equal(run(op, [x, w, None]), ref_output(acc, 3, 26, -4, "i8"))


# --- pooling -----------------------------------------------------------------------------------


def ref_pool_sum(x, zx, kernel, strides, pads, out):
    n = len(kernel)
    x = x.astype(np.int64) - zx
    y = np.zeros(x.shape[:2] + tuple(out), np.int64)
    for pos in np.ndindex(*out):
        for tap in np.ndindex(*kernel):
            src = [pos[i] * strides[i] - pads[i] + tap[i] for i in range(n)]
            if all(0 <= s < x.shape[2 + i] for i, s in enumerate(src)):
                y[(slice(None), slice(None), *pos)] += x[(slice(None), slice(None), *src)]
    return y


AVG_POOLS = [
    ((1, 3, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), (4, 4)),
    (
        (1, 2, 8, 8),
        dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 0, 0], ceil_mode=True),
        (4, 4),
    ),
    ((2, 3, 6, 6), dict(kernel_shape=[6, 6], strides=[1, 1], pads=[0, 0, 0, 0]), (1, 1)),  # global
    ((1, 3, 11), dict(kernel_shape=[3], strides=[2], pads=[1, 1]), (6,)),  # 1-D
]


@pytest.mark.parametrize("shape,attrs,out", AVG_POOLS)
def test_avg_pool_sums_windows(shape, attrs, out):
    x = qrand(shape)
    n = len(out)
    acc = ref_pool_sum(x, 12, attrs["kernel_shape"], attrs["strides"], attrs["pads"][:n], out)
    m, r = multiplier_rshift(1 / math.prod(attrs["kernel_shape"]), 8)
    op = make(
        tpu.Pool2DOp,
        [qtype(shape, "i8", 0.1, 12)],
        qtype(acc.shape, "i8", 0.1, -1),
        pool_mode="Avg",
        multiplier=[m],
        rshift=[r],
        **attrs,
    )
    assert np.array_equal(run(op, [x]), ref_output(acc, m, r, -1, "i8"))


# --- elementwise -------------------------------------------------------------------------------


def test_add_book_example():
    """TPU-MLIR book §5.4: thresholds 4, 2 -> 5: M = (102, 51), rshift 7;
    q_a = 100, q_b = -50 -> 7650 / 128 = 59.77 -> 60."""
    op = make(tpu.AddOp, [qtype([1]), qtype([1])], qtype([1]), multiplier=[102, 51], rshift=[7])
    out = run(op, [np.array([100.0, 127], np.float32), np.array([-50.0, 127], np.float32)])
    assert out.tolist() == [60.0, 127.0]


def test_add_rounds_each_term_by_its_own_rshift():
    """bm1684x's form, one rshift per input (hand-computed): the book's
    inputs with 205 >> 8 and 205 >> 9, half up: (20500 + 128) >> 8 = 80,
    (−10250 + 256) >> 9 = −20 -> 60; 3/2 + 12/8 = 2 + 2 = 4 (3 rounded once);
    −1/2 -> 0 and −12/8 = −1.5 -> −1 (ties toward +inf); saturation."""
    op = make(tpu.AddOp, [qtype([5]), qtype([5])], qtype([5]), multiplier=[205, 205],
              rshift=[8, 9], round_mode="HalfUp")  # fmt: skip
    out = run(op, [np.array([100.0, 127, -128, 0, 1]), np.array([-50.0, 127, -128, 3, -4])])
    # 127: 101.7 -> 102, 50.85 -> 51; -128: -102.5 -> -102, -51.25 -> -51
    assert out.tolist() == [60.0, 127.0, -128.0, 1.0, -1.0]
    half = make(tpu.AddOp, [qtype([4]), qtype([4])], qtype([4]), multiplier=[128, 192],
                rshift=[8, 9], round_mode="HalfUp")  # fmt: skip
    out = run(half, [np.array([3.0, -1, -3, 1]), np.array([4.0, -4, -4, 0])])
    assert out.tolist() == [4.0, -1.0, -2.0, 1.0]


def test_sub_rounds_the_subtrahend_before_its_sign():
    """Hand-computed: 2.5q half up minus 200q/512 half up: q_b = −32 gives
    −12.5 -> −12, so 8 − (−12) = 20; (1, 1): 3 − 0 = 3 where rounding the
    difference once gives 2.11 -> 2; 127.5 -> 128 saturates; relu."""
    op = make(tpu.SubOp, [qtype([5]), qtype([5])], qtype([5]), multiplier=[160, 200],
              rshift=[6, 9], round_mode="HalfUp")  # fmt: skip
    args = [np.array([3.0, 1, -5, 51, 1]), np.array([-32.0, 32, -4, 0, 1])]
    assert run(op, args).tolist() == [20.0, -10.0, -10.0, 127.0, 3.0]
    op.set_value("do_relu", True)
    assert run(op, args).tolist() == [20.0, 0.0, 0.0, 127.0, 3.0]


def test_add_three_inputs_one_rshift_each():
    """Hand-computed: q/2 + q/4 + q (rshift 0) half up: 3 -> 2 + 1 + 3 = 6."""
    op = make(tpu.AddOp, [qtype([2])] * 3, qtype([2]), multiplier=[128, 128, 1],
              rshift=[8, 9, 0], round_mode="HalfUp")  # fmt: skip
    out = run(op, [np.array([3.0, -3]), np.array([3.0, -3]), np.array([3.0, -3])])
    assert out.tolist() == [6.0, -5.0]


ADD_EXAMPLES = [
    # quantization-notes §7: (S1, Z1, S2, Z2, S3, Z3, storage, [(q1, q2, expected)])
    (
        0.02,
        128,
        0.01,
        100,
        0.03,
        120,
        "u8",
        [
            (200, 50, 151),
            (128, 100, 120),
            (0, 0, 1),
            (255, 255, 255),
            (100, 180, 128),
            (140, 94, 126),
        ],
    ),
    (
        0.05,
        -10,
        0.1,
        5,
        0.12,
        -3,
        "i8",
        [(50, -20, 1), (-128, -128, -128), (127, 127, 127), (-10, 5, -3), (30, 40, 43)],
    ),
]


@pytest.mark.parametrize("s1,z1,s2,z2,s3,z3,storage,cases", ADD_EXAMPLES)
def test_add_worked_examples(s1, z1, s2, z2, s3, z3, storage, cases):
    multipliers, rshift = shared_rshift_multipliers([s1 / s3, s2 / s3], 16)
    op = make(
        tpu.AddOp,
        [qtype([len(cases)], storage, s1, z1), qtype([len(cases)], storage, s2, z2)],
        qtype([len(cases)], storage, s3, z3),
        multiplier=multipliers,
        rshift=[rshift],
    )
    q1, q2, expected = (np.array(c, np.float32) for c in zip(*cases, strict=True))
    assert run(op, [q1, q2]).tolist() == expected.tolist()


def test_add_three_inputs_broadcast_relu():
    a, b, c = qrand((2, 3, 4)), qrand((3, 1), "u8"), qrand((4,))
    m = [700, -300, 1200]
    acc = (
        (a.astype(np.int64) - 5) * m[0]
        + (b.astype(np.int64) - 100) * m[1]
        + c.astype(np.int64) * m[2]
    )
    op = make(
        tpu.AddOp,
        [qtype(a.shape, "i8", 0.1, 5), qtype(b.shape, "u8", 0.1, 100), qtype(c.shape)],
        qtype(acc.shape, "i8", 0.05, 2),
        multiplier=m,
        rshift=[11],
        do_relu=True,
        relu_limit=4.0,
    )
    ref = ref_output(acc, 1, 11, 2, "i8", relu=True, limit_q=2 + 80)
    assert np.array_equal(run(op, [a, b, c]), ref)


def test_sub():
    a, b = qrand((2, 5)), qrand((1, 5))
    acc = (a.astype(np.int64) + 8) * 90 - (b.astype(np.int64) - 1) * 45
    op = make(
        tpu.SubOp,
        [qtype(a.shape, "i8", 0.1, -8), qtype(b.shape, "i8", 0.1, 1)],
        qtype(acc.shape, "u8", 0.1, 7),
        multiplier=[90, 45],
        rshift=[6],
    )
    assert np.array_equal(run(op, [a, b]), ref_output(acc, 1, 6, 7, "u8"))


def test_mul_broadcast():
    a, b = qrand((2, 3, 4), "u8"), qrand((3, 1))
    acc = (a.astype(np.int64) - 30) * (b.astype(np.int64) + 2)
    op = make(
        tpu.MulOp,
        [qtype(a.shape, "u8", 0.1, 30), qtype(b.shape, "i8", 0.1, -2)],
        qtype(acc.shape, "i8", 0.1, 0),
        multiplier=[1518500250],
        rshift=[38],
    )
    assert np.array_equal(run(op, [a, b]), ref_output(acc, 1518500250, 38, 0, "i8"))


# --- concat -----------------------------------------------------------------------------------


def concat_op(in_types, out_type, scales, **attrs):
    """M/rshift of S_in/S_out per input, as the lowering derives them."""
    pairs = [multiplier_rshift(s, 32) for s in scales]
    return make(
        tpu.ConcatOp,
        in_types,
        out_type,
        multiplier=[p[0] for p in pairs],
        rshift=[p[1] for p in pairs],
        **attrs,
    ), pairs


def test_concat_notes_examples():
    """quantization-notes §8, example 1: input [0, 5] concatenated into an
    output [0, 10] (S ratio 0.5) next to an input of the output's type."""
    q1 = np.array([0, 1, 2, 3, 5, 254, 255], np.float32)
    q2 = np.array([7, 255], np.float32)
    op, pairs = concat_op(
        [qtype([7], "u8", 5 / 255), qtype([2], "u8", 10 / 255)],
        qtype([9], "u8", 10 / 255),
        [(5 / 255) / (10 / 255), 1.0],
        axis=0,
    )
    assert pairs[0] == (1 << 30, 31)
    assert run(op, [q1, q2]).tolist() == [0, 1, 1, 2, 3, 127, 128, 7, 255]


def test_concat_notes_zero_points():
    """quantization-notes §8, example 2: S_in = 0.5, Z_in = 10 into S_out =
    1, Z_out = 3 (the first result clamps from -2)."""
    q = np.array([0, 9, 10, 11, 13, 255], np.float32)
    op, _ = concat_op([qtype([6], "u8", 0.5, 10)], qtype([6], "u8", 1.0, 3), [0.5], axis=0)
    assert run(op, [q]).tolist() == [0, 2, 3, 4, 5, 126]


def test_concat_rational_rounding_identity_and_saturation():
    """a: S ratio 0.3 (not dyadic) and a zero point -> the exact rounding of
    (q − Z)·M/2^r, which is the real rescale's rounding except on its ties;
    b: the identity (a copy); c: the identity from u8 into i8 (saturates)."""
    a, b, c = qrand((1, 2, 5)), qrand((1, 3, 5)), qrand((1, 1, 5), "u8")
    a[0, 0, :] = [-128, 127, -2, -7, -12]  # (q − Z)·0.3 = -36.3, 40.2, 1.5, 0, -1.5
    m, r = multiplier_rshift(0.3, 32)
    op = make(
        tpu.ConcatOp,
        [qtype(a.shape, "i8", 0.03, -7), qtype(b.shape, "i8", 0.1), qtype(c.shape, "u8", 0.1)],
        qtype((1, 6, 5), "i8", 0.1),
        multiplier=[m, 1, 1],
        rshift=[r, 0, 0],
        axis=-2,
    )
    out = run(op, [a, b, c])
    assert np.array_equal(out[:, :2], ref_output(a.astype(np.int64) + 7, m, r, 0, "i8"))
    assert np.array_equal(out[:, 2:5], b) and np.array_equal(out[:, 5:], np.minimum(c, 127))
    for v, q in zip(a.ravel() + 7, out[:, :2].ravel(), strict=True):
        real = Fraction(int(v) * 3, 10)
        if real.denominator != 2:  # not a tie of the real rescale
            assert q == math.floor(abs(real) + Fraction(1, 2)) * (1 if real >= 0 else -1)
    assert out[0, 0, :3].tolist() == [-36, 40, 2]


def test_concat_relu():
    a, b = qrand((4,)), qrand((3,))
    op, pairs = concat_op(
        [qtype([4], "i8", 0.2, 0), qtype([3])],
        qtype([7], "i8", 0.1, -20),
        [2.0, 1.0],
        axis=0,
        do_relu=True,
    )
    acc = np.concatenate([a, b]).astype(np.int64)
    expected = [min(max(rq(v, *pairs[i >= 4]) - 20, -20), 127) for i, v in enumerate(acc)]
    assert run(op, [a, b]).tolist() == expected


# --- reduce -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("axes,keepdims", [([2, 3], True), ([-1], False), ([], False)])
def test_reduce_sum_mean(mode, axes, keepdims):
    x = qrand((2, 3, 4, 5))
    reduced = tuple(a % 4 for a in axes) or (0, 1, 2, 3)
    acc = (x.astype(np.int64) - 6).sum(axis=reduced, keepdims=keepdims)
    count = math.prod(x.shape[a] for a in reduced)
    m, r = multiplier_rshift(1 / count if mode == "ReduceMean" else 0.05, 32)
    op = make(
        tpu.ReduceOp,
        [qtype(x.shape, "i8", 0.1, 6)],
        qtype(acc.shape, "i8", 0.1, 1),
        mode=mode,
        axes=axes,
        keepdims=keepdims,
        multiplier=[m],
        rshift=[r],
    )
    assert np.array_equal(run(op, [x]), ref_output(acc, m, r, 1, "i8"))


# --- bad input ---------------------------------------------------------------------------------


def test_bad_attributes_raise_tpuc_errors():
    x = qrand((1, 2, 4, 4))
    pool = make(
        tpu.Pool2DOp,
        [qtype(x.shape)],
        qtype((1, 2, 2, 2)),
        pool_mode="Median",
        kernel_shape=[2, 2],
        strides=[2, 2],
    )
    with pytest.raises(TpucError, match="tpu.Pool2D 'out'.*Median"):
        run(pool, [x])
    add = make(tpu.AddOp, [qtype([2]), qtype([2])], qtype([2]), multiplier=[1, 2, 3], rshift=[0])
    with pytest.raises(TpucError, match="multiplier has 3 values for 2 inputs"):
        run(add, [x.ravel()[:2], x.ravel()[:2]])
    prod = make(tpu.ReduceOp, [qtype([2, 2])], qtype([2]), mode="ReduceProd", axes=[0])
    with pytest.raises(TpucError, match="ReduceProd"):
        run(prod, [x.reshape(-1)[:4].reshape(2, 2)])


# --- float epilogue: the int32 accumulator dequantized straight to a float type -----------


@pytest.mark.parametrize("element", ["f32", "f16", "bf16"])
def test_matmul_float_result_dequantizes_the_accumulator(element):
    from xdsl.dialects.builtin import bf16, f16, f32

    from tpuc.base.numerics import f64_to_bf16, f64_to_f16

    out = {"f32": f32, "f16": f16, "bf16": bf16}[element]
    x = np.array([[3, -2], [127, -128]], np.float32)  # i8, zero point 0
    w = np.array([[1, 2], [5, -7]], np.float32)
    bias = np.array([10.0, -1.0])
    op = make(
        tpu.MatMulOp,
        [qtype(x.shape), TensorType(SI8, w.shape), TensorType(i32, [2])],
        TensorType(out, [2, 2]),
        multiplier=[3, 1431655765],
        rshift=[4, 33],
    )
    # acc = x@w + bias = [[3-10+10, 6+14-1], [127-640+10, 254+896-1]] = [[3, 19], [-503, 1149]]
    # as the chip computes it (the native target's conv -> int32, cast, f32 multiply):
    # f32(acc)·f32(M·2^-r) in float32, then rounded to the result type
    scale = np.array([3 / 16, 1431655765 / 2**33]).astype(np.float32)
    real = np.array([[3, 19], [-503, 1149]], np.float32) * scale
    want = {"f32": np.float32, "f16": f64_to_f16, "bf16": f64_to_bf16}[element](real)
    got = run(op, [x, w, bias])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.asarray(want, np.float32))


def test_conv_float_result_applies_relu_and_limit_on_real_values():
    from xdsl.dialects.builtin import f32

    x = np.array([-4, -1, 2, 9], np.float32).reshape(1, 1, 2, 2)
    w = np.array([3], np.float32).reshape(1, 1, 1, 1)
    op = make(
        tpu.Conv2DOp,
        [qtype(x.shape, "i8", 0.5, -1), TensorType(SI8, w.shape), None],
        TensorType(f32, [1, 1, 2, 2]),
        kernel_shape=[1, 1], strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], group=1,
        multiplier=[1], rshift=[2], do_relu=True, relu_limit=4.0,
    )  # fmt: skip
    # acc = 3·(q + 1) = [-9, 0, 9, 30]; ·2^-2 = [-2.25, 0, 2.25, 7.5]; relu6-like limit 4
    assert run(op, [x, w, None]).ravel().tolist() == [0.0, 0.0, 2.25, 4.0]
