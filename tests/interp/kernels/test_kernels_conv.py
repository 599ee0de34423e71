"""Conv, ConvTranspose and MatMul kernels against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import assert_close, rand, run_kernel, run_ort

from tpuc.dialects import top

CONVS = [
    # (x shape, w shape, kernel attrs) — 2-D unless noted
    ((1, 3, 9, 9), (4, 3, 3, 3), dict(strides=[1, 1], pads=[1, 1, 1, 1])),
    ((2, 4, 10, 8), (6, 2, 3, 3), dict(strides=[2, 1], pads=[0, 1, 2, 1], group=2)),
    ((1, 6, 9, 9), (6, 1, 3, 3), dict(strides=[1, 1], pads=[1, 1, 1, 1], group=6)),
    ((1, 6, 9, 9), (6, 1, 3, 3), dict(strides=[2, 2], pads=[1, 0, 1, 2], group=6)),
    (
        (1, 3, 8, 8),
        (6, 1, 3, 3),
        dict(strides=[1, 1], pads=[2, 2, 2, 2], group=3, dilations=[2, 2]),
    ),  # depthwise, multiplier 2
    ((1, 4, 11, 11), (5, 4, 3, 3), dict(strides=[2, 2], pads=[0, 0, 0, 0], dilations=[2, 3])),
    ((1, 8, 7, 7), (5, 8, 1, 1), dict(strides=[1, 1], pads=[0, 0, 0, 0])),
    ((1, 8, 7, 7), (5, 8, 1, 1), dict(strides=[2, 2], pads=[0, 0, 0, 0])),
    ((1, 8, 7, 7), (5, 8, 1, 1), dict(strides=[1, 1], pads=[1, 0, 0, 1])),
    ((1, 3, 12), (4, 3, 5), dict(strides=[2], pads=[2, 1], dilations=[1])),  # 1-D
    ((1, 2, 5, 6, 6), (3, 2, 3, 3, 3), dict(strides=[1, 2, 1], pads=[1] * 6)),  # 3-D
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONVS)
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv(x_shape, w_shape, attrs, with_bias):
    x, w = rand(*x_shape), rand(*w_shape)
    b = rand(w_shape[0]) if with_bias else None
    attrs = dict(kernel_shape=list(w_shape[2:]), **attrs)
    ref = run_ort("Conv", [x, w] + ([b] if with_bias else []), attrs)[0]
    assert_close(run_kernel(top.ConvOp, [x, w, b], attrs), ref)


def test_conv_fused_relu6():
    x, w, b = rand(1, 2, 6, 6), rand(3, 2, 3, 3), rand(3)
    attrs = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    ref = np.clip(run_ort("Conv", [x, w, b], attrs)[0], 0, 0.5)
    ours = run_kernel(top.ConvOp, [x, w, b], dict(attrs, do_relu=True, relu_limit=0.5))
    assert_close(ours, ref)


DECONVS = [
    ((1, 4, 5, 5), (4, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])),
    ((2, 4, 4, 6), (4, 2, 3, 2), dict(strides=[1, 2], pads=[0, 1, 1, 0], group=2)),
    ((1, 6, 4, 4), (6, 1, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1], group=6)),
    ((1, 2, 4, 4), (2, 3, 3, 3), dict(strides=[3, 2], dilations=[2, 1], output_padding=[2, 0])),
    ((1, 3, 7), (3, 2, 4), dict(strides=[2], pads=[1, 2])),  # 1-D
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", DECONVS)
def test_conv_transpose(x_shape, w_shape, attrs):
    x, w = rand(*x_shape), rand(*w_shape)
    b = rand(w_shape[1] * attrs.get("group", 1))
    attrs = dict(kernel_shape=list(w_shape[2:]), **attrs)
    ref = run_ort("ConvTranspose", [x, w, b], attrs)[0]
    assert_close(run_kernel(top.DeconvOp, [x, w, b], attrs), ref)


@pytest.mark.parametrize(
    "a_shape,b_shape",
    [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 6)), ((4,), (4, 3))],
)
def test_matmul(a_shape, b_shape):
    a, b = rand(*a_shape), rand(*b_shape)
    assert_close(run_kernel(top.MatMulOp, [a, b, None]), run_ort("MatMul", [a, b])[0])


def test_gemm_with_bias_transposed_right():
    a, w, c = rand(3, 8), rand(5, 8), rand(5)
    ref = run_ort("Gemm", [a, w, c], dict(transB=1))[0]
    ours = run_kernel(top.MatMulOp, [a, w, c], dict(right_transpose=True))
    assert_close(ours, ref)
    relu = run_kernel(top.MatMulOp, [a, w, c], dict(right_transpose=True, do_relu=True))
    assert_close(relu, np.maximum(ref, 0))
