"""Elementwise arithmetic with numpy broadcasting: variadic Add/Mul/Max/Min,
binary Sub/Div/Pow/Compare, the *Const forms, Where and per-channel Scale."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tpuc.dialects import top
from tpuc.interp.kernels.registry import Array, f32, fused_relu, kernel

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
    """ufunc applied left to right over the inputs into a fresh array, then
    the op's fused ReLU."""
    first, *rest = inputs
    if not rest:
        return fused_relu(op, np.array(first, dtype=np.float32))
    acc = ufunc(first, rest[0])
    for x in rest[1:]:
        if np.broadcast_shapes(acc.shape, x.shape) == acc.shape:
            ufunc(acc, x, out=acc)
        else:
            acc = ufunc(acc, x)
    return fused_relu(op, f32(acc))


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
    return fused_relu(op, f32(np.subtract(args[0], args[1])))


@kernel(top.DivOp)
def div(op, args: list[Array]) -> Array:
    with np.errstate(divide="ignore", invalid="ignore"):
        return f32(np.divide(args[0], args[1]))


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
    return fused_relu(op, f32(args[0] + np.float32(op.value("const_val"))))


@kernel(top.SubConstOp)
def sub_const(op, args: list[Array]) -> Array:
    c = np.float32(op.value("const_val"))
    return f32(c - args[0] if op.value("is_reverse") else args[0] - c)


@kernel(top.MulConstOp)
def mul_const(op, args: list[Array]) -> Array:
    return fused_relu(op, f32(args[0] * np.float32(op.value("const_val"))))


@kernel(top.WhereOp)
def where(op, args: list[Array]) -> Array:
    cond, t, f = args
    return f32(np.where(cond != 0, t, f))


@kernel(top.ScaleOp)
def scale(op, args: list[Array | None]) -> Array:
    x, s, b = args
    shape = (-1,) + (1,) * (x.ndim - 2)
    y = x * f32(s).reshape(shape)
    if b is not None:
        y += f32(b).reshape(shape)
    return fused_relu(op, f32(y))
