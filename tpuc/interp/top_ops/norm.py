"""Normalizations and softmax of the TOP dialect: the op's attributes
become records of the kernel library (`tpuc.kernels.norm`)."""

from __future__ import annotations

from tpuc.dialects import top
from tpuc.interp.top_ops.registry import library, relu_of
from tpuc.kernels import norm as lib


def lrn_record(op) -> lib.LRN:
    return lib.LRN(
        int(op.value("size")),
        float(op.value("alpha")),
        float(op.value("beta")),
        float(op.value("bias")),
    )


library(
    top.BatchNormOp,
    lambda op: lib.BatchNorm(float(op.value("epsilon")), relu_of(op)),
    lib.batch_norm,
)
library(
    top.LayerNormOp,
    lambda op: lib.LayerNorm(int(op.value("axis")), float(op.value("eps"))),
    lib.layer_norm,
)
library(top.InstanceNormOp, lambda op: lib.InstanceNorm(float(op.value("eps"))), lib.instance_norm)
library(
    top.GroupNormOp,
    lambda op: lib.GroupNorm(int(op.value("num_groups")), float(op.value("eps"))),
    lib.group_norm,
)
library(top.LRNOp, lrn_record, lib.lrn)
library(
    top.SoftmaxOp,
    lambda op: lib.Softmax(int(op.value("axis")), bool(op.value("log"))),
    lib.softmax,
)
