"""MaxPool and AveragePool kernels against onnxruntime."""

from __future__ import annotations

import pytest
from interp_helpers import assert_close, rand, run_kernel, run_ort

from tpuc.dialects import top

POOLS = [
    ((1, 2, 7, 7), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 8, 8), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 0, 0], ceil_mode=1)),
    ((1, 2, 7, 9), dict(kernel_shape=[2, 3], strides=[2, 2], pads=[1, 0, 0, 1], ceil_mode=1)),
    ((2, 3, 6, 6), dict(kernel_shape=[6, 6], strides=[1, 1], pads=[0, 0, 0, 0])),  # global
    ((1, 2, 10, 10), dict(kernel_shape=[9, 9], strides=[1, 1], pads=[4, 4, 4, 4])),  # large
    ((1, 3, 11), dict(kernel_shape=[3], strides=[2], pads=[1, 1], ceil_mode=1)),  # 1-D
    ((1, 2, 5, 5, 5), dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2], pads=[0] * 6)),  # 3-D
]


@pytest.mark.parametrize("shape,attrs", POOLS)
def test_max_pool(shape, attrs):
    x = rand(*shape)
    ref = run_ort("MaxPool", [x], attrs)[0]
    ours = run_kernel(top.MaxPoolOp, [x], dict(attrs, ceil_mode=bool(attrs.get("ceil_mode"))))
    assert_close(ours, ref)


@pytest.mark.parametrize("shape,attrs", POOLS)
@pytest.mark.parametrize("include_pad", [0, 1])
def test_avg_pool(shape, attrs, include_pad):
    x = rand(*shape)
    onnx_attrs = dict(attrs, count_include_pad=include_pad)
    ref = run_ort("AveragePool", [x], onnx_attrs)[0]
    top_attrs = dict(
        attrs, ceil_mode=bool(attrs.get("ceil_mode")), count_include_pad=bool(include_pad)
    )
    assert_close(run_kernel(top.AvgPoolOp, [x], top_attrs), ref)


def test_max_pool_fused_relu():
    x = rand(1, 2, 6, 6) - 0.5
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2])
    ref = run_ort("MaxPool", [x], attrs)[0].clip(min=0)
    assert_close(run_kernel(top.MaxPoolOp, [x], dict(attrs, do_relu=True)), ref)
