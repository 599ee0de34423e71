"""Float32 elementwise arithmetic with numpy broadcasting: variadic
Add/Mul/Max/Min, binary Sub/Div/Pow/Compare, the *Const forms, Where and
per-channel Scale. Results go to an operand's buffer when the executor
says it is dead (`Executor.output`); Max/Min only select values, so they
also run on stored integers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tpuc.kernels.arrays import Array, f32, relu
from tpuc.kernels.executor import current
from tpuc.kernels.requant import NO_RELU, Relu

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

FOLDS: dict[str, np.ufunc] = {
    "Add": np.add,
    "Mul": np.multiply,
    "Max": np.maximum,
    "Min": np.minimum,
}

CONSTS: dict[str, np.ufunc] = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}


@dataclass(frozen=True)
class Fold:
    """A variadic op ("Add", "Mul", "Max", "Min") folded left to right;
    Add scales input i by coeff[i] when any is not 1."""

    kind: str
    relu: Relu = NO_RELU
    coeff: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in FOLDS:
            raise ValueError(f"unknown variadic op {self.kind!r}")


@dataclass(frozen=True)
class Binary:
    """Sub (with its fused ReLU), Div or Pow of two broadcast tensors."""

    kind: str
    relu: Relu = NO_RELU


@dataclass(frozen=True)
class Compare:
    """A COMPARE mode of two tensors, or of a tensor and `const` (the
    constant on the left when `inversed`); 1.0 where true."""

    mode: str
    const: float | None = None
    inversed: bool = False

    def __post_init__(self) -> None:
        if self.mode not in COMPARE:
            raise ValueError(f"unknown compare mode {self.mode!r}")


@dataclass(frozen=True)
class Const:
    """x <kind> value ("Add", "Sub", "Mul"; value − x when `reverse`)."""

    kind: str
    value: float
    reverse: bool = False
    relu: Relu = NO_RELU


@dataclass(frozen=True)
class Scale:
    """x · s + b per channel (axis 1)."""

    relu: Relu = NO_RELU


@dataclass(frozen=True)
class Where:
    """cond != 0 ? t : f."""


def fused(r: Relu, y: Array) -> Array:
    """The fused ReLU, in place (y is owned)."""
    return relu(y, r.limit) if r.on else y


def fold(p: Fold, *args: Array) -> Array:
    """The first two operands are read only in the first step, so either may
    receive the result in place (when the executor says it is dead)."""
    inputs: Sequence[Array] = args
    if p.coeff and any(c != 1 for c in p.coeff):
        inputs = [x * np.float32(c) for x, c in zip(args, p.coeff, strict=True)]
    first, *rest = inputs
    if not rest:
        return fused(p.relu, np.array(first, dtype=np.float32))
    ufunc = FOLDS[p.kind]
    shape = np.broadcast_shapes(*(np.shape(x) for x in inputs))
    acc = current().output(shape, inputs, safe=(0, 1))
    ufunc(first, rest[0], out=acc)
    for x in rest[1:]:
        ufunc(acc, x, out=acc)
    return fused(p.relu, acc)


def _into(ufunc: np.ufunc, a: Array, b: Array) -> Array:
    """ufunc(a, b) into a buffer of the broadcast shape (a or b in place)."""
    out = current().output(np.broadcast_shapes(np.shape(a), np.shape(b)), (a, b), (0, 1))
    return ufunc(a, b, out=out)


def binary(p: Binary, a: Array, b: Array) -> Array:
    if p.kind == "Sub":
        return fused(p.relu, _into(np.subtract, a, b))
    if p.kind == "Div":
        with np.errstate(divide="ignore", invalid="ignore"):
            return _into(np.divide, a, b)
    if p.kind == "Pow":
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return f32(np.power(a, b))
    raise ValueError(f"unknown binary op {p.kind!r}")


def compare(p: Compare, a: Array, b: Array | None = None) -> Array:
    fn = COMPARE[p.mode]
    if p.const is None:
        return fn(a, b).astype(np.float32)
    c = np.float32(p.const)
    lhs, rhs = (c, a) if p.inversed else (a, c)
    return np.asarray(fn(lhs, rhs), dtype=np.float32)


def const(p: Const, x: Array) -> Array:
    """ufunc(x, c) (or ufunc(c, x)) into x's buffer when x is dead."""
    out = current().output(np.shape(x), (x,), (0,))
    c = np.float32(p.value)
    ufunc = CONSTS[p.kind]
    y = ufunc(c, x, out=out) if p.reverse else ufunc(x, c, out=out)
    return fused(p.relu, y)


def where(p: Where, cond: Array, t: Array, f: Array) -> Array:
    return f32(np.where(cond != 0, t, f))


def scale(p: Scale, x: Array, s: Array, b: Array | None = None) -> Array:
    shape = (-1,) + (1,) * (x.ndim - 2)
    y = np.multiply(x, f32(s).reshape(shape), out=current().output(x.shape, (x, s, b), (0,)))
    if b is not None:
        y += f32(b).reshape(shape)
    return fused(p.relu, y)
