"""Convolution, transposed convolution and matmul of the TOP dialect: the
op's attributes become records of the kernel library
(`tpuc.kernels.float_conv`), whose BLAS plans are shared with the exact
integer convolutions of the TPU interpreter."""

from __future__ import annotations

from tpuc.dialects import top
from tpuc.interp.top_ops.registry import ints, library, relu_of
from tpuc.kernels import float_conv as lib


def conv_attrs(op) -> lib.ConvAttrs:
    return lib.ConvAttrs(
        tuple(ints(op, "strides")),
        tuple(ints(op, "dilations")),
        tuple(ints(op, "pads")),
        int(op.value("group") or 1),
        relu_of(op),
    )


library(top.ConvOp, conv_attrs, lib.conv)
library(
    top.DeconvOp,
    lambda op: lib.Deconv(conv_attrs(op), tuple(ints(op, "output_padding"))),
    lib.deconv,
)
library(
    top.MatMulOp,
    lambda op: lib.MatMul(bool(op.value("right_transpose")), relu_of(op)),
    lib.matmul,
)
