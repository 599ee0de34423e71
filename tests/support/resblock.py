"""A residual-block CNN big enough for the kernels to shard its convs and
GEMMs over worker threads (the tiny CNN is below the shard threshold)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPE = (1, 3, 32, 32)


def resblock_model(path: Path, width: int = 32) -> Path:
    """x[1,3,32,32] -> Conv+Relu -> [Conv+Relu -> Conv] + skip -> Relu
    -> stride-2 Conv+Relu -> GlobalAveragePool -> Flatten -> Gemm logits[1,10]
    -> Softmax."""
    rng = np.random.default_rng(7)
    inits = []

    def init(name, shape, scale):
        inits.append(
            numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)
        )
        return name

    def conv(x, y, cin, cout, stride=1):
        w = init(f"{y}_w", (cout, cin, 3, 3), np.sqrt(2 / (cin * 9)))
        b = init(f"{y}_b", (cout,), 0.1)
        return helper.make_node(
            "Conv", [x, w, b], [y], pads=[1, 1, 1, 1], strides=[stride, stride], name=y
        )

    node = helper.make_node
    wide = 2 * width
    nodes = [
        conv("x", "c0", 3, width),
        node("Relu", ["c0"], ["r0"], name="r0"),
        conv("r0", "c1", width, width),
        node("Relu", ["c1"], ["r1"], name="r1"),
        conv("r1", "c2", width, width),
        node("Add", ["c2", "r0"], ["s"], name="add"),
        node("Relu", ["s"], ["r2"], name="r2"),
        conv("r2", "c3", width, wide, stride=2),
        node("Relu", ["c3"], ["r3"], name="r3"),
        node("GlobalAveragePool", ["r3"], ["p"], name="gap"),
        node("Flatten", ["p"], ["f"], name="flat"),
        node(
            "Gemm",
            ["f", init("fc_w", (10, wide), 0.2), init("fc_b", (10,), 0.1)],
            ["logits"],
            transB=1,
            name="fc",
        ),
        node("Softmax", ["logits"], ["prob"], axis=1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes,
        "resblock",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)
    return path
