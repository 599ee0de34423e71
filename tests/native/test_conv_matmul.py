"""Conv2D and MatMul through the native target (the vendor backend and its
chip model) against tpuc's TPU interpreter: INT8 bit for bit, floats with
cosine >= 0.99999.

Two small ONNX models, each deployed in the four modes:
- a chain of convolutions: 3x3 with bias and ReLU, 3x3 stride 2 to 96
  channels (more than the 64 lanes) without bias, depthwise 3x3 with bias
  last (the chip's F16/BF16 depthwise rounds differently from the
  interpreter, within the cosine bound; see conv.py);
- a matmul chain: a weight FC on a 3-D input (+ bias, ReLU), then a matmul
  of that activation by a second input (batch matmul), then a Gemm (transB)
  without bias.

And one INT8 model (batch 2) for grouped convolutions and tpuc's float
epilogue (an INT8 conv/matmul read only by float layers, here Adds put in
F32 by a qtable, hands them f32(acc)·f32(M·2^−r)): a grouped 3x3 conv with
bias and ReLU (8-bit result), a grouped 1x1 conv with bias, a 3x3 stride-2
conv to 70 channels with ReLU and limit (Clip 0..0.5), a Gemm with bias and a batched matmul of two
inputs, the last four with float results.
"""

from __future__ import annotations

import numpy as np
import pytest
from native_models import calibrate, check, run_both, save_onnx, transformed
from onnx import helper, numpy_helper

MODES = ("F32", "F16", "BF16", "INT8")


def init(rng, name: str, shape, scale: float = 0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)


@pytest.fixture(scope="module")
def conv_model(tmp_path_factory):
    work = tmp_path_factory.mktemp("native_conv")
    rng = np.random.default_rng(1)
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "W2"], ["c2"], pads=[1] * 4, strides=[2, 2], kernel_shape=[3, 3]),
        node("Conv", ["c2", "W3", "B3"], ["y"], pads=[1] * 4, group=96, kernel_shape=[3, 3]),
    ]
    inits = [
        init(rng, "W1", (16, 8, 3, 3)),
        init(rng, "B1", (16,), 1.0),
        init(rng, "W2", (96, 16, 3, 3), 0.1),
        init(rng, "W3", (96, 1, 3, 3)),
        init(rng, "B3", (96,), 1.0),
    ]
    return work, *transformed(work, "convs", nodes, [("x", [1, 8, 12, 12])], "y", inits)


@pytest.fixture(scope="module")
def matmul_model(tmp_path_factory):
    work = tmp_path_factory.mktemp("native_matmul")
    rng = np.random.default_rng(2)
    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "W1"], ["m1"]),
        node("Add", ["m1", "B1"], ["a1"]),
        node("Relu", ["a1"], ["r1"]),
        node("MatMul", ["r1", "y"], ["m2"]),
        node("Reshape", ["m2", "S"], ["f"]),
        node("Gemm", ["f", "W3"], ["z"], transB=1),
    ]
    inits = [
        init(rng, "W1", (32, 80), 0.2),
        init(rng, "B1", (80,), 1.0),
        numpy_helper.from_array(np.array([4, 16], np.int64), "S"),
        init(rng, "W3", (24, 16), 0.2),
    ]
    inputs = [("x", [1, 4, 32]), ("y", [1, 80, 16])]
    return work, *transformed(work, "mms", nodes, inputs, "z", inits)


@pytest.mark.parametrize("mode", MODES)
def test_conv_chain(conv_model, vendor, mode):
    check(*run_both(*conv_model, mode, vendor), mode)


@pytest.mark.parametrize("mode", MODES)
def test_matmul_chain(matmul_model, vendor, mode):
    check(*run_both(*matmul_model, mode, vendor), mode)


