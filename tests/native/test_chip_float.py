"""bm168x float ops where tpuc's TPU interpreter computes what the chip
computes, bit for bit (`tpuc.kernels.chip_float`): the f32 Softmax, LRN,
LayerNorm, average pooling and activations (Sigmoid, Tanh, GELU, Exp, Erf,
HardSwish) against the vendor runtime on crafted inputs
(their pieces: tests/kernels/test_chip_float_pieces.py)."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_vs_interp, node

RNG = np.random.default_rng(7)
F = np.float32


def crafted(shape, axis) -> np.ndarray:
    """Rows of every kind along `axis`: spreads from 0.01 to 300 (results
    that underflow, and subnormal products flushed to zero), ties at the
    maximum, constant rows, huge magnitudes and -3.4e38 (masked-like)."""
    x = np.moveaxis(RNG.standard_normal(shape).astype(F), axis, -1).copy()
    rows = x.reshape(-1, x.shape[-1])
    gains = np.array([0.01, 1, 5, 30, 100, 300], F)
    rows *= gains[np.arange(len(rows)) % len(gains), None]
    rows[1::7] = 3.0  # constant
    rows[2::7, ::3] = rows[2::7].max(axis=1, keepdims=True)  # ties at the maximum
    rows[3::7, 1::2] = -3.4e38  # masked-like
    rows[4::7] *= 1e30
    rows[5::7] *= 1e-30
    return np.moveaxis(x, -1, axis)


@pytest.mark.parametrize(
    "shape, axis",
    [([64, 1000], 1), ([3, 5000], 1), ([1, 8, 5, 5], 1), ([1, 8, 40, 40], 3), ([2, 7, 3], 1)],
    ids=["two-stage", "one-window", "inner", "last-axis", "small"],
)
def test_f32_softmax_bit_exact(tmp_path, shape, axis):
    x = crafted(shape, axis)
    nodes = [node("Softmax", ["a"], ["y"], axis=axis)]
    got, expected, kinds, _ = native_vs_interp(tmp_path, nodes, {"a": x}, {"y": shape}, "F32")
    assert "tpu.Softmax" in kinds
    a, b = got["y"].reshape(shape), expected["y"]
    # bit for bit; the rows scaled by 1e30 give NaN (inf·0 inside the chip's
    # exp), whose payload numpy's own arithmetic does not fix across versions
    same = (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))
    assert same.all(), f"{np.count_nonzero(~same)} of {same.size} differ"


@pytest.mark.parametrize("gain", [1.0, 100.0])
def test_f32_lrn_bit_exact(tmp_path, gain):
    """inception's LRN (size 5) in F32: the chip's log (mantissa halved from
    4/3 on) and exp; gain 100 spreads the window sums over many octaves."""
    x = (RNG.standard_normal([1, 70, 15, 15]) * gain).astype(F)
    nodes = [node("LRN", ["a"], ["y"], size=5, alpha=1e-4, beta=0.75, bias=1.0)]
    got, expected, kinds, _ = native_vs_interp(tmp_path, nodes, {"a": x}, {"y": x.shape}, "F32")
    assert "tpu.LRN" in kinds
    same = got["y"].reshape(x.shape).view(np.uint32) == expected["y"].view(np.uint32)
    assert same.all(), f"{np.count_nonzero(~same)} of {same.size} differ"


LAYER_NORMS = [([1, 40, 120], 1.0), ([1, 40, 120], 100.0), ([2, 16, 4], 3.0), ([1, 4, 768], 1.0)]


@pytest.mark.parametrize("shape, gain", LAYER_NORMS)
def test_f32_layer_norm_bit_exact(tmp_path, shape, gain):
    """ppocr_rec's LayerNorm (120 wide) and others: the mean in one window of
    x/n, the variance in rows of 16, 4-step rsqrt, then weight and bias."""
    n = shape[-1]
    offset = RNG.standard_normal([1, *shape[1:-1], 1]) * gain
    x = (RNG.standard_normal(shape) * gain + offset).astype(F)
    inits = [("g", RNG.standard_normal([n]).astype(F)), ("b", RNG.standard_normal([n]).astype(F))]
    nodes = [node("LayerNormalization", ["a", "g", "b"], ["y"], axis=-1, epsilon=1e-5)]
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": x}, {"y": shape}, "F32", inits=inits, opset=17
    )
    assert "tpu.LayerNorm" in kinds
    same = got["y"].reshape(shape).view(np.uint32) == expected["y"].view(np.uint32)
    assert same.all(), f"{np.count_nonzero(~same)} of {same.size} differ"


POOLS = {
    "stride-2": ([1, 24, 28, 28], dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    "edges-5x3": ([1, 16, 17, 15], dict(kernel_shape=[5, 3], strides=[2, 1], pads=[2, 1, 2, 1])),
    "with-pad": ([1, 8, 14, 14], dict(kernel_shape=[3, 3], pads=[1] * 4, count_include_pad=1)),
    "ceil": ([1, 16, 15, 15], dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    "global-6x6": ([1, 64, 6, 6], dict(kernel_shape=[6, 6])),
    "global-80x80": ([1, 8, 80, 80], dict(kernel_shape=[80, 80])),
}


@pytest.mark.parametrize("case", POOLS)
def test_f32_average_pool_bit_exact(tmp_path, case):
    """shufflenet's and inception's f32 average pools: scaled elements
    summed even/odd per window, edge rows and columns rescaled (1.5 = 3/2)."""
    shape, attrs = POOLS[case]
    x = (RNG.standard_normal(shape) * 10).astype(F)
    nodes = [node("AveragePool", ["a"], ["y"], **attrs)]
    got, expected, kinds, _ = native_vs_interp(tmp_path, nodes, {"a": x}, {"y": None}, "F32")
    assert "tpu.Pool2D" in kinds
    y = got["y"].reshape(expected["y"].shape)
    same = y.view(np.uint32) == expected["y"].view(np.uint32)
    assert same.all(), f"{np.count_nonzero(~same)} of {same.size} differ"


def activation_inputs(n: int = 1 << 17) -> np.ndarray:
    """Every range an activation sees: around 0 (±1e-3, ties of ±0 and
    ±subnormals), ±3, ±30, ±100, the exp clamp and overflow edges (±88.7,
    ±89, ±103), and magnitudes 2^−140 .. 2^127 up to ±3.4e38."""
    x = np.concatenate([
        RNG.standard_normal(n // 4) * 3, RNG.standard_normal(n // 4) * 30,
        RNG.uniform(-100, 100, n // 4), RNG.standard_normal(n // 8) * 1e-3,
        np.ldexp(RNG.uniform(1, 2, n // 8) * RNG.choice([-1, 1], n // 8),
                 RNG.integers(-140, 128, n // 8)),
    ]).astype(F)  # fmt: skip
    x[:16] = [0, -0.0, 1e-45, -1e-45, 88.7, -88.7, 89, -89, 103, -103, 1e30, -1e30,
              3.4e38, -3.4e38, 20, -20]  # fmt: skip
    return x.reshape(1, -1)


ACTIVATIONS = {
    "sigmoid": ("Sigmoid", {}, "tpu.Sigmoid"),
    "tanh": ("Tanh", {}, "tpu.Active"),
    "gelu": ("Gelu", {}, "tpu.GELU"),
    "gelu-tanh": ("Gelu", {"approximate": "tanh"}, "tpu.GELU"),
    "exp": ("Exp", {}, "tpu.Active"),
    "erf": ("Erf", {}, "tpu.Active"),
    "hard-swish": ("HardSwish", {}, "tpu.Active"),
    "mish": ("Mish", {}, "tpu.Active"),
    "softplus": ("Softplus", {}, "tpu.Active"),
}


@pytest.mark.parametrize("case", ACTIVATIONS)
def test_f32_activation_bit_exact(tmp_path, case):
    """The vendor's SIGMOID, TANH, GELU, TGELU, EXP, ERF, HSWISH, MISH and
    SOFT_PLUS actives (ppocr's BF16 Sigmoid runs in f32 between casts):
    1 / (exp(−x) + 1), 1 − 2 / (exp(min(2x, 100)) + 1), Numerical Recipes'
    erfc, x − 2x / ((e + 1)² + 1), log(exp(x) + 1), by the chip's exp, log and
    Newton divide; the sign of −0 and of subnormals in erf, the NaN exp of
    a huge negative x in Mish and Softplus."""
    op, attrs, kind = ACTIVATIONS[case]
    x = activation_inputs()
    nodes = [node(op, ["a"], ["y"], **attrs)]
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": x}, {"y": x.shape}, "F32", opset=20
    )
    assert kind in kinds
    same = got["y"].reshape(x.shape).view(np.uint32) == expected["y"].view(np.uint32)
    assert same.all(), f"{np.count_nonzero(~same)} of {same.size} differ"


def subnormal_operands(n: int = 1 << 14) -> tuple[np.ndarray, np.ndarray]:
    """Operand pairs around the subnormal range: magnitudes 2^−149 .. 2^−120
    against each other (subnormal sums and extrema) and against 2^−100 ..
    2^10 (products below 2^−126, and normal products of subnormal operands),
    both signs, ±0 and exact cases."""

    def spread(low, high, size):
        signs = RNG.choice([-1, 1], size)
        return np.ldexp(RNG.uniform(1, 2, size) * signs, RNG.integers(low, high, size)).astype(F)

    a = np.concatenate([spread(-149, -120, n // 2), spread(-140, -40, n // 2)])
    b = np.concatenate([spread(-149, -120, n // 2), spread(-100, 10, n // 2)])
    a[:8] = [1e-45, -1e-45, 1e-39, 2.0**-126, 3.0, -0.0, 1.0, 0.5]
    b[:8] = [1.0, 1.0, 1.0, 0.5, 2.0**-127, 1e-45, 1e-40, 2.0**-126]
    return a.reshape(1, 64, -1), b.reshape(1, 64, -1)


@pytest.mark.parametrize("op", ["Mul", "Add", "Sub", "Max", "Min"])
def test_f32_binary_flushes_subnormals(tmp_path, op):
    """bm168x's f32 Mul, Add, Sub, Max and Min flush subnormal operands and
    results to zero (chip_float.fold, binary): 3·2^−127 is 0, and so is
    2^−126·0.5; bit for bit against the vendor runtime."""
    a, b = subnormal_operands()
    nodes = [node(op, ["a", "b"], ["y"])]
    got, expected, kinds, _ = native_vs_interp(tmp_path, nodes, {"a": a, "b": b}, {"y": a.shape},
                                               "F32")  # fmt: skip
    assert f"tpu.{op}" in kinds
    y = got["y"].reshape(a.shape)
    same = y.view(np.uint32) == expected["y"].view(np.uint32)
    assert same.all(), f"{np.count_nonzero(~same)} of {same.size} differ"
    assert not np.any((np.abs(y) < 2.0**-126) & (y != 0))  # nothing subnormal comes out


def test_int8_network_with_a_float_softmax_is_checked_bit_for_bit(tmp_path):
    """INT8 MatMul (float epilogue) then the f32 Softmax TPU-MLIR keeps, and
    an INT8 Softmax alone (between casts): bit for bit in the vendor runtime,
    and model_deploy's check of the lone Softmax is bit for bit."""
    x = RNG.standard_normal([4, 64]).astype(F)
    w = ("w", (RNG.standard_normal([64, 100]) * 0.5).astype(F))
    nodes = [node("MatMul", ["a", "w"], ["m"]), node("Softmax", ["m"], ["y"], axis=1)]
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": x}, {"y": [4, 100]}, "INT8", inits=[w]
    )
    assert "tpu.Softmax" in kinds
    assert np.array_equal(got["y"].reshape(4, 100), expected["y"])
    x = np.clip(crafted([16, 1000], 1), -50, 50)  # a range the int8 input can hold
    (tmp_path / "alone").mkdir()
    nodes = [node("Softmax", ["a"], ["y"], axis=1)]
    got, expected, kinds, bound = native_vs_interp(
        tmp_path / "alone", nodes, {"a": x}, {"y": [16, 1000]}, "INT8"
    )
    assert "tpu.Softmax" in kinds and bound is None
    assert np.array_equal(got["y"].reshape(16, 1000), expected["y"])
