"""Native rules of the norm and deconv families (LRN, Scale from a
BatchNormalization, LayerNorm, Deconv from a ConvTranspose): one-node ONNX
models through tpuc, native codegen and the vendor runtime, against tpuc's
TPU interpreter (INT8 bit for bit, floats with cosine >= 0.99999)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

COSINE = 0.99999


@pytest.fixture(scope="module")
def vendor():
    from tpuc.vendor.fetch import locate

    return locate()  # CI fetches the vendor component: fail, never skip, without it


def build(work: Path, name: str, nodes, shape, inits=(), outputs=("y",)) -> tuple[Path, str, str]:
    """The ONNX model (input x), model_transform, run_calibration."""
    from tpuc.tools import model_transform, run_calibration

    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "g",
        [value("x", TensorProto.FLOAT, shape)],
        [value(n, TensorProto.FLOAT, None) for n in outputs],
        list(inits),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(work / f"{name}.onnx"))
    rng = np.random.default_rng(0)
    np.savez(work / "in.npz", x=rng.standard_normal(shape).astype("f4"))
    samples = work / "samples"
    samples.mkdir()
    for i in range(3):
        np.savez(samples / f"s{i}.npz", x=rng.standard_normal(shape).astype("f4"))
    mlir, table = str(work / f"{name}.mlir"), str(work / f"{name}_cali_table")
    argv = ["--model_name", name, "--model_def", str(work / f"{name}.onnx"), "--mlir", mlir]
    assert model_transform.run([*argv, "--test_input", str(work / "in.npz")]) == 0
    assert run_calibration.run([mlir, "--dataset", str(samples), "-o", table]) == 0
    return work, mlir, table


def run_both(work: Path, mlir: str, table: str, mode: str, vendor):
    """(native outputs, TPU interpreter outputs), real values by name."""
    from tpuc.deploy import lower
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.module_io import load_module
    from tpuc.passes.native.emit import generate_native
    from tpuc.pipeline import finalize
    from tpuc.vendor.run import run_native
    from tpuc.weights import WeightStore

    module, store = load_module(mlir)
    lower(module, "bm1684x", mode, False, table if mode == "INT8" else None)
    inputs = dict(np.load(work / "in.npz"))
    expected = run_tpu(module, store, inputs)
    finalize(module, WeightStore(store), "bm1684x", 2, True)
    bmodel = work / f"{mode}.bmodel"
    bmodel.write_bytes(generate_native(module, vendor, profile=False).bmodel)
    return run_native(bmodel, inputs, vendor), expected


def check(outputs, expected, mode: str) -> None:
    assert outputs
    for name, got in outputs.items():
        want = np.asarray(expected[name], np.float32)
        got = np.asarray(got, np.float32).reshape(want.shape)
        if mode == "INT8":
            assert np.array_equal(got, want), f"{name}: {np.count_nonzero(got != want)} differ"
        else:
            a, b = got.ravel().astype(np.float64), want.ravel().astype(np.float64)
            cosine = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
            assert cosine >= COSINE, f"{name}: cosine {cosine:.8f}"


def tensor(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


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


@pytest.mark.parametrize("mode", ["F32", "F16", "BF16"])
def test_deconv(deconv_model, vendor, mode):
    check(*run_both(*deconv_model, mode, vendor), mode)
