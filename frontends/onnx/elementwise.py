"""Elementwise ONNX ops: arithmetic, activations, comparisons, Where, Cast.

A binary op with a one-element constant operand becomes the TOP `*Const`
form (the constant is an attribute, not a weight), as TPU-MLIR does, so
that later passes and quantization see a plain scalar.
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto, TensorProto
from xdsl.ir import SSAValue

from tpuc.dialects import top
from tpuc.dialects.base import TensorOp
from tpuc.frontends.onnx.converter import OnnxConverter
from tpuc.frontends.onnx.registry import converter


def scalar_const(cv: OnnxConverter, name: str, other: str) -> float | None:
    """The value of `name` if it is a one-element constant that does not
    widen the rank of `other` under broadcasting."""
    c = cv.const(name)
    if c is None or c.size != 1:
        return None
    other_shape = cv.shape(other)
    if other_shape is None or c.ndim > len(other_shape):
        return None
    return float(c.reshape(-1)[0])


def forward(cv: OnnxConverter, node: NodeProto) -> None:
    """Output is the input (Identity, Dropout at inference, float Casts)."""
    src = node.input[0]
    cv.bind(node.output[0], cv.consts[src] if cv.is_const(src) else cv.value(src))


@converter("Identity", "Dropout")
def convert_identity(cv: OnnxConverter, node: NodeProto) -> None:
    forward(cv, node)


@converter("Add", "Sub", "Mul", "Div")
def convert_arith(cv: OnnxConverter, node: NodeProto) -> None:
    a, b = node.input[0], node.input[1]
    out, kind = node.output[0], node.op_type
    cb = scalar_const(cv, b, a) if not cv.is_const(a) else None
    if cb is not None and not (kind == "Div" and cb == 0.0):
        _arith_const(cv, kind, a, cb, out)
        return
    ca = scalar_const(cv, a, b) if not cv.is_const(b) else None
    if ca is not None:
        _const_arith(cv, kind, ca, b, out)
        return
    lhs, rhs = cv.value(a), cv.value(b)
    if kind == "Add":
        cv.emit(top.AddOp, [lhs, rhs], out)
    elif kind == "Mul":
        cv.emit(top.MulOp, [lhs, rhs], out)
    elif kind == "Sub":
        cv.emit(top.SubOp, [lhs, rhs], out)
    else:
        cv.emit(top.DivOp, [lhs, rhs], out)


def _arith_const(cv: OnnxConverter, kind: str, x: str, c: float, out: str) -> None:
    """x (op) c."""
    v = cv.value(x)
    if kind == "Add":
        cv.emit(top.AddConstOp, [v], out, {"const_val": c})
    elif kind == "Sub":
        cv.emit(top.SubConstOp, [v], out, {"const_val": c})
    elif kind == "Mul":
        cv.emit(top.MulConstOp, [v], out, {"const_val": c})
    else:
        cv.emit(top.MulConstOp, [v], out, {"const_val": 1.0 / c})


def _const_arith(cv: OnnxConverter, kind: str, c: float, x: str, out: str) -> None:
    """c (op) x."""
    v = cv.value(x)
    if kind == "Add":
        cv.emit(top.AddConstOp, [v], out, {"const_val": c})
    elif kind == "Sub":
        cv.emit(top.SubConstOp, [v], out, {"const_val": c, "is_reverse": True})
    elif kind == "Mul":
        cv.emit(top.MulConstOp, [v], out, {"const_val": c})
    else:
        cv.emit(top.ReciprocalOp, [v], out, {"const_val": c})


@converter("Sum", "Max", "Min", "Mean")
def convert_variadic(cv: OnnxConverter, node: NodeProto) -> None:
    names = [n for n in node.input if n]
    out = node.output[0]
    if len(names) == 1:
        forward(cv, node)
        return
    values = [cv.value(n) for n in names]
    if node.op_type == "Max":
        cv.emit(top.MaxOp, values, out)
    elif node.op_type == "Min":
        cv.emit(top.MinOp, values, out)
    elif node.op_type == "Sum":
        cv.emit(top.AddOp, values, out)
    else:
        total = cv.emit_temp(top.AddOp, values, f"{out}_sum", shape=cv.onnx_shapes.get(out))
        cv.emit(top.MulConstOp, [total], out, {"const_val": 1.0 / len(values)})


@converter("Pow")
def convert_pow(cv: OnnxConverter, node: NodeProto) -> None:
    base, exp = node.input[0], node.input[1]
    e = scalar_const(cv, exp, base)
    if e is not None:
        cv.emit(top.PowOp, [cv.value(base)], node.output[0], {"exponent": e})
        return
    cv.emit(top.PowTensorOp, [cv.value(base), cv.value(exp)], node.output[0])


UNARY = {
    "Relu": top.ReluOp,
    "Sigmoid": top.SigmoidOp,
    "Tanh": top.TanhOp,
    "Exp": top.ExpOp,
    "Log": top.LogOp,
    "Sqrt": top.SqrtOp,
    "Erf": top.ErfOp,
    "Abs": top.AbsOp,
    "Floor": top.FloorOp,
    "Ceil": top.CeilOp,
    "Round": top.RoundOp,
    "Sin": top.SinOp,
    "Cos": top.CosOp,
    "Sign": top.SignOp,
    "Not": top.NotOp,
    "Softplus": top.SoftplusOp,
    "Mish": top.MishOp,
    "HardSwish": top.HardSwishOp,
    "Reciprocal": top.ReciprocalOp,
}


@converter(*UNARY)
def convert_unary(cv: OnnxConverter, node: NodeProto) -> None:
    cv.emit(UNARY[node.op_type], [cv.value(node.input[0])], node.output[0])


@converter("Neg")
def convert_neg(cv: OnnxConverter, node: NodeProto) -> None:
    cv.emit(top.MulConstOp, [cv.value(node.input[0])], node.output[0], {"const_val": -1.0})


@converter("LeakyRelu")
def convert_leaky_relu(cv: OnnxConverter, node: NodeProto) -> None:
    alpha = float(cv.attrs(node).get("alpha", 0.01))
    cv.emit(top.LeakyReluOp, [cv.value(node.input[0])], node.output[0], {"alpha": alpha})


@converter("Elu")
def convert_elu(cv: OnnxConverter, node: NodeProto) -> None:
    alpha = float(cv.attrs(node).get("alpha", 1.0))
    cv.emit(top.EluOp, [cv.value(node.input[0])], node.output[0], {"alpha": alpha})


@converter("HardSigmoid")
def convert_hard_sigmoid(cv: OnnxConverter, node: NodeProto) -> None:
    attrs = cv.attrs(node)
    params = {"alpha": float(attrs.get("alpha", 0.2)), "beta": float(attrs.get("beta", 0.5))}
    cv.emit(top.HardSigmoidOp, [cv.value(node.input[0])], node.output[0], params)


@converter("Gelu")
def convert_gelu(cv: OnnxConverter, node: NodeProto) -> None:
    mode = "tanh" if cv.attrs(node).get("approximate", "none") == "tanh" else "normal"
    cv.emit(top.GELUOp, [cv.value(node.input[0])], node.output[0], {"approx_mode": mode})


@converter("PRelu")
def convert_prelu(cv: OnnxConverter, node: NodeProto) -> None:
    x, slope = node.input[0], node.input[1]
    s = scalar_const(cv, slope, x)
    if s is not None:
        cv.emit(top.LeakyReluOp, [cv.value(x)], node.output[0], {"alpha": s})
        return
    cv.emit(top.PReluOp, [cv.value(x), cv.value(slope)], node.output[0])


@converter("Clip")
def convert_clip(cv: OnnxConverter, node: NodeProto) -> None:
    attrs = cv.attrs(node)
    bounds: dict[str, float | None] = {"min": attrs.get("min"), "max": attrs.get("max")}
    runtime: dict[str, str] = {}  # bounds computed at run time
    for key, name in zip(("min", "max"), node.input[1:3], strict=False):
        if not name:
            continue
        c = cv.const(name)
        if c is None:
            runtime[key] = name
        else:
            bounds[key] = float(c.reshape(-1)[0])
    x = cv.value(node.input[0])
    if runtime:
        _clip_by_tensors(cv, node, x, bounds, runtime)
        return
    params = {k: float(v) for k, v in bounds.items() if v is not None}
    cv.emit(top.ClipOp, [x], node.output[0], params)


def _clip_by_tensors(
    cv: OnnxConverter,
    node: NodeProto,
    x: SSAValue,
    bounds: dict[str, float | None],
    runtime: dict[str, str],
) -> None:
    """min(max(x, lower), upper), as ONNX defines Clip."""
    out = node.output[0]
    steps: list[tuple[type[TensorOp], SSAValue]] = []
    for key, cls in (("min", top.MaxOp), ("max", top.MinOp)):
        if key in runtime:
            steps.append((cls, cv.value(runtime[key])))
        elif bounds[key] is not None:
            steps.append((cls, cv.weight(f"{out}_{key}", np.array(bounds[key], np.float32))))
    if len(steps) == 2:
        cls, bound = steps.pop(0)
        x = cv.emit_temp(cls, [x, bound], f"{out}_lower", shape=cv.onnx_shapes.get(out))
    cls, bound = steps[0]
    cv.emit(cls, [x, bound], out)


COMPARE = {
    "Equal": "Equal",
    "Greater": "Greater",
    "GreaterOrEqual": "GreaterOrEqual",
    "Less": "Less",
    "LessOrEqual": "LessOrEqual",
    "And": "And",
    "Or": "Or",
    "Xor": "Xor",
}


@converter(*COMPARE)
def convert_compare(cv: OnnxConverter, node: NodeProto) -> None:
    a, b = node.input[0], node.input[1]
    mode, out = COMPARE[node.op_type], node.output[0]
    cb = scalar_const(cv, b, a) if not cv.is_const(a) else None
    if cb is not None:
        cv.emit(top.CompareConstOp, [cv.value(a)], out, {"mode": mode, "const_val": cb})
        return
    ca = scalar_const(cv, a, b) if not cv.is_const(b) else None
    if ca is not None:
        attrs = {"mode": mode, "const_val": ca, "inversed": True}
        cv.emit(top.CompareConstOp, [cv.value(b)], out, attrs)
        return
    cv.emit(top.CompareOp, [cv.value(a), cv.value(b)], out, {"mode": mode})


@converter("Where")
def convert_where(cv: OnnxConverter, node: NodeProto) -> None:
    operands = [cv.value(n) for n in node.input[:3]]
    cv.emit(top.WhereOp, operands, node.output[0])


FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16}


@converter("Cast")
def convert_cast(cv: OnnxConverter, node: NodeProto) -> None:
    to = int(cv.attrs(node)["to"])
    if to in FLOAT_TYPES:
        forward(cv, node)
        return
    name = TensorProto.DataType.Name(to)
    cv.emit(top.CastOp, [cv.value(node.input[0])], node.output[0], {"to": name})
