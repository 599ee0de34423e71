"""Small lowered networks for the post-lowering pass tests: an ONNX graph
converted by the frontend, calibrated from one TOP run (min/max table) and
lowered with tpuc.workflow.deploy.lower, weights in a WeightStore."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INPUT = (1, 3, 8, 8)


def net_model(path: Path) -> Path:
    """x -> Conv+Relu r1 -> Conv c2 -> TopK(k=4, channels) tv/ti -> Conv c3
    -> Add(c3, r1) s -> Reshape [1,8,64] -> Softmax sm -> Reshape [1,8,8,8]
    -> Conv y; outputs y and ti."""
    rng = np.random.default_rng(0)

    def init(name, shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype("f4"), name)

    def ints(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)

    weights = [
        init("W1", (8, 3, 3, 3)),
        init("B1", (8,)),
        init("W2", (8, 8, 3, 3)),
        init("W3", (8, 4, 1, 1)),
        init("B3", (8,)),
        init("W4", (4, 8, 3, 3)),
        ints("K", [4]),
        ints("S1", [1, 8, 64]),
        ints("S2", [1, 8, 8, 8]),
    ]
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, name="conv1"),
        node("Relu", ["c1"], ["r1"], name="relu1"),
        node("Conv", ["r1", "W2"], ["c2"], pads=[1] * 4, name="conv2"),
        node("TopK", ["c2", "K"], ["tv", "ti"], axis=1, name="topk"),
        node("Conv", ["tv", "W3", "B3"], ["c3"], name="conv3"),
        node("Add", ["c3", "r1"], ["s"], name="add"),
        node("Reshape", ["s", "S1"], ["rs"], name="reshape1"),
        node("Softmax", ["rs"], ["sm"], axis=2, name="softmax"),
        node("Reshape", ["sm", "S2"], ["rs2"], name="reshape2"),
        node("Conv", ["rs2", "W4"], ["y"], pads=[1] * 4, name="conv4"),
    ]
    graph = helper.make_graph(
        nodes,
        "net",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(INPUT))],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8]),
            helper.make_tensor_value_info("ti", TensorProto.INT64, [1, 4, 8, 8]),
        ],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)
    return path


def sample_input() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(1).standard_normal(INPUT).astype(np.float32)}


def lowered(work: Path, chip: str = "bm1684x", mode: str = "INT8"):
    """(TPU_LOWERED module, its WeightStore, the sample input)."""
    from tpuc.frontends.onnx import convert_onnx
    from tpuc.interp.top_interpreter import run_top
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import transform

    module, weights = convert_onnx(str(net_model(work / "net.onnx")), "net")
    store = WeightStore(weights)
    attach_weights(module, store)
    transform(module)
    inputs = sample_input()
    table = None
    if mode == "INT8":
        values = run_top(module, store, inputs, dump_all=True)
        table = work / "net_cali_table"
        lines = []
        for name, v in values.items():
            lo, hi = float(v.min()), float(v.max())
            lines.append(f"{name} {max(abs(lo), abs(hi), 1e-3):.7f} {lo:.7f} {hi:.7f}")
        table.write_text("\n".join(lines) + "\n")
    lower(module, chip, mode, cali_table=table)
    return module, store, inputs
