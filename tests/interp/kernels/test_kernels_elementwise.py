"""Elementwise, comparison and activation kernels against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import assert_close, rand, run_kernel, run_ort
from onnx import TensorProto

from tpuc.dialects import top

A, B = rand(2, 3, 4, 5), rand(3, 1, 5)


@pytest.mark.parametrize(
    "cls,onnx_op",
    [
        (top.AddOp, "Add"),
        (top.MulOp, "Mul"),
        (top.MaxOp, "Max"),
        (top.MinOp, "Min"),
        (top.SubOp, "Sub"),
        (top.DivOp, "Div"),
    ],
)
def test_binary(cls, onnx_op):
    rhs = B + 2.0 if onnx_op == "Div" else B
    assert_close(run_kernel(cls, [A, rhs]), run_ort(onnx_op, [A, rhs])[0])


def test_variadic_add_coeff_and_relu():
    c = rand(5)
    ours = run_kernel(top.AddOp, [A, B, c], dict(coeff=[1.0, -2.0, 0.5], do_relu=True))
    ref = run_ort("Sum", [A, (B * -2).astype(np.float32), (c * 0.5).astype(np.float32)])[0]
    assert_close(ours, np.maximum(ref, 0))
    ref_max = run_ort("Max", [A, B, c])[0]
    assert_close(run_kernel(top.MaxOp, [A, B, c]), ref_max)


def test_pow_tensor():
    x, e = rand(3, 4, low=0.1, high=2.0), rand(4, low=-2, high=2)
    assert_close(run_kernel(top.PowTensorOp, [x, e]), run_ort("Pow", [x, e])[0])


COMPARES = ["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"]


@pytest.mark.parametrize("mode", COMPARES)
def test_compare(mode):
    x = np.round(rand(3, 4) * 2).astype(np.float32)
    y = np.round(rand(4) * 2).astype(np.float32)
    ref = run_ort(mode, [x, y], output_types=[TensorProto.BOOL])[0]
    assert_close(run_kernel(top.CompareOp, [x, y], dict(mode=mode)), ref)
    ref_c = run_ort(mode, [x, np.float32(0.0)], output_types=[TensorProto.BOOL])[0]
    assert_close(run_kernel(top.CompareConstOp, [x], dict(mode=mode, const_val=0.0)), ref_c)
    ref_inv = run_ort(mode, [np.float32(0.0), x], output_types=[TensorProto.BOOL])[0]
    ours_inv = run_kernel(top.CompareConstOp, [x], dict(mode=mode, const_val=0.0, inversed=True))
    assert_close(ours_inv, ref_inv)


@pytest.mark.parametrize("mode", ["And", "Or", "Xor"])
def test_logical(mode):
    x, y = (rand(3, 4) > 0), (rand(3, 4) > 0)
    ref = run_ort(mode, [x, y], output_types=[TensorProto.BOOL])[0]
    ours = run_kernel(top.CompareOp, [x.astype(np.float32), y.astype(np.float32)], dict(mode=mode))
    assert_close(ours, ref)
    ref_not = run_ort("Not", [x], output_types=[TensorProto.BOOL])[0]
    assert_close(run_kernel(top.NotOp, [x.astype(np.float32)]), ref_not)


def test_const_ops():
    assert_close(run_kernel(top.AddConstOp, [A], dict(const_val=1.5)), A + np.float32(1.5))
    assert_close(
        run_kernel(top.SubConstOp, [A], dict(const_val=1.5, is_reverse=True)), np.float32(1.5) - A
    )
    assert_close(
        run_kernel(top.MulConstOp, [A], dict(const_val=-3.0, do_relu=True)),
        np.maximum(A * np.float32(-3.0), 0),
    )


def test_where_and_scale():
    cond = rand(3, 1, 5) > 0
    ref = run_ort("Where", [cond, A, B])[0]
    assert_close(run_kernel(top.WhereOp, [cond.astype(np.float32), A, B]), ref)
    s, b = rand(3), rand(3)
    expected = A * s.reshape(3, 1, 1) + b.reshape(3, 1, 1)
    assert_close(run_kernel(top.ScaleOp, [A, s, b]), expected)


X = rand(2, 3, 4, 5, low=-4, high=4)
POS = rand(2, 3, 4, 5, low=0.05, high=4)

UNARY = [
    (top.ReluOp, "Relu", {}, {}, X),
    (top.SigmoidOp, "Sigmoid", {}, {}, X),
    (top.TanhOp, "Tanh", {}, {}, X),
    (top.ExpOp, "Exp", {}, {}, X),
    (top.LogOp, "Log", {}, {}, POS),
    (top.SqrtOp, "Sqrt", {}, {}, POS),
    (top.ErfOp, "Erf", {}, {}, X),
    (top.AbsOp, "Abs", {}, {}, X),
    (top.FloorOp, "Floor", {}, {}, X),
    (top.CeilOp, "Ceil", {}, {}, X),
    (top.RoundOp, "Round", {}, {}, np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.7], np.float32)),
    (top.SinOp, "Sin", {}, {}, X),
    (top.CosOp, "Cos", {}, {}, X),
    (top.SignOp, "Sign", {}, {}, X),
    (top.SoftplusOp, "Softplus", {}, {}, X * 10),
    (top.MishOp, "Mish", {}, {}, X),
    (top.HardSwishOp, "HardSwish", {}, {}, X),
    (top.LeakyReluOp, "LeakyRelu", dict(alpha=0.1), dict(alpha=0.1), X),
    (top.EluOp, "Elu", dict(alpha=0.7), dict(alpha=0.7), X),
    (top.HardSigmoidOp, "HardSigmoid", dict(alpha=0.3, beta=0.4), dict(alpha=0.3, beta=0.4), X),
    (top.ClipOp, "Clip", dict(min=-1.0, max=2.0), None, X),
    (top.GELUOp, "Gelu", {}, {}, X),
    (top.GELUOp, "Gelu", dict(approx_mode="tanh"), dict(approximate="tanh"), X),
]


@pytest.mark.parametrize(
    "cls,onnx_op,attrs,onnx_attrs,x", UNARY, ids=lambda v: getattr(v, "name", None)
)
def test_unary(cls, onnx_op, attrs, onnx_attrs, x):
    if onnx_op == "Clip":
        ref = run_ort("Clip", [x, np.float32(-1.0), np.float32(2.0)])[0]
    else:
        opset = 20 if onnx_op == "Gelu" else 18
        ref = run_ort(onnx_op, [x], onnx_attrs, opset=opset)[0]
    assert_close(run_kernel(cls, [x], attrs), ref)


def test_erf_small_and_large():
    x = np.array([0, 1e-6, -1e-4, 0.3, 0.49999, 0.5, 1.7, -3.3, 6.0, -9.0], np.float32)
    ref = run_ort("Erf", [x])[0]
    ours = run_kernel(top.ErfOp, [x])
    np.testing.assert_allclose(ours, ref, rtol=2e-6, atol=1e-12)


def test_math_with_constants():
    assert_close(run_kernel(top.RsqrtOp, [POS]), 1 / np.sqrt(POS))
    assert_close(
        run_kernel(top.ReciprocalOp, [POS], dict(const_val=2.0)),
        run_ort("Div", [np.float32(2.0), POS])[0],
    )
    assert_close(
        run_kernel(top.PowOp, [POS], dict(exponent=2.5)), run_ort("Pow", [POS, np.float32(2.5)])[0]
    )
    assert_close(run_kernel(top.SiLUOp, [X]), run_ort("Mul", [X, run_ort("Sigmoid", [X])[0]])[0])
    assert_close(run_kernel(top.ReluOp, [X], dict(relu_limit=6.0)), np.clip(X, 0, 6))
    assert_close(
        run_kernel(top.SigmoidOp, [X], dict(scale=2.0, bias=-0.5)),
        2 * run_ort("Sigmoid", [X])[0] - 0.5,
    )
    assert_close(
        run_kernel(top.SigmoidOp, [X], dict(log=True)),
        run_ort("Log", [run_ort("Sigmoid", [X])[0]])[0],
    )


def test_prelu():
    slope = rand(3, 1, 1)
    assert_close(run_kernel(top.PReluOp, [X, slope]), run_ort("PRelu", [X, slope])[0])


@pytest.mark.parametrize(
    "to,onnx_type",
    [
        ("INT32", TensorProto.INT32),
        ("BOOL", TensorProto.BOOL),
        ("F16", TensorProto.FLOAT16),
        ("UINT8", TensorProto.UINT8),
    ],
)
def test_cast(to, onnx_type):
    x = X if to != "UINT8" else POS * 10
    ref = run_ort("Cast", [x], dict(to=onnx_type), output_types=[onnx_type])[0]
    assert_close(run_kernel(top.CastOp, [x], dict(to=to)), ref)


def test_cast_bf16():
    # hand-rounded: ties go to the even 7-bit mantissa; 0.1 = 0x3DCCCCCD -> 0x3DCD0000
    x = np.array([1.0, 1.00390625, 1.01171875, -3.14159, 0.1], np.float32)
    ours = run_kernel(top.CastOp, [x], dict(to="BF16"))
    expected = np.array([1.0, 1.0, 1.015625, -3.140625, 0.10009765625], np.float32)
    np.testing.assert_array_equal(ours, expected)
