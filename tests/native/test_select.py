"""Native rules of the select family (select.py) and the forms it adds to
conv.py and data.py: one-node ONNX models go through tpuc (INT8 calibrated
on their own input, F32/F16/BF16), native codegen and the vendor runtime;
INT8 outputs must equal the TPU interpreter's bit for bit, float outputs
reach a cosine of 0.99999 (the chip's float division, LN and EXP are not
correctly rounded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from native_models import matches, native_vs_interp, node

S = [1, 4, 6, 8]
RNG = np.random.default_rng(3)
A = (RNG.standard_normal(S) * 2).astype(np.float32)
B = RNG.standard_normal(S).astype(np.float32)
B_BC = RNG.uniform(0.5, 2.0, [1, 4, 1, 1]).astype(np.float32)
POS = RNG.uniform(0.25, 3.0, S).astype(np.float32)
ROUNDED = np.round(A).astype(np.float32)  # ties for Equal / Not
COND = (RNG.standard_normal(S) > 0).astype(np.float32)
COND_BC = np.array([[[[1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0]]]], np.float32)
X1D = RNG.standard_normal([1, 4, 9]).astype(np.float32)
W1D = (RNG.standard_normal([6, 4, 3]) * 0.5).astype(np.float32)
SMALL = RNG.standard_normal([4, 1]).astype(np.float32)


def c(value) -> np.ndarray:
    return np.asarray(value, np.float32)


FLOAT_OPS = [
    # (node, output shape): each its own output of one model; the op each lowers to
    (node("Div", ["a", "b_bc"], ["div"]), S),  # tpu.Div (f32 in INT8 mode, via f32 in F16/BF16)
    (node("Reciprocal", ["p"], ["reciprocal"]), S),  # tpu.Reciprocal
    (node("Pow", ["a", "two"], ["square"]), S),  # tpu.Pow: x·x
    (node("Pow", ["a", "three"], ["cube"]), S),  # x·exp(2·ln|x|)
    (node("Pow", ["p", "half"], ["sqrt"]), S),  # SQRT
    (node("Pow", ["p", "three_halves"], ["fraction"]), S),  # exp(1.5·ln x)
    (node("Pow", ["p", "b"], ["pow_tensor"]), S),  # tpu.PowTensor
    (node("Greater", ["a", "b"], ["greater"]), S),  # tpu.Compare
    (node("Equal", ["r", "levels"], ["equal"]), S),  # GE·LE, with −0 == +0
    (node("Less", ["a", "quarter"], ["less_const"]), S),  # tpu.CompareConst
    (node("Greater", ["quarter", "a"], ["greater_inversed"]), S),  # flipped to x < c
    (node("Equal", ["r", "zero"], ["equal_zero"]), S),
    (node("Not", ["r"], ["not"]), S),  # tpu.Not
    (node("Where", ["cond", "a", "b"], ["where"]), S),  # tpu.Where
    (node("Where", ["cond_bc", "a", "b_bc"], ["where_bc"]), S),  # operands tiled first
]
FLOAT_FEEDS = {"a": A, "b": B, "b_bc": B_BC, "p": POS, "r": ROUNDED, "cond": COND}
FLOAT_INITS = [
    ("two", c(2.0)), ("three", c(3.0)), ("half", c(0.5)), ("three_halves", c(1.5)),
    ("quarter", c(0.25)), ("zero", c(0.0)), ("cond_bc", COND_BC),
    ("levels", c([[[[0.0]], [[1.0]], [[-1.0]], [[2.0]]]])),
]  # fmt: skip
FLOAT_KINDS = {"tpu.Div", "tpu.Reciprocal", "tpu.Pow", "tpu.PowTensor", "tpu.Compare",
               "tpu.CompareConst", "tpu.Not", "tpu.Where"}  # fmt: skip
SHAPE_OPS = [
    (node("Conv", ["x1d", "w1d"], ["conv1d"], dilations=[2], pads=[1, 0]), [1, 6, 6]),
    (node("Expand", ["small", "to"], ["expand"]), [2, 4, 3]),  # adds a dim, tiles two axes
]
SHAPE_INITS = [("w1d", W1D), ("to", np.array([2, 4, 3], np.int64))]


def check_model(tmp: Path, ops, feeds, inits, mode: str, kinds: set[str]) -> None:
    from tpuc.tools.deploy_native import native_differences

    nodes = [n for n, _ in ops]
    outputs = {n.output[0]: shape for n, shape in ops}
    got, expected, found, bound = native_vs_interp(tmp, nodes, feeds, outputs, mode, inits)
    assert kinds <= found, sorted(kinds - found)
    assert set(got) == set(outputs)
    for name in outputs:  # one message per output that misses
        assert not native_differences({name: got[name]}, expected, bound), name


@pytest.mark.parametrize("mode", ["F32", "F16", "BF16", "INT8"])
def test_float_ops(tmp_path, mode):
    """Division, powers, comparisons and selects (float in every mode; the
    INT8 model computes them in f32 between casts: cosine, as model_deploy)."""
    # INT8 makes Pow, Reciprocal, CompareConst and Not lookup tables
    kinds = (
        {"tpu.Div", "tpu.PowTensor", "tpu.Compare", "tpu.Where"} if mode == "INT8" else FLOAT_KINDS
    )
    check_model(tmp_path, FLOAT_OPS, FLOAT_FEEDS, FLOAT_INITS, mode, kinds)


@pytest.mark.parametrize("mode", ["INT8", "F32", "BF16"])
def test_conv1d_and_expand(tmp_path, mode):
    """A 1-D convolution (its 2-D view) and an expand that adds dims (INT8: bit for bit)."""
    feeds = {"x1d": X1D, "small": SMALL}
    check_model(tmp_path, SHAPE_OPS, feeds, SHAPE_INITS, mode, {"tpu.Conv2D", "tpu.Expand"})


@pytest.mark.parametrize("mode", ["F32", "BF16"])
def test_float_sum_of_three_and_half_activations(tmp_path, mode):
    """A three-input float Sum is a chain of adds in f32 (between casts for
    half types); half-float activations the chip's half kernels refuse (tanh,
    erf, sqrt) run in f32 between casts."""
    rng = np.random.default_rng(5)
    feeds = {k: rng.standard_normal([1, 4, 6, 6]).astype(np.float32) for k in "abc"}
    nodes = [
        node("Sum", ["a", "b", "c"], ["s"]),
        node("Tanh", ["s"], ["t"]),
        node("Erf", ["t"], ["e"]),
        node("Abs", ["e"], ["p"]),
        node("Sqrt", ["p"], ["y"]),
    ]
    got, expected, kinds, _ = native_vs_interp(tmp_path, nodes, feeds, {"y": [1, 4, 6, 6]}, mode)
    assert "tpu.Add" in kinds
    matches(got, expected, mode)  # F32, BF16: cosine
