"""Unary activations and math functions (one tensor in, one out).

Transcendentals that lose accuracy in float32 (erf, GELU, softplus, mish)
are evaluated in float64 and rounded once to float32.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tpuc.dialects import top
from tpuc.dtypes import ELEMENT_TYPES
from tpuc.interp.kernels.registry import Array, f32, kernel, relu
from tpuc.kernels.executor import current
from tpuc.numerics import to_bf16

_ERF_SERIES_TERMS = 12
_SQRT_PI = np.sqrt(np.pi)


def erf(x: Array) -> Array:
    """erf in float64: a Maclaurin series for |x| < 0.5, else the Chebyshev
    fit of erfc (Numerical Recipes' erfcc, relative error < 1.2e-7)."""
    x = np.asarray(x, dtype=np.float64)
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    coeffs = (
        0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
        -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223,
    )  # fmt: skip
    poly = np.zeros_like(z)
    for c in coeffs:
        poly = poly * t + c
    with np.errstate(under="ignore"):
        erfc = t * np.exp(-z * z + poly)
    far = np.where(x >= 0, 1.0 - erfc, erfc - 1.0)
    near = np.zeros_like(x)
    term = x.copy()
    x2 = x * x
    for n in range(_ERF_SERIES_TERMS):
        near += term / (2 * n + 1)
        term = term * (-x2) / (n + 1)
    return np.where(z < 0.5, near * (2.0 / _SQRT_PI), far)


def softplus(x: Array) -> Array:
    return np.logaddexp(0.0, np.asarray(x, dtype=np.float64))


def gelu(op, x: Array) -> Array:
    x = np.asarray(x, dtype=np.float64)
    if op.value("approx_mode") == "tanh":
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def sigmoid(x: Array) -> Array:
    """1 / (1 + exp(-x)) without overflow warnings for large |x|."""
    x = np.asarray(x, dtype=np.float32)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(np.float32)


def scaled_sigmoid(op, x: Array) -> Array:
    y = np.float32(op.value("scale")) * sigmoid(x) + np.float32(op.value("bias"))
    return np.log(y) if op.value("log") else y


def hard_sigmoid(x: Array, alpha: float, beta: float) -> Array:
    return np.clip(x * np.float32(alpha) + np.float32(beta), 0.0, 1.0)


def clip(op, x: Array) -> Array:
    lo, hi = op.value("min"), op.value("max")
    y = np.array(x, dtype=np.float32)
    if lo is not None:
        np.maximum(y, np.float32(lo), out=y)
    if hi is not None:
        np.minimum(y, np.float32(hi), out=y)
    return y


def elu(x: Array, alpha: float) -> Array:
    return np.where(x > 0, x, np.float32(alpha) * np.expm1(np.minimum(x, 0)))


def cast(op, x: Array) -> Array:
    """Convert through the target type, then back to float32."""
    to = str(op.value("to") or "F32").upper()
    if to in ("F32", "FLOAT32", "FLOAT", "F64", "FLOAT64", "DOUBLE"):
        return x
    if to in ("F16", "FLOAT16"):
        return x.astype(np.float16)
    if to in ("BF16", "BFLOAT16"):
        return to_bf16(x)
    if to == "BOOL":
        return x != 0
    dtype = INT_TYPES.get(to)
    if dtype is None:
        raise ValueError(f"unknown cast target {to!r}")
    with np.errstate(invalid="ignore"):
        return np.trunc(x).astype(np.int64).astype(dtype)


_INT_NAMES = {
    "INT8": "i8", "UINT8": "u8", "INT16": "i16", "UINT16": "u16",
    "INT32": "i32", "UINT32": "u32", "INT64": "i64", "UINT64": "u64",
    "I8": "i8", "U8": "u8", "I16": "i16", "I32": "i32", "I64": "i64",
}  # fmt: skip
INT_TYPES = {to: np.dtype(ELEMENT_TYPES[name].storage) for to, name in _INT_NAMES.items()}
"""Cast's integer `to` spellings -> numpy dtype (from tpuc.dtypes)."""


def reciprocal(op, x: Array) -> Array:
    with np.errstate(divide="ignore"):
        return np.float32(op.value("const_val")) / x


def power(op, x: Array) -> Array:
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.power(x, np.float32(op.value("exponent")))


def rsqrt(x: Array) -> Array:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(x)


def guarded(fn: Callable[[Array], Array]) -> Callable[[Array], Array]:
    """fn without warnings for out-of-domain inputs (they give nan/inf, as ORT)."""

    def run(x: Array) -> Array:
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return fn(x)

    return run


UNARY: dict[type, Callable[[Array], Array]] = {
    top.SiLUOp: lambda x: x * sigmoid(x),
    top.HardSwishOp: lambda x: x * hard_sigmoid(x, 1.0 / 6.0, 0.5),
    top.MishOp: lambda x: x * np.tanh(softplus(x)),
    top.SoftplusOp: softplus,
    top.TanhOp: np.tanh,
    top.ExpOp: guarded(np.exp),
    top.LogOp: guarded(np.log),
    top.SqrtOp: guarded(np.sqrt),
    top.RsqrtOp: rsqrt,
    top.ErfOp: erf,
    top.AbsOp: np.abs,
    top.FloorOp: np.floor,
    top.CeilOp: np.ceil,
    top.RoundOp: np.rint,
    top.SinOp: np.sin,
    top.CosOp: np.cos,
    top.SignOp: np.sign,
    top.NotOp: lambda x: x == 0,
}

WITH_ATTRS: dict[type, Callable[..., Array]] = {
    top.ReluOp: lambda op, x: relu(x, op.value("relu_limit"), current().output(x.shape, [x])),
    top.LeakyReluOp: lambda op, x: np.where(x >= 0, x, x * np.float32(op.value("alpha"))),
    top.SigmoidOp: scaled_sigmoid,
    top.GELUOp: gelu,
    top.HardSigmoidOp: lambda op, x: hard_sigmoid(x, op.value("alpha"), op.value("beta")),
    top.EluOp: lambda op, x: elu(x, op.value("alpha")),
    top.ReciprocalOp: reciprocal,
    top.PowOp: power,
    top.ClipOp: clip,
    top.CastOp: cast,
    top.InputOp: lambda op, x: x,
}


def _register() -> None:
    for cls, fn in UNARY.items():
        kernel(cls)(lambda op, args, fn=fn: f32(fn(args[0])))
    for cls, fn in WITH_ATTRS.items():
        kernel(cls)(lambda op, args, fn=fn: f32(fn(op, args[0])))


_register()


@kernel(top.PReluOp)
def prelu(op, args: list[Array]) -> Array:
    x, slope = args
    return f32(np.where(x >= 0, x, x * slope))
