"""Reductions, ArgMax/ArgMin and TopK of the TOP dialect: the op's
attributes become records of the kernel library (`tpuc.kernels.reduce`)."""

from __future__ import annotations

from tpuc.dialects import top
from tpuc.interp.top_ops.registry import ints, library
from tpuc.kernels import reduce as lib
from tpuc.kernels.reduce import REDUCE  # noqa: F401  (re-exported)


def reduction_record(op) -> lib.Reduction:
    return lib.Reduction(op.value("mode"), tuple(ints(op, "axes")), bool(op.value("keepdims")))


def arg_record(op) -> lib.Arg:
    return lib.Arg(
        op.value("mode"),
        int(op.value("axis")),
        bool(op.value("keepdims")),
        bool(op.value("select_last_index")),
    )


def topk_record(op) -> lib.TopK:
    return lib.TopK(int(op.value("axis")), int(op.value("K")), bool(op.value("largest")))


library(top.ReduceOp, reduction_record, lib.reduce)
library(top.ArgOp, arg_record, lib.arg)
library(top.TopKOp, topk_record, lib.topk)
