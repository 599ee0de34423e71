"""Elementwise arithmetic of the TOP dialect: the op's attributes become
records of the kernel library (`tpuc.kernels.elementwise`)."""

from __future__ import annotations

from tpuc.dialects import top
from tpuc.interp.top_ops.registry import library, relu_of
from tpuc.kernels import elementwise as lib
from tpuc.kernels.elementwise import COMPARE  # noqa: F401  (re-exported)


def add_record(op) -> lib.Fold:
    return lib.Fold("Add", relu_of(op), tuple(op.value("coeff") or ()))


def compare_const_record(op) -> lib.Compare:
    return lib.Compare(op.value("mode"), float(op.value("const_val")), bool(op.value("inversed")))


def const_record(kind: str):
    def build(op) -> lib.Const:
        reverse = bool(op.value("is_reverse")) if kind == "Sub" else False
        return lib.Const(kind, float(op.value("const_val")), reverse, relu_of(op))

    build.__name__ = f"{kind.lower()}_const_record"
    return build


library(top.AddOp, add_record, lib.fold)
library(top.MulOp, lambda op: lib.Fold("Mul", relu_of(op)), lib.fold)
library(top.MaxOp, lambda op: lib.Fold("Max", relu_of(op)), lib.fold)
library(top.MinOp, lambda op: lib.Fold("Min", relu_of(op)), lib.fold)
library(top.SubOp, lambda op: lib.Binary("Sub", relu_of(op)), lib.binary)
library(top.DivOp, lambda op: lib.Binary("Div"), lib.binary)
library(top.PowTensorOp, lambda op: lib.Binary("Pow"), lib.binary)
library(top.CompareOp, lambda op: lib.Compare(op.value("mode")), lib.compare)
library(top.CompareConstOp, compare_const_record, lib.compare)
library(top.AddConstOp, const_record("Add"), lib.const)
library(top.SubConstOp, const_record("Sub"), lib.const)
library(top.MulConstOp, const_record("Mul"), lib.const)
library(top.WhereOp, lambda op: lib.Where(), lib.where)
library(top.ScaleOp, lambda op: lib.Scale(relu_of(op)), lib.scale)
