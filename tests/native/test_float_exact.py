"""F16/BF16 ops where tpuc's interpreter computes what the chip computes:
global average pooling bit for bit (`pooling.half_global_avg`: r(x·r(1/n)),
summed as [⌈n/32⌉, 16, 2] rounding every step), depthwise convolutions in
f32 between casts, and Sigmoid, which bm168x lowers in F32 between casts as
TPU-MLIR does (equal but for values next to a rounding tie)."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_vs_interp, node

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("side", [5, 8, 13])  # 13x13: in f32 between casts (pool.py)
def test_global_average_pool_bit_exact(tmp_path, mode, side):
    x = (RNG.standard_normal([1, 16, side, side]) * 3).astype(np.float32)
    nodes = [node("GlobalAveragePool", ["a"], ["y"])]
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": x}, {"y": [1, 16, 1, 1]}, mode
    )
    assert "tpu.Pool2D" in kinds
    assert np.array_equal(got["y"], expected["y"])


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_sigmoid_runs_in_f32_between_half_ops(tmp_path, mode):
    x = (RNG.standard_normal([1, 4, 6, 8]) * 3).astype(np.float32)
    b = RNG.standard_normal([1, 4, 6, 8]).astype(np.float32)
    nodes = [
        node("Add", ["a", "b"], ["s"]),
        node("Sigmoid", ["s"], ["t"]),
        node("Add", ["t", "b"], ["y"]),
    ]
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": x, "b": b}, {"y": x.shape}, mode
    )
    assert {"tpu.Sigmoid", "tpu.Cast"} <= kinds
    # the chip's f32 exp differs from numpy's in the last f32 bits, which the
    # rounding to the half type hides but for a value next to a tie
    same = np.count_nonzero(got["y"] == expected["y"])
    assert same >= 0.99 * got["y"].size, f"{same} of {got['y'].size} equal"
    a, b = got["y"].ravel().astype(np.float64), expected["y"].ravel().astype(np.float64)
    assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) >= 0.99999


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_depthwise_conv_in_f32_between_casts(tmp_path, mode):
    """F16/BF16 depthwise convolutions run in f32 between casts: tpuc's
    arithmetic (f32 sums, one rounding), where the chip's half kernel left a
    quarter of the values one unit off."""
    x = RNG.standard_normal([1, 24, 10, 10]).astype(np.float32)
    w = ("w", RNG.standard_normal([24, 1, 3, 3]).astype(np.float32))
    b = ("b", RNG.standard_normal([24]).astype(np.float32))
    nodes = [node("Conv", ["a", "w", "b"], ["y"], group=24, pads=[1, 1, 1, 1])]
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": x}, {"y": [1, 24, 10, 10]}, mode, inits=[w, b]
    )
    assert "tpu.Conv2D" in kinds
    same = np.count_nonzero(got["y"] == expected["y"])
    assert same == got["y"].size, f"{same} of {got['y'].size} equal"


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("kind", ["Add", "Mul"])
def test_half_constant_is_rounded_first(tmp_path, mode, kind):
    """AddConst/MulConst in F16/BF16: the chip rounds the constant to the
    half type before the operation (`half_eltwise.const`); with 1/6 in f32
    a third of the values came out one unit off. The inputs are half values
    already (the chip's input cast rounds an f16 tie otherwise than tpuc)."""
    from tpuc.base.numerics import to_bf16, to_f16

    rnd = to_bf16 if mode == "BF16" else to_f16
    x = rnd((RNG.standard_normal([1, 24, 10, 10]) * 3).astype(np.float32)).astype(np.float32)
    c = ("c", np.array(0.1666666, np.float32))
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, [node(kind, ["a", "c"], ["y"])], {"a": x}, ["y"], mode, inits=[c]
    )
    assert f"tpu.{kind}Const" in kinds
    chip, tpuc = np.asarray(got["y"]), np.asarray(expected["y"]).reshape(np.shape(got["y"]))
    wrong = np.nonzero(chip != tpuc)
    assert not wrong[0].size, (x[wrong][:5], chip[wrong][:5], tpuc[wrong][:5])


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_half_scale_rounds_product_and_bias(tmp_path, mode):
    """A BatchNormalization (tpu.Scale) with ReLU in F16/BF16: the chip
    computes r(r(x·s) + r(b)) (`half_eltwise.scale`)."""
    from tpuc.base.numerics import to_bf16, to_f16

    rnd = to_bf16 if mode == "BF16" else to_f16
    x = rnd(RNG.standard_normal([1, 24, 12, 12]).astype(np.float32)).astype(np.float32)
    inits = [
        ("s", RNG.standard_normal(24).astype(np.float32)),
        ("bb", RNG.standard_normal(24).astype(np.float32)),
        ("m", RNG.standard_normal(24).astype(np.float32)),
        ("v", (np.abs(RNG.standard_normal(24)) + 0.5).astype(np.float32)),
    ]
    nodes = [
        node("BatchNormalization", ["a", "s", "bb", "m", "v"], ["t"]),
        node("Relu", ["t"], ["y"]),
    ]
    got, expected, kinds, _ = native_vs_interp(tmp_path, nodes, {"a": x}, ["y"], mode, inits=inits)
    assert "tpu.Scale" in kinds
    assert np.array_equal(got["y"], np.asarray(expected["y"]).reshape(np.shape(got["y"])))
