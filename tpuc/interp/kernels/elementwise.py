"""Elementwise arithmetic with numpy broadcasting: variadic Add/Mul/Max/Min,
binary Sub/Div/Pow/Compare, the *Const forms, Where and per-channel Scale."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tpuc.dialects import top
from tpuc.interp.kernels.registry import Array, f32, fused_relu, kernel
from tpuc.kernels.executor import current

COMPARE: dict[str, Callable[[Array, Array], Array]] = {
    "Equal": np.equal,
    "NotEqual": np.not_equal,
    "Greater": np.greater,
    "GreaterOrEqual": np.greater_equal,
    "Less": np.less,
    "LessOrEqual": np.less_equal,
    "And": lambda a, b: np.logical_and(a != 0, b != 0),
    "Or": lambda a, b: np.logical_or(a != 0, b != 0),
    "Xor": lambda a, b: np.logical_xor(a != 0, b != 0),
}


def fold(ufunc: np.ufunc, inputs: list[Array], op) -> Array:
    """ufunc applied left to right over the inputs, then the op's fused ReLU.
    The first two operands are read only in the first step, so either may
    receive the result in place (when the interpreter says it is dead)."""
    first, *rest = inputs
    if not rest:
        return fused_relu(op, np.array(first, dtype=np.float32))
    shape = np.broadcast_shapes(*(np.shape(x) for x in inputs))
    acc = current().output(shape, inputs, safe=(0, 1))
    ufunc(first, rest[0], out=acc)
    for x in rest[1:]:
        ufunc(acc, x, out=acc)
    return fused_relu(op, acc)


def binary(ufunc: np.ufunc, args: list[Array]) -> Array:
    """ufunc(a, b) into a buffer of the broadcast shape (a or b in place)."""
    out = current().output(np.broadcast_shapes(np.shape(args[0]), np.shape(args[1])), args, (0, 1))
    return ufunc(args[0], args[1], out=out)


def with_const(ufunc: np.ufunc, x: Array, c: float, reverse: bool = False) -> Array:
    """ufunc(x, c) (or ufunc(c, x)) into x's buffer when x is dead."""
    out = current().output(np.shape(x), [x], (0,))
    c = np.float32(c)
    return ufunc(c, x, out=out) if reverse else ufunc(x, c, out=out)


@kernel(top.AddOp)
def add(op, args: list[Array]) -> Array:
    coeff = op.value("coeff")
    if coeff and any(c != 1 for c in coeff):
        args = [x * np.float32(c) for x, c in zip(args, coeff, strict=True)]
    return fold(np.add, args, op)


@kernel(top.MulOp)
def mul(op, args: list[Array]) -> Array:
    return fold(np.multiply, args, op)


@kernel(top.MaxOp)
def maximum(op, args: list[Array]) -> Array:
    return fold(np.maximum, args, op)


@kernel(top.MinOp)
def minimum(op, args: list[Array]) -> Array:
    return fold(np.minimum, args, op)


@kernel(top.SubOp)
def sub(op, args: list[Array]) -> Array:
    return fused_relu(op, binary(np.subtract, args))


@kernel(top.DivOp)
def div(op, args: list[Array]) -> Array:
    with np.errstate(divide="ignore", invalid="ignore"):
        return binary(np.divide, args)


@kernel(top.PowTensorOp)
def pow_tensor(op, args: list[Array]) -> Array:
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return f32(np.power(args[0], args[1]))


def compare_mode(op) -> Callable[[Array, Array], Array]:
    mode = op.value("mode")
    fn = COMPARE.get(mode)
    if fn is None:
        raise ValueError(f"unknown compare mode {mode!r}")
    return fn


@kernel(top.CompareOp)
def compare(op, args: list[Array]) -> Array:
    return compare_mode(op)(args[0], args[1]).astype(np.float32)


@kernel(top.CompareConstOp)
def compare_const(op, args: list[Array]) -> Array:
    x, c = args[0], np.float32(op.value("const_val"))
    lhs, rhs = (c, x) if op.value("inversed") else (x, c)
    return np.asarray(compare_mode(op)(lhs, rhs), dtype=np.float32)


@kernel(top.AddConstOp)
def add_const(op, args: list[Array]) -> Array:
    return fused_relu(op, with_const(np.add, args[0], op.value("const_val")))


@kernel(top.SubConstOp)
def sub_const(op, args: list[Array]) -> Array:
    return with_const(np.subtract, args[0], op.value("const_val"), bool(op.value("is_reverse")))


@kernel(top.MulConstOp)
def mul_const(op, args: list[Array]) -> Array:
    return fused_relu(op, with_const(np.multiply, args[0], op.value("const_val")))


@kernel(top.WhereOp)
def where(op, args: list[Array]) -> Array:
    cond, t, f = args
    return f32(np.where(cond != 0, t, f))


@kernel(top.ScaleOp)
def scale(op, args: list[Array | None]) -> Array:
    x, s, b = args
    shape = (-1,) + (1,) * (x.ndim - 2)
    y = np.multiply(x, f32(s).reshape(shape), out=current().output(x.shape, args, (0,)))
    if b is not None:
        y += f32(b).reshape(shape)
    return fused_relu(op, y)
