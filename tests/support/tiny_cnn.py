"""The tiny CNN that model_deploy's and the simulator's tests compile, and a
fixture with it transformed and calibrated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpuc.tools import model_transform, run_calibration


def cnn_model(path: Path) -> Path:
    """x[1,3,8,8] -> Conv+Relu r1 -> Conv+Relu r2 -> Add(r1, r2) s -> GlobalAveragePool p
    -> Flatten f -> Gemm logits[1,5]."""
    rng = np.random.default_rng(0)

    def init(name, shape, scale=0.5):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)

    weights = [
        init("W1", (4, 3, 3, 3)),
        init("B1", (4,)),
        init("W2", (4, 4, 3, 3)),
        init("B2", (4,)),
        init("W3", (5, 4)),
        init("B3", (5,)),
    ]
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        node("Relu", ["c1"], ["r1"], name="relu1"),
        node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        node("Relu", ["c2"], ["r2"], name="relu2"),
        node("Add", ["r1", "r2"], ["s"], name="add"),
        node("GlobalAveragePool", ["s"], ["p"], name="gap"),
        node("Flatten", ["p"], ["f"], name="flat"),
        node("Gemm", ["f", "W3", "B3"], ["logits"], transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """cnn.mlir (+ weights, cnn_in_f32.npz, cnn_top_outputs.npz) and cnn_cali_table."""
    work = tmp_path_factory.mktemp("prepared")
    cnn_model(work / "cnn.onnx")
    return transform_and_calibrate(work, "cnn", (1, 3, 8, 8), seed=1, samples=4)


def transform_and_calibrate(
    work: Path, name: str, shape: tuple[int, ...], seed: int, samples: int
) -> Path:
    """model_transform on `work/<name>.onnx` with a seeded input `in.npz` (input
    `x`), then run_calibration on `samples` seeded .npy samples ->
    `<name>.mlir` and `<name>_cali_table` in `work`."""
    rng = np.random.default_rng(seed)
    np.savez(work / "in.npz", x=rng.standard_normal(shape).astype(np.float32))
    folder = work / "samples"
    folder.mkdir()
    for i in range(samples):
        np.save(folder / f"s{i}.npy", rng.standard_normal(shape).astype(np.float32))
    mlir = str(work / f"{name}.mlir")
    argv = ["--model_name", name, "--model_def", str(work / f"{name}.onnx")]
    assert model_transform.run([*argv, "--test_input", str(work / "in.npz"), "--mlir", mlir]) == 0
    table = str(work / f"{name}_cali_table")
    assert run_calibration.run([mlir, "--dataset", str(folder), "-o", table]) == 0
    return work