@pytest.fixture(scope="module")
def epilogue_model(tmp_path_factory):
    work = tmp_path_factory.mktemp("native_epilogue")
    rng = np.random.default_rng(3)
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3], group=2),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "W2", "B2"], ["c2"], kernel_shape=[1, 1], group=4),
        node("Add", ["c2", "c2"], ["a2"]),
        node("Conv", ["r1", "W3"], ["c3"], pads=[1] * 4, kernel_shape=[3, 3], strides=[2, 2]),
        node("Clip", ["c3", "lo", "hi"], ["r3"]),
        node("Add", ["r3", "r3"], ["a3"]),
        node("Reshape", ["r1", "S"], ["f"]),
        node("Gemm", ["f", "W4", "B4"], ["g"], transB=1),
        node("Add", ["g", "g"], ["a4"]),
        node("MatMul", ["y", "z"], ["m"]),
        node("Add", ["m", "m"], ["a5"]),
    ]
    inits = [
        init(rng, "W1", (16, 4, 3, 3)),
        init(rng, "B1", (16,), 1.0),
        init(rng, "W2", (12, 4, 1, 1)),
        init(rng, "B2", (12,), 1.0),
        init(rng, "W3", (70, 16, 3, 3), 0.1),
        numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
        numpy_helper.from_array(np.array(0.5, np.float32), "hi"),
        numpy_helper.from_array(np.array([2, -1], np.int64), "S"),
        init(rng, "W4", (10, 16 * 9 * 7), 0.05),
        init(rng, "B4", (10,), 1.0),
    ]
    inputs = [("x", [2, 8, 9, 7]), ("y", [2, 3, 5, 6]), ("z", [2, 3, 6, 4])]
    (work / "qtable").write_text("a2 F32\na3 F32\na4 F32\na5 F32\n")
    return work, *transformed(work, "epi", nodes, inputs, ["a2", "a3", "a4", "a5"], inits)


def float_epilogues(mlir: str, table: str, qtable: str) -> set[str]:
    """Names of the INT8 convs/matmuls with a float result after lowering."""
    from tpuc.dialects import tpu
    from tpuc.ir.module_io import load_module
    from tpuc.passes.native.context import is_float, quant_of
    from tpuc.workflow.deploy import lower

    module, _ = load_module(mlir)
    lower(module, "bm1684x", "INT8", False, table, qtable)
    return {
        op.names[0]
        for op in module.walk()
        if isinstance(op, (tpu.Conv2DOp, tpu.MatMulOp))
        and quant_of(op.operands[0]) is not None
        and is_float(op.results[0])
    }


def test_grouped_conv_and_float_epilogue(epilogue_model, vendor):
    work, mlir, table = epilogue_model
    qtable = str(work / "qtable")
    assert float_epilogues(mlir, table, qtable) == {"c2", "r3", "g", "m"}
    check(*run_both(work, mlir, table, "INT8", vendor, qtable), "INT8")


def test_float_epilogue_rounds_large_accumulators_half_to_even(tmp_path, vendor):
    """|acc| above 2^24 (±127·127·1101, odd): int32 -> f32 rounds half to even
    on the chip (the cast's round_mode 3) as in tpuc's kernels."""
    ic = 1101
    w = np.ones((3, ic, 1, 1), np.float32)
    w[1] *= -1
    w[2, ::2] = 0.5
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["c", "c"], ["a"]),
    ]
    save_onnx(tmp_path / "big.onnx", nodes, [("x", [1, ic, 2, 2])], "a",
              [numpy_helper.from_array(w, "W")])  # fmt: skip
    x = np.ones((1, ic, 2, 2), np.float32)
    x[0, :, 0, 1] = -1
    x[0, 5:, 1, 0] = 0.3
    np.savez(tmp_path / "in.npz", x=x)
    (tmp_path / "samples").mkdir()
    np.savez(tmp_path / "samples" / "s0.npz", x=x)
    mlir, table = calibrate(tmp_path, "big")
    (tmp_path / "qtable").write_text("a F32\n")
    qtable = str(tmp_path / "qtable")
    assert float_epilogues(mlir, table, qtable) == {"c"}
    check(*run_both(tmp_path, mlir, table, "INT8", vendor, qtable), "INT8")
