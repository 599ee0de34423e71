"""Attribute declarations and op base classes shared by the TOP op families."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    f64,
    i64,
)
from xdsl.irdl import (
    operand_def,
    opt_attr_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure

from tpuc.dialects.base import AnyTensor, TensorOp


def flag(default: bool = False):
    """An optional boolean attribute with a default."""
    return opt_attr_def(IntegerAttr, BoolAttr.from_bool(default))


def integer(default: int | None = None):
    return opt_attr_def(IntegerAttr, None if default is None else IntegerAttr(default, i64))


def real(default: float | None = None):
    return opt_attr_def(FloatAttr, None if default is None else FloatAttr(default, f64))


def ints():
    return opt_attr_def(ArrayAttr)


def text(default: str | None = None):
    return opt_attr_def(StringAttr, None if default is None else StringAttr(default))


class UnaryOp(TensorOp):
    """One tensor in, one tensor out."""

    input = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    traits = traits_def(Pure())


class ReluFusedOp(TensorOp):
    """Ops that can absorb a trailing ReLU (relu_limit < 0: no upper bound)."""

    do_relu = flag()
    relu_limit = real(-1.0)


class VariadicOp(ReluFusedOp):
    inputs = var_operand_def(AnyTensor)
    output = result_def(AnyTensor)
    traits = traits_def(Pure())


class BinaryOp(TensorOp):
    lhs = operand_def(AnyTensor)
    rhs = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    traits = traits_def(Pure())
