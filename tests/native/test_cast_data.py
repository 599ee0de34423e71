"""tpu.Cast and the data-movement ops through the native target (the vendor
backend and its chip model) against tpuc's TPU interpreter: INT8 bit for
bit, floats with cosine >= 0.99999.

- `edges`: a reshape between the input cast and the output cast, fed values
  at every half step of the input scale (the quantize's ties: the chip
  multiplies by the f32 reciprocal of the scale and rounds half away from
  zero) plus random ones;
- `moves`: two concats (one on axis 1, one on the last axis, each with an
  input of another scale, so INT8 rescales it), a transpose, a strided
  slice, a pad, a nearest upsample and a depth-to-space.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from native_models import check, run_both, save_onnx, transformed
from onnx import helper, numpy_helper

GAINS = {"z": 4.0, "w": 0.25}


def input_scale(module) -> float | None:
    """The scale the first input is quantized to (None in float modes)."""
    from tpuc.dialects import tpu
    from tpuc.ir.core import main_function
    from tpuc.passes.native.context import quant_of

    for op in main_function(module).body.block.ops:
        if isinstance(op, tpu.CastOp) and quant_of(op.results[0]) is not None:
            return quant_of(op.results[0]).scale
    return None


def half_steps(shape, scale: float) -> np.ndarray:
    """Every half step of `scale` around 0 (past saturation), a few random values."""
    size = int(np.prod(shape))
    x = ((np.arange(size) - size // 2) * 0.5 * scale * 2.2).astype("f4")
    x[: size // 2] = ((np.arange(size // 2) - size // 4) * 0.5 * scale).astype("f4")
    x[::9] = np.random.default_rng(3).standard_normal(x[::9].size).astype("f4")
    return x.reshape(shape)


def half_step_feeds(module, inputs: dict) -> dict:
    """The inputs replaced by half_steps of the input scale (INT8 only)."""
    scale = input_scale(module)
    return inputs if scale is None else {n: half_steps(a.shape, scale) for n, a in inputs.items()}


def ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


@pytest.fixture(scope="module")
def edges_model(tmp_path_factory):
    work = tmp_path_factory.mktemp("native_edges")
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"])]
    inits = [ints("s", [1, 512])]
    return work, *transformed(work, "edges", nodes, [("x", [1, 4, 8, 16])], ["y"], inits)


@pytest.fixture(scope="module")
def moves_model(tmp_path_factory):
    work = tmp_path_factory.mktemp("native_moves")
    node = helper.make_node
    nodes = [
        node("Concat", ["x", "z"], ["c1"], axis=1),  # [1, 6, 6, 8]
        node("Transpose", ["c1"], ["t"], perm=[0, 2, 3, 1]),  # [1, 6, 8, 6]
        node("Concat", ["t", "w"], ["c2"], axis=3),  # [1, 6, 8, 8]
        node("Slice", ["c2", "st", "en", "ax", "sp"], ["s"]),  # [1, 4, 4, 8]
        node("Pad", ["s", "p"], ["y1"]),  # [1, 4, 7, 9]
        node("Resize", ["x", "", "sc"], ["y2"], mode="nearest"),  # [1, 4, 12, 16]
        node("DepthToSpace", ["x"], ["y3"], blocksize=2, mode="CRD"),  # [1, 1, 12, 16]
    ]
    inits = [
        ints("st", [1, 0]),
        ints("en", [5, 8]),
        ints("ax", [1, 2]),
        ints("sp", [1, 2]),
        ints("p", [0, 0, 2, 0, 0, 0, 1, 1]),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc"),
    ]
    inputs = [("x", [1, 4, 6, 8]), ("z", [1, 2, 6, 8]), ("w", [1, 6, 8, 2])]
    return work, *transformed(work, "moves", nodes, inputs, ["y1", "y2", "y3"], inits, gains=GAINS)


@pytest.mark.parametrize("mode", ["INT8", "F16", "BF16"])
def test_cast_edges(edges_model, vendor, mode):
    check(*run_both(*edges_model, mode, vendor, feeds=half_step_feeds), mode)


@pytest.mark.parametrize("mode", ["INT8", "F16", "BF16", "F32"])
def test_data_moves(moves_model, vendor, mode):
    check(*run_both(*moves_model, mode, vendor), mode)


@pytest.mark.parametrize("mode", ["F32", "BF16", "INT8"])
def test_concat_with_fused_relu(tmp_path, vendor, mode):
    """Concat -> Relu fuses into the concat (shufflenet's branches); natively
    a relu in place on the output (none for an unsigned INT8 output)."""
    from tpuc.tools import model_deploy, model_transform, run_calibration

    nodes = [
        helper.make_node("Concat", ["a", "b"], ["c"], axis=1, name="cat"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Mul", ["r", "k"], ["o"], name="mul"),
    ]
    k = ("k", np.full((1, 8, 1, 1), 0.7, np.float32))
    ins = [(n, [1, 4, 8, 8]) for n in "ab"]
    save_onnx(tmp_path / "cr.onnx", nodes, ins, [("o", [1, 8, 8, 8])], [k])
    rng = np.random.default_rng(0)
    (tmp_path / "cali").mkdir()
    for i in range(3):
        arrays = {n: rng.standard_normal((1, 4, 8, 8)).astype("f4") for n in "ab"}
        np.savez(tmp_path / "cali" / f"s{i}.npz", **arrays)
    mlir, sample = str(tmp_path / "cr.mlir"), str(tmp_path / "cali" / "s0.npz")
    top = str(tmp_path / "top.npz")
    argv = ["--model_name", "cr", "--model_def", str(tmp_path / "cr.onnx"), "--mlir", mlir]
    assert model_transform.run([*argv, "--test_input", sample, "--test_result", top]) == 0
    table = str(tmp_path / "cr_cali")
    assert run_calibration.run([mlir, "--dataset", str(tmp_path / "cali"), "-o", table]) == 0
    argv = ["--mlir", mlir, "--chip", "bm1684x", "--quantize", mode, "--calibration_table", table]
    argv += ["--test_input", sample, "--test_reference", top, "--tolerance", "0.9,0.5"]
    argv += ["--codegen", "native", "--model", str(tmp_path / f"cr_{mode}.bmodel")]
    assert model_deploy.run(argv) == 0  # checks the vendor runtime against the interpreter
