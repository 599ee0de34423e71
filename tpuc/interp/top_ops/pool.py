"""Max and average pooling of the TOP dialect: the op's attributes become
the kernel library's `Pooling` record (`tpuc.kernels.pooling`)."""

from __future__ import annotations

from tpuc.dialects import top
from tpuc.interp.top_ops.registry import ints, library, relu_of
from tpuc.kernels import pooling


def pooling_record(op) -> pooling.Pooling:
    return pooling.Pooling(
        tuple(ints(op, "kernel_shape")),
        tuple(ints(op, "strides")),
        tuple(ints(op, "pads")),
        bool(op.value("ceil_mode")),
        bool(op.value("count_include_pad")),
        relu_of(op),
    )


library(top.MaxPoolOp, pooling_record, pooling.max_pool)
library(top.AvgPoolOp, pooling_record, pooling.avg_pool)
