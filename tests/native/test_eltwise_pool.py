"""Native rules of the elementwise, activation, lookup-table, pooling and
softmax families: one-node ONNX models go through tpuc (INT8 calibrated on
their own input, F32/F16/BF16), native codegen and the vendor runtime; INT8
outputs must equal the TPU interpreter's bit for bit, float outputs reach a
cosine of 0.99999."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import matches, native_vs_interp, node

S = [1, 4, 6, 8]
RNG = np.random.default_rng(0)
A = (RNG.standard_normal(S) * 2).astype(np.float32)
B = RNG.standard_normal(S).astype(np.float32)
B_BC = RNG.standard_normal([1, 4, 1, 1]).astype(np.float32)
SLOPE = RNG.uniform(0.05, 0.5, (4, 1, 1)).astype(np.float32)


CASES = {
    # name: (nodes, inputs, output shape, initializers, the TPU op expected in INT8 / float)
    "add": ([node("Add", ["a", "b"], ["y"])], {"a": A, "b": B}, S, [], "tpu.Add"),
    "sub_bcast": ([node("Sub", ["a", "b"], ["y"])], {"a": A, "b": B_BC}, S, [], "tpu.Sub"),
    "mul": ([node("Mul", ["a", "b"], ["y"])], {"a": A, "b": B}, S, [], "tpu.Mul"),
    "mul_bcast": ([node("Mul", ["a", "b"], ["y"])], {"a": A, "b": B_BC}, S, [], "tpu.Mul"),
    "max": ([node("Max", ["a", "b"], ["y"])], {"a": A, "b": B}, S, [], "tpu.Max"),
    "add_const": (
        [node("Add", ["a", "c"], ["y"])], {"a": A}, S, [("c", np.float32(0.7))], "tpu.AddConst",
    ),
    "sub_const_rev": (
        [node("Sub", ["c", "a"], ["y"])], {"a": A}, S, [("c", np.float32(0.7))], "tpu.SubConst",
    ),
    "mul_const": (
        [node("Mul", ["a", "c"], ["y"])], {"a": A}, S, [("c", np.float32(0.3))], "tpu.MulConst",
    ),
    "sigmoid": ([node("Sigmoid", ["a"], ["y"])], {"a": A}, S, [], "tpu.Sigmoid"),
    "hard_sigmoid": (
        [node("HardSigmoid", ["a"], ["y"], alpha=0.3, beta=0.4)], {"a": A}, S, [],
        "tpu.HardSigmoid",
    ),
    "hard_swish": ([node("HardSwish", ["a"], ["y"])], {"a": A}, S, [], "tpu.Active"),
    "tanh": ([node("Tanh", ["a"], ["y"])], {"a": A}, S, [], "tpu.Active"),
    "relu": ([node("Relu", ["a"], ["y"])], {"a": A}, S, [], "tpu.Relu"),
    "leaky_relu": ([node("LeakyRelu", ["a"], ["y"], alpha=0.1)], {"a": A}, S, [], "tpu.LeakyRelu"),
    "prelu": ([node("PRelu", ["a", "s"], ["y"])], {"a": A}, S, [("s", SLOPE)], "tpu.PRelu"),
    "clip": (
        [node("Clip", ["a", "lo", "hi"], ["y"])], {"a": A}, S,
        [("lo", np.float32(-0.5)), ("hi", np.float32(1.5))], "tpu.Clip",
    ),
    "softmax": ([node("Softmax", ["a"], ["y"], axis=3)], {"a": A}, S, [], "tpu.Softmax"),
    "max_pool": (
        [node("MaxPool", ["a"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], {"a": A},
        [1, 4, 3, 4], [], "tpu.Pool2D",
    ),
    "avg_pool": (
        [node("AveragePool", ["a"], ["y"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1],
              count_include_pad=1)], {"a": A}, S, [], "tpu.Pool2D",
    ),
}  # fmt: skip
INT8 = ["add", "sub_bcast", "mul", "mul_bcast", "max", "sigmoid", "hard_swish", "relu", "prelu",
        "clip", "max_pool", "avg_pool", "add_const", "softmax"]  # fmt: skip
HALF = ["add", "mul_bcast", "sub_const_rev", "hard_sigmoid", "softmax", "avg_pool"]
# F32: the ops the half-float cases do not run (mul and the other constant
# forms share their rules with mul_bcast and sub_const_rev)
F32 = [n for n in CASES if n not in HALF and n not in ("mul", "add_const", "mul_const")]
PARAMS = (
    [(n, "INT8") for n in INT8]
    + [(n, "F32") for n in F32]
    + [(n, m) for n in HALF for m in ("F16", "BF16")]
)


@pytest.mark.parametrize(("name", "mode"), PARAMS, ids=[f"{n}-{m}" for n, m in PARAMS])
def test_one_op(tmp_path, name, mode):
    nodes, feeds, out_shape, inits, op_name = CASES[name]
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, feeds, {"y": out_shape}, mode, inits
    )
    if mode != "INT8":
        assert op_name in kinds
    float_out = name == "softmax"  # INT8 runs Softmax in float between casts
    matches(got, expected, "F32" if float_out else mode)


# Add/Sub over many rounding ties (|q| up to 127 on grids whose sums land
# on every residue of 2^rshift), with sums beyond 16 bits, 3 inputs, a
# broadcast input, fused ReLU and asymmetric zero points.
TS = [1, 8, 32, 32]
TA = (RNG.integers(-127, 128, TS) * 0.05).astype(np.float32)
TB = (RNG.integers(-127, 128, TS) * 0.031).astype(np.float32)
TC = (RNG.integers(-127, 128, [1, 8, 1, 32]) * 0.02).astype(np.float32)
TA.flat[0], TB.flat[0], TC.flat[0] = 127 * 0.05, 127 * 0.031, 127 * 0.02
TIES = {
    "sum3_relu": [node("Sum", ["a", "b", "c"], ["t"]), node("Relu", ["t"], ["y"])],
    "sub_relu": [node("Sub", ["a", "b"], ["t"]), node("Relu", ["t"], ["y"])],
    "add_bcast": [node("Add", ["a", "c"], ["y"])],
    # unsigned inputs at their largest stored value times the largest multiplier
    # (255·255 > 2^15: the first term must not pass through a signed 16-bit sum)
    "relu_add": [node("Relu", ["a"], ["ra"]), node("Relu", ["b"], ["rb"]),
                 node("Add", ["ra", "rb"], ["y"])],
}  # fmt: skip
TIE_PARAMS = [("sum3_relu", False), ("sum3_relu", True), ("sub_relu", True), ("add_bcast", False),
              ("relu_add", False)]  # fmt: skip


@pytest.mark.parametrize(("name", "asym"), TIE_PARAMS, ids=[f"{n}-{a}" for n, a in TIE_PARAMS])
def test_int8_add_sub_rounding_ties(tmp_path, name, asym):
    """bm1684x's INT8 Add/Sub (u8 multipliers, int32 sum in scratch, one
    requant) equals the interpreter bit for bit."""
    nodes = TIES[name]
    feeds = {
        k: v for k, v in {"a": TA, "b": TB, "c": TC}.items() if any(k in n.input for n in nodes)
    }
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, feeds, {"y": TS}, "INT8", asymmetric=asym
    )
    assert kinds & {"tpu.Add", "tpu.Sub"}
    matches(got, expected, "INT8")


@pytest.mark.parametrize("window", [(13, 13), (6, 80)], ids=["13x13", "6x80"])
def test_int8_global_average_pool_wide_window(tmp_path, window):
    """Windows wider than 7 (squeezenet's 13x13, PP-OCR's 6x80 global pools)
    run as a depthwise convolution of ones: bit-exact."""
    h, w = window
    x = RNG.standard_normal([1, 16, h, w]).astype(np.float32)
    nodes = [node("Relu", ["a"], ["r"]), node("GlobalAveragePool", ["r"], ["y"])]
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": x}, {"y": [1, 16, 1, 1]}, "INT8"
    )
    assert "tpu.Pool2D" in kinds
    matches(got, expected, "INT8")
