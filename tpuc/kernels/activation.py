"""Float32 unary activations and math functions (one tensor in, one out),
as one record type: `Unary(kind, alpha, beta, option)`, each kind reading
the few parameters it needs (see UNARY_PARAMS).

Transcendentals that lose accuracy in float32 (erf, GELU, softplus, mish)
are evaluated in float64 and rounded once to float32.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpuc.kernels.arrays import Array, f32, relu
from tpuc.kernels.cast import convert
from tpuc.kernels.executor import current

_ERF_SERIES_TERMS = 12
_SQRT_PI = np.sqrt(np.pi)


@dataclass(frozen=True)
class Unary:
    """`kind` names an entry of UNARY; `alpha`, `beta` and `option` are the
    parameters UNARY_PARAMS lists for it (unused ones stay at defaults)."""

    kind: str
    alpha: float | None = None
    beta: float | None = None
    option: str = ""

    def __post_init__(self) -> None:
        if self.kind not in UNARY:
            raise ValueError(f"unknown unary kind {self.kind!r}")


@dataclass(frozen=True)
class PRelu:
    """x >= 0 ? x : x · slope (slope broadcast, an operand)."""


UNARY_PARAMS = {
    "Relu": "alpha: relu_limit (None or < 0: none)",
    "LeakyRelu": "alpha",
    "Sigmoid": "alpha: scale, beta: bias, option 'log': log of the result",
    "GELU": "option 'tanh': the tanh approximation (else erf)",
    "HardSigmoid": "alpha, beta",
    "Elu": "alpha",
    "Reciprocal": "alpha: the numerator",
    "Pow": "alpha: the exponent",
    "Clip": "alpha: min, beta: max (None: unbounded)",
    "Cast": "option: the target type (F32, F16, BF16, BOOL, INT8, …)",
}
"""The parameters of the kinds that have any."""


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


def gelu(p: Unary, x: Array) -> Array:
    x = np.asarray(x, dtype=np.float64)
    if p.option == "tanh":
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def sigmoid(x: Array) -> Array:
    """1 / (1 + exp(-x)) without overflow warnings for large |x|."""
    x = np.asarray(x, dtype=np.float32)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(np.float32)


def scaled_sigmoid(p: Unary, x: Array) -> Array:
    y = np.float32(p.alpha) * sigmoid(x) + np.float32(p.beta)
    return np.log(y) if p.option == "log" else y


def hard_sigmoid(x: Array, alpha: float, beta: float) -> Array:
    return np.clip(x * np.float32(alpha) + np.float32(beta), 0.0, 1.0)


def clip(p: Unary, x: Array) -> Array:
    y = np.array(x, dtype=np.float32)
    if p.alpha is not None:
        np.maximum(y, np.float32(p.alpha), out=y)
    if p.beta is not None:
        np.minimum(y, np.float32(p.beta), out=y)
    return y


def elu(x: Array, alpha: float) -> Array:
    return np.where(x > 0, x, np.float32(alpha) * np.expm1(np.minimum(x, 0)))


def reciprocal(p: Unary, x: Array) -> Array:
    with np.errstate(divide="ignore"):
        return np.float32(p.alpha) / x


def power(p: Unary, x: Array) -> Array:
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.power(x, np.float32(p.alpha))


def rsqrt(x: Array) -> Array:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(x)


def guarded(fn: Callable[[Array], Array]) -> Callable[[Array], Array]:
    """fn without warnings for out-of-domain inputs (they give nan/inf, as ORT)."""

    def run(x: Array) -> Array:
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return fn(x)

    return run


PLAIN: dict[str, Callable[[Array], Array]] = {
    "SiLU": lambda x: x * sigmoid(x),
    "HardSwish": lambda x: x * hard_sigmoid(x, 1.0 / 6.0, 0.5),
    "Mish": lambda x: x * np.tanh(softplus(x)),
    "Softplus": softplus,
    "Tanh": np.tanh,
    "Exp": guarded(np.exp),
    "Log": guarded(np.log),
    "Sqrt": guarded(np.sqrt),
    "Rsqrt": rsqrt,
    "Erf": erf,
    "Abs": np.abs,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.rint,
    "Sin": np.sin,
    "Cos": np.cos,
    "Sign": np.sign,
    "Not": lambda x: x == 0,
}
"""The kinds without parameters."""

UNARY: dict[str, Callable[[Unary, Array], Array]] = {
    **{kind: (lambda p, x, fn=fn: fn(x)) for kind, fn in PLAIN.items()},
    "Relu": lambda p, x: relu(x, p.alpha, current().output(x.shape, [x])),
    "LeakyRelu": lambda p, x: np.where(x >= 0, x, x * np.float32(p.alpha)),
    "Sigmoid": scaled_sigmoid,
    "GELU": gelu,
    "HardSigmoid": lambda p, x: hard_sigmoid(x, p.alpha, p.beta),
    "Elu": lambda p, x: elu(x, p.alpha),
    "Reciprocal": reciprocal,
    "Pow": power,
    "Clip": clip,
    "Cast": lambda p, x: convert(x, p.option),
    "Identity": lambda p, x: x,
}


def unary(p: Unary, x: Array, *_: Array | None) -> Array:
    """The kind applied to x (operands after the first are not read)."""
    return f32(UNARY[p.kind](p, x))


def prelu(p: PRelu, x: Array, slope: Array) -> Array:
    return f32(np.where(x >= 0, x, x * slope))
