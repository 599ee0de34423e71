"""A small CNN whose middle tensor INT8 cannot hold: a few huge outliers
next to a bulk of small values that the next layer depends on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPE = (1, 4, 12, 12)
READER = "cb"
"""The conv reading the outlier tensor: the layer the search must name."""


def outlier_model(path: Path) -> Path:
    """x -> Conv+Relu r1 (channel 0 rarely positive) -> Conv ca (channel 0 =
    1000·r1[0]: sparse huge values; others small) -> Conv+Relu cb (reads
    ca's small channels, ca[0] weighted 1e-4) -> Conv y."""
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((8, 4, 3, 3)).astype("f4") * 0.3
    b1 = np.zeros(8, "f4")
    b1[0] = -4.0  # relu(conv) of channel 0 is mostly zero
    wa = rng.standard_normal((8, 8, 1, 1)).astype("f4") * 0.05
    wa[0] = 0.0
    wa[0, 0] = 1000.0
    wb = rng.standard_normal((8, 8, 1, 1)).astype("f4")
    wb[:, 0] = 1e-4
    wy = rng.standard_normal((6, 8, 3, 3)).astype("f4") * 0.2
    inits = [numpy_helper.from_array(a, n) for n, a in
             (("W1", w1), ("B1", b1), ("WA", wa), ("WB", wb), ("WY", wy))]  # fmt: skip
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        node("Relu", ["c1"], ["r1"], name="relu1"),
        node("Conv", ["r1", "WA"], ["ca"], name="ca"),
        node("Conv", ["ca", "WB"], ["c2"], name="conv_b"),
        node("Relu", ["c2"], [READER], name="relu_b"),
        node("Conv", [READER, "WY"], ["y"], pads=[1, 1, 1, 1], name="conv_y"),
    ]
    graph = helper.make_graph(
        nodes,
        "outlier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 12, 12])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)
    return path
