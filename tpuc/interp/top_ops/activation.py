"""Unary activations and math functions of the TOP dialect: the op's
attributes become the kernel library's `Unary` record
(`tpuc.kernels.activation`), built once per op."""

from __future__ import annotations

from tpuc.dialects import top
from tpuc.interp.top_ops.registry import library
from tpuc.kernels import activation as lib
from tpuc.kernels.activation import erf, sigmoid, softplus  # noqa: F401  (re-exported)
from tpuc.kernels.cast import INT_TYPES  # noqa: F401  (re-exported)

PLAIN: dict[type, str] = {
    top.SiLUOp: "SiLU",
    top.HardSwishOp: "HardSwish",
    top.MishOp: "Mish",
    top.SoftplusOp: "Softplus",
    top.TanhOp: "Tanh",
    top.ExpOp: "Exp",
    top.LogOp: "Log",
    top.SqrtOp: "Sqrt",
    top.RsqrtOp: "Rsqrt",
    top.ErfOp: "Erf",
    top.AbsOp: "Abs",
    top.FloorOp: "Floor",
    top.CeilOp: "Ceil",
    top.RoundOp: "Round",
    top.SinOp: "Sin",
    top.CosOp: "Cos",
    top.SignOp: "Sign",
    top.NotOp: "Not",
    top.InputOp: "Identity",
}
"""Op classes whose kernel takes no parameter -> their `Unary` kind."""


def _float(op, key: str) -> float | None:
    value = op.value(key)
    return None if value is None else float(value)


WITH_PARAMS = {
    top.ReluOp: lambda op: lib.Unary("Relu", _float(op, "relu_limit")),
    top.LeakyReluOp: lambda op: lib.Unary("LeakyRelu", _float(op, "alpha")),
    top.SigmoidOp: lambda op: lib.Unary(
        "Sigmoid", _float(op, "scale"), _float(op, "bias"), "log" if op.value("log") else ""
    ),
    top.GELUOp: lambda op: lib.Unary("GELU", option=op.value("approx_mode") or ""),
    top.HardSigmoidOp: lambda op: lib.Unary("HardSigmoid", _float(op, "alpha"), _float(op, "beta")),
    top.EluOp: lambda op: lib.Unary("Elu", _float(op, "alpha")),
    top.ReciprocalOp: lambda op: lib.Unary("Reciprocal", _float(op, "const_val")),
    top.PowOp: lambda op: lib.Unary("Pow", _float(op, "exponent")),
    top.ClipOp: lambda op: lib.Unary("Clip", _float(op, "min"), _float(op, "max")),
    top.CastOp: lambda op: lib.Unary("Cast", option=str(op.value("to") or "F32").upper()),
}
"""Op classes -> the build of their `Unary` record."""


def _register() -> None:
    for cls, kind in PLAIN.items():
        library(cls, lambda op, kind=kind: lib.Unary(kind), lib.unary)
    for cls, build in WITH_PARAMS.items():
        library(cls, build, lib.unary)
    library(top.PReluOp, lambda op: lib.PRelu(), lib.prelu)


_register()
