"""INT8 accuracy of the elementwise, lookup-table and data-movement rules:
one-node ONNX models go through the frontend, calibration (method max, four
random samples), INT8 lowering (bm1684x symmetric and asymmetric, cv183x)
and canonicalize, then run on the TPU interpreter; the output must keep a
cosine of at least 0.99 with onnxruntime's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tpuc.passes.registry import get_pass


def tpu_interp():
    from tpuc.interp import tpu_interpreter

    return tpu_interpreter


def onnx_model(path: Path, nodes, inputs, outputs, inits=()) -> str:
    import onnx
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def value_info(name, shape):
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def initializer(name, array):
    from onnx import numpy_helper

    array = np.asarray(array)
    return numpy_helper.from_array(
        array.astype(np.float32 if array.dtype.kind == "f" else np.int64), name
    )


def int8_outputs(tmp_path, onnx_path, samples, feeds, chip, asymmetric):
    """Transform, calibrate (max) on `samples`, lower to INT8, run `feeds`;
    also the set of op kinds of the lowered module."""
    interp = tpu_interp()
    from tpuc.frontends.onnx.converter import convert_onnx
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.workflow.calibration.calibrate import Calibration, write_table
    from tpuc.workflow.calibration.dataset import Sample

    module, weights = convert_onnx(onnx_path, "m")
    store = WeightStore(weights)
    attach_weights(module, store)
    paths = []
    for i, sample in enumerate(samples):
        paths.append(tmp_path / f"s{i}.npz")
        np.savez(paths[-1], **sample)
    cali = Calibration(module, store, str(tmp_path / "m.mlir"), warn=lambda _: None)
    entries = cali.run([Sample((str(p),)) for p in paths], [], "max")
    table = tmp_path / "cali_table"
    write_table(
        table, entries, mlir=tmp_path / "m.mlir", method="max", bins=2048,
        samples=len(samples), tune_num=0, generated="test",
    )  # fmt: skip
    passes = [
        get_pass("import-calibration-table")(file=str(table), asymmetric=asymmetric),
        get_pass("processor-assign")(chip=chip, mode="INT8"),
        get_pass("convert-top-to-tpu")(asymmetric=asymmetric),
        get_pass("canonicalize")(),
    ]
    for p in passes:
        p.apply(None, module)
    kinds = {op.name for op in next(iter(module.ops)).body.block.ops}
    return interp.run_tpu(module, store, feeds), kinds


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def node(op_type, inputs, outputs, **attrs):
    from onnx import helper

    return helper.make_node(op_type, inputs, outputs, **attrs)


X = (1, 4, 6, 6)
TWO = {"a": 2.0, "b": 1.0}  # input name -> standard deviation
ONE = {"a": 2.0}
SLOPE = np.random.default_rng(4).uniform(0.05, 0.5, (4, 1, 1)).astype(np.float32)
WEIGHT = np.random.default_rng(5).standard_normal((1, 4, 1, 6)).astype(np.float32)

CASES = {
    # name: (nodes, inputs, output shape, initializers, the INT8 op expected)
    "Add": ([node("Add", ["a", "b"], ["y"])], TWO, X, [], "tpu.Add"),
    "Sub": ([node("Sub", ["a", "b"], ["y"])], TWO, X, [], "tpu.Sub"),
    "Mul": ([node("Mul", ["a", "b"], ["y"])], TWO, X, [], "tpu.Mul"),
    "AddWeight": ([node("Add", ["a", "w"], ["y"])], ONE, X, [("w", WEIGHT)], "tpu.Add"),
    "Concat": ([node("Concat", ["a", "b"], ["y"], axis=1)], TWO, (1, 8, 6, 6), [], "tpu.Concat"),
    "Sigmoid": ([node("Sigmoid", ["a"], ["y"])], ONE, X, [], "tpu.Lut"),
    "LeakyRelu": ([node("LeakyRelu", ["a"], ["y"], alpha=0.1)], ONE, X, [], "tpu.Lut"),
    "PRelu": ([node("PRelu", ["a", "s"], ["y"])], ONE, X, [("s", SLOPE)], "tpu.Lut"),
    "HardSwish": ([node("HardSwish", ["a"], ["y"])], ONE, X, [], "tpu.Lut"),
    "Reshape": (
        [node("Reshape", ["a", "shape"], ["y"])], ONE, (1, 144),
        [("shape", np.array([1, 144]))], "tpu.Reshape",
    ),
    "Transpose": (
        [node("Transpose", ["a"], ["y"], perm=[0, 2, 3, 1])], ONE, (1, 6, 6, 4), [], "tpu.Permute",
    ),
    "Pad": (
        [node("Pad", ["a", "pads", "v"], ["y"], mode="constant")], ONE, (1, 4, 8, 9),
        [("pads", np.array([0, 0, 1, 2, 0, 0, 1, 1])), ("v", np.float32(0.5))], "tpu.Pad",
    ),
    "Tanh": ([node("Tanh", ["a"], ["y"])], ONE, X, [], "tpu.Lut"),
    "Elu": ([node("Elu", ["a"], ["y"], alpha=0.5)], ONE, X, [], "tpu.Lut"),
    "Exp": ([node("Exp", ["a"], ["y"])], {"a": 0.7}, X, [], "tpu.Lut"),
    "Clip": (
        [node("Clip", ["a", "lo", "hi"], ["y"])], ONE, X,
        [("lo", np.float32(-1.0)), ("hi", np.float32(2.5))], "tpu.Lut",
    ),
    "SiLUChain": (
        # x·sigmoid(x) is a function of x alone: one table (int8_region)
        [node("Sigmoid", ["a"], ["s"]), node("Mul", ["a", "s"], ["y"])], ONE, X, [], "tpu.Lut",
    ),
    "Gather": (
        [node("Gather", ["a", "idx"], ["y"], axis=1)], ONE, (1, 3, 6, 6),
        [("idx", np.array([3, 0, 2]))], "tpu.Gather",
    ),
    "Slice": (
        [node("Slice", ["a", "starts", "ends", "axes"], ["y"])], ONE, (1, 4, 3, 6),
        [("starts", np.array([1])), ("ends", np.array([4])), ("axes", np.array([2]))],
        "tpu.Slice",
    ),
    "Split": (
        [node("Split", ["a"], ["y", "z"], axis=1)], ONE, (1, 2, 6, 6), [], "tpu.Split",
    ),
    "DepthToSpace": (
        [node("DepthToSpace", ["a"], ["y"], blocksize=2)], ONE, (1, 1, 12, 12), [],
        "tpu.Depth2Space",
    ),
    "Tile": (
        [node("Tile", ["a", "reps"], ["y"])], ONE, (1, 4, 12, 6),
        [("reps", np.array([1, 1, 2, 1]))], "tpu.Tile",
    ),
    "Expand": (
        [node("Expand", ["a", "shape"], ["y"])], ONE, (2, 4, 6, 6),
        [("shape", np.array([2, 1, 1, 1]))], "tpu.Expand",
    ),
    "Upsample": (
        [node("Resize", ["a", "", "scales"], ["y"], mode="nearest")], ONE, (1, 4, 12, 12),
        [("scales", np.array([1, 1, 2, 2], np.float32))], "tpu.Upsample",
    ),
    "Resize": (
        [node("Resize", ["a", "", "scales"], ["y"], mode="nearest")], ONE, (1, 4, 9, 9),
        [("scales", np.array([1, 1, 1.5, 1.5], np.float32))], "tpu.Interp",
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    "name, chip, asymmetric",
    [(n, "bm1684x", False) for n in CASES]
    + [(n, "bm1684x", True) for n in CASES]
    + [(n, "cv183x", False) for n in ("Add", "Mul", "Concat", "Sigmoid")],
)
def test_int8_accuracy_vs_onnxruntime(tmp_path, name, chip, asymmetric):
    import onnxruntime as ort

    nodes, inputs, out_shape, inits, kind = CASES[name]
    shapes = {n: X for n in inputs}
    path = onnx_model(
        tmp_path / "m.onnx",
        nodes,
        [value_info(n, shapes[n]) for n in inputs],
        [value_info("y", out_shape)],
        [initializer(n, a) for n, a in inits],
    )
    rng = np.random.default_rng(len(name))
    samples = [
        {n: (std * rng.standard_normal(X)).astype(np.float32) for n, std in inputs.items()}
        for _ in range(4)
    ]
    feeds = samples[1]
    got, kinds = int8_outputs(tmp_path, path, samples, feeds, chip, asymmetric)
    assert kind in kinds
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)[0]
    c = cosine(got["y"], want)
    print(f"cosine {name} {chip} {'asym' if asymmetric else 'sym'}: {c:.5f}")
    assert c >= 0.99
