"""FLOPs counts against hand-computed values."""

from __future__ import annotations

from xdsl.dialects.builtin import NoneType
from xdsl.ir import Block

from tpuc.dialects import top
from tpuc.dialects.base import tensor_type
from tpuc.ir.flops import op_flops


def value(shape):
    return Block(arg_types=[tensor_type(shape)]).args[0]


def none():
    return top.NoneOp.build(result_types=[NoneType()]).results[0]


def test_matmul_with_bias_and_relu():
    op = top.MatMulOp.make(
        [value([2, 8]), value([8, 4]), value([4])],
        "mm",
        {"do_relu": True},
        result_types=[tensor_type([2, 4])],
    )
    assert op_flops(op) == 8 * (2 * 8 + 1 + 1)


def test_conv_grouped_without_bias():
    op = top.ConvOp.make(
        [value([1, 4, 5, 5]), value([6, 2, 3, 3]), none()],
        "conv",
        {"kernel_shape": [3, 3], "group": 2},
        result_types=[tensor_type([1, 6, 3, 3])],
    )
    assert op_flops(op) == 54 * 2 * (2 * 3 * 3)


def test_deconv_counts_over_its_input():
    op = top.DeconvOp.make(
        [value([1, 2, 3, 3]), value([2, 4, 2, 2]), none()],
        "deconv",
        {"kernel_shape": [2, 2]},
        result_types=[tensor_type([1, 4, 6, 6])],
    )
    assert op_flops(op) == 18 * 2 * (4 * 2 * 2)


def test_pool_elementwise_and_data_movement():
    x = value([1, 2, 4, 4])
    pool = top.MaxPoolOp.make(
        [x], "pool", {"kernel_shape": [2, 2]}, result_types=[tensor_type([1, 2, 2, 2])]
    )
    relu = top.ReluOp.make([x], "relu", result_types=[tensor_type([1, 2, 4, 4])])
    reshape = top.ReshapeOp.make([x], "flat", result_types=[tensor_type([1, 32])])
    assert (op_flops(pool), op_flops(relu), op_flops(reshape)) == (8 * 4, 32, 0)
