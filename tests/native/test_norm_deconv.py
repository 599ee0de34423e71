"""Native rules of the norm and deconv families (LRN, Scale from a
BatchNormalization, LayerNorm, Deconv from a ConvTranspose): one-node ONNX
models through tpuc, native codegen and the vendor runtime, against tpuc's
TPU interpreter (INT8 bit for bit, floats with cosine >= 0.99999)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from native_models import check, run_both, tensor, transformed
from onnx import helper

from tpuc.dialects.base import shape_of


def build(work: Path, name: str, nodes, shape, inits=(), outputs=("y",)) -> tuple[Path, str, str]:
    """The model of input x (opset 17) transformed and calibrated -> (work, mlir, table)."""
    return work, *transformed(work, name, nodes, [("x", shape)], outputs, inits, opset=17)


RNG = np.random.default_rng(1)


@pytest.fixture(scope="module")
def lrn_model(tmp_path_factory):
    work = tmp_path_factory.mktemp("native_lrn")
    nodes = [
        helper.make_node("LRN", ["x"], ["l"], size=5, alpha=1e-3, beta=0.75, bias=1.0),
        helper.make_node("Relu", ["l"], ["y"]),  # INT8: LRN in f32 between casts
    ]
    return build(work, "lrn", nodes, [1, 8, 16, 14])


@pytest.mark.parametrize("mode", ["F32", "F16", "BF16", "INT8"])
def test_lrn(lrn_model, vendor, mode):
    check(*run_both(*lrn_model, mode, vendor), mode)


@pytest.fixture(scope="module")
def scale_model(tmp_path_factory):
    """BatchNormalization (tpuc's float Scale with a bias) and a per-channel Mul
    (a Scale without one), then a Relu fused into the Scale."""
    work = tmp_path_factory.mktemp("native_scale")
    c = 8
    inits = [
        tensor("g", RNG.uniform(0.5, 2, c).astype("f4")),
        tensor("b", RNG.standard_normal(c).astype("f4")),
        tensor("m", RNG.standard_normal(c).astype("f4") * 0.1),
        tensor("v", RNG.uniform(0.5, 2, c).astype("f4")),
        tensor("k", RNG.uniform(-2, 2, (c, 1, 1)).astype("f4")),
    ]
    nodes = [
        helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["y"]),
        helper.make_node("Mul", ["x", "k"], ["z"]),
    ]
    return build(work, "scale", nodes, [1, c, 6, 10], inits, ("y", "z"))


@pytest.mark.parametrize("mode", ["F32", "F16", "BF16", "INT8"])
def test_scale(scale_model, vendor, mode):
    check(*run_both(*scale_model, mode, vendor), mode)


@pytest.fixture(scope="module")
def layer_norm_model(tmp_path_factory):
    work = tmp_path_factory.mktemp("native_layer_norm")
    w = 24
    inits = [
        tensor("g", RNG.uniform(0.5, 2, w).astype("f4")),
        tensor("b", RNG.standard_normal(w).astype("f4")),
    ]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["l"], axis=-1, epsilon=1e-5),
        helper.make_node("Relu", ["l"], ["y"]),  # INT8: LayerNorm in f32 between casts
    ]
    return build(work, "layer_norm", nodes, [1, 10, w], inits)


@pytest.mark.parametrize("mode", ["F32", "F16", "BF16", "INT8"])
def test_layer_norm(layer_norm_model, vendor, mode):
    check(*run_both(*layer_norm_model, mode, vendor), mode)


@pytest.fixture(scope="module")
def deconv_model(tmp_path_factory):
    """A ConvTranspose with a bias, stride 2, pads and output padding over 40
    input channels (two blocks of 32 in F16/BF16), and a depthwise one."""
    work = tmp_path_factory.mktemp("native_deconv")
    c, oc = 40, 6
    inits = [
        tensor("w", RNG.standard_normal((c, oc, 3, 3)).astype("f4") * 0.2),
        tensor("b", RNG.standard_normal(oc).astype("f4")),
        tensor("d", RNG.standard_normal((c, 1, 2, 2)).astype("f4")),
    ]
    node = helper.make_node
    nodes = [
        node(
            "ConvTranspose",
            ["x", "w", "b"],
            ["y"],
            strides=[2, 2],
            pads=[1, 0, 1, 1],
            output_padding=[1, 0],
        ),  # fmt: skip
        node("ConvTranspose", ["x", "d"], ["z"], strides=[2, 2], group=c),
    ]
    return build(work, "deconv", nodes, [1, c, 5, 6], inits, ("y", "z"))


@pytest.mark.parametrize("mode", ["F32", "F16", "BF16", "INT8"])
def test_deconv(deconv_model, vendor, mode):
    check(*run_both(*deconv_model, mode, vendor), mode)


@pytest.fixture(scope="module")
def deconv_int8_model(tmp_path_factory):
    """INT8 deconvs (an int32 accumulator in scratch, then a requant per
    channel): over 72 input channels (two blocks of 64) with a bias and a
    Relu (a u8 result), grouped, and depthwise (over 16 of the channels) with
    a bias (added after the library's depthwise kernel) and a Relu; inputs mostly zero, so the
    accumulators are small and the tie-dense requants below stay in range."""
    work = tmp_path_factory.mktemp("native_deconv_int8")
    c = 72
    inits = [
        tensor("w", RNG.standard_normal((c, 20, 3, 3)).astype("f4") * 0.2),
        tensor("b", RNG.standard_normal(20).astype("f4")),
        tensor("g", RNG.standard_normal((c, 2, 2, 2)).astype("f4") * 0.2),
        tensor("d", RNG.standard_normal((16, 1, 3, 3)).astype("f4")),
        tensor("e", RNG.standard_normal(16).astype("f4")),
        tensor("s0", np.array([0], np.int64)),
        tensor("s1", np.array([16], np.int64)),
        tensor("s2", np.array([1], np.int64)),
    ]
    node = helper.make_node
    window = {"strides": [2, 2], "pads": [1, 0, 1, 1]}
    nodes = [
        node("ConvTranspose", ["x", "w", "b"], ["y0"], output_padding=[1, 0], **window),
        node("Relu", ["y0"], ["y"]),
        node("ConvTranspose", ["x", "g"], ["z"], group=4, strides=[2, 1]),
        node("Slice", ["x", "s0", "s1", "s2"], ["x16"]),
        node("ConvTranspose", ["x16", "d", "e"], ["v0"], group=16, **window),
        node("Relu", ["v0"], ["v"]),
    ]
    built = build(work, "deconv_int8", nodes, [1, c, 5, 6], inits, ("y", "z", "v"))
    x = RNG.choice([0.0] * 5 + [0.05, -0.05, 0.1], size=(1, c, 5, 6)).astype("f4")
    np.savez(work / "in.npz", x=x)
    return built


def tie_dense(*cases: tuple[int, int, str]):
    """The INT8 deconvs, in turn, with (multiplier, rshift, round mode) of
    `cases` over their first half of channels and multiplier + 1, rshift + 1
    over the rest (frequent exact ties of the rounding; two requant calls per
    image), and a fused relu on the i8 (zero point 0) result."""

    def tweak(module):
        from tpuc.dialects import tpu

        deconvs = [op for op in module.walk() if isinstance(op, tpu.DeconvOp)]
        for op, (multiplier, shift, mode) in zip(deconvs, cases, strict=True):
            oc = shape_of(op.results[0])[1]
            upper = [int(2 * k >= oc) for k in range(oc)]
            op.set_value("multiplier", [multiplier + u for u in upper])
            op.set_value("rshift", [shift + u for u in upper])
            op.set_value("round_mode", mode)
            op.set_value("do_relu", True)

    return tweak


def test_deconv_int8(deconv_int8_model, vendor):
    check(*run_both(*deconv_int8_model, "INT8", vendor), "INT8")


@pytest.mark.parametrize(
    "cases",
    [
        [(1, 2, "HalfAwayFromZero"), (3 << 29, 33, "HalfUp"), (1 << 30, 32, "HalfToEven")],
        [((1 << 30) - 1, 37, "Down"), ((1 << 31) - 2, 39, "HalfAwayFromZero"), (3, 3, "HalfUp")],
    ],
)
def test_deconv_int8_rounding(deconv_int8_model, vendor, cases):
    """The scalar requant per channel is exact at ties and with 31-bit
    multipliers and shifts up to 40, in each of tpuc's round modes."""
    check(*run_both(*deconv_int8_model, "INT8", vendor, tweak=tie_dense(*cases)), "INT8")
