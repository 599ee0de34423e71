"""One-node ONNX models, converted and run with the TOP interpreter, against
onnxruntime: the attribute and layout translation of each converter."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_helpers import (
    RNG,
    all_static,
    assert_shape_rules_agree,
    check_numerics,
    init,
    save,
    tensor,
)

from tpuc.frontends.onnx import convert_onnx

# (op_type, inputs: name -> shape (runtime) or array (initializer), attrs, outputs, opset)
ONE_NODE = [
    ("LayerNormalization", {"x": [2, 3, 4], "s": np.full([4], 1.5, np.float32),
                            "b": np.full([4], 0.1, np.float32)}, {"axis": -1}, 1, 17),
    ("LayerNormalization", {"x": [2, 3, 4], "s": RNG.standard_normal([3, 4]).astype(np.float32)},
     {"axis": 1, "epsilon": 1e-3}, 1, 17),
    ("GroupNormalization", {"x": [2, 6, 3, 3], "s": RNG.standard_normal([6]).astype(np.float32),
                            "b": RNG.standard_normal([6]).astype(np.float32)},
     {"num_groups": 3}, 1, 21),
    ("InstanceNormalization", {"x": [2, 3, 4, 4], "s": np.arange(3, dtype=np.float32),
                               "b": np.ones(3, np.float32)}, {}, 1, 13),
    ("BatchNormalization", {"x": [2, 3, 4, 4], "s": np.arange(3, dtype=np.float32),
                            "b": np.ones(3, np.float32), "m": np.full(3, 0.2, np.float32),
                            "v": np.full(3, 2.0, np.float32)}, {"epsilon": 1e-3}, 1, 13),
    ("DepthToSpace", {"x": [1, 8, 2, 3]}, {"blocksize": 2, "mode": "CRD"}, 1, 13),
    ("DepthToSpace", {"x": [1, 8, 2, 3]}, {"blocksize": 2}, 1, 13),
    ("SpaceToDepth", {"x": [1, 2, 4, 6]}, {"blocksize": 2}, 1, 13),
    ("Tile", {"x": [2, 3], "r": np.array([2, 3], np.int64)}, {}, 1, 13),
    ("Expand", {"x": [3, 1], "s": np.array([2, 3, 4], np.int64)}, {}, 1, 13),
    ("ArgMax", {"x": [3, 4, 5]}, {"axis": -1, "keepdims": 0}, 1, 13),
    ("TopK", {"x": [3, 6], "k": np.array([2], np.int64)}, {"axis": 1}, 2, 13),
    ("ReduceSum", {"x": [3, 4, 5], "a": np.array([0, 2], np.int64)}, {"keepdims": 1}, 1, 13),
    ("ReduceMax", {"x": [3, 4, 5], "a": np.array([1], np.int64)}, {"keepdims": 0}, 1, 18),
    ("ReduceL2", {"x": [3, 4, 5]}, {"axes": [1, 2]}, 1, 13),
    ("Squeeze", {"x": [3, 1, 5, 1], "a": np.array([-1], np.int64)}, {}, 1, 13),
    ("Unsqueeze", {"x": [3, 5], "a": np.array([0, -1], np.int64)}, {}, 1, 13),
    ("Concat", {"x": [2, 3], "c": np.ones([2, 2], np.float32)}, {"axis": -1}, 1, 13),
    ("Flatten", {"x": [2, 3, 4]}, {"axis": 0}, 1, 13),
    ("Pad", {"x": [1, 2, 3, 3], "p": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64),
             "v": np.array(0.5, np.float32)}, {"mode": "constant"}, 1, 13),
    ("Pad", {"x": [1, 2, 3, 3], "p": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)},
     {"mode": "edge"}, 1, 13),
    ("PRelu", {"x": [2, 3, 4, 4], "s": np.array([[[0.1]], [[0.2]], [[0.3]]], np.float32)},
     {}, 1, 13),
    ("LeakyRelu", {"x": [2, 5]}, {"alpha": 0.3}, 1, 13),
    ("Elu", {"x": [2, 5]}, {"alpha": 0.7}, 1, 13),
    ("HardSigmoid", {"x": [2, 5]}, {"alpha": 0.3, "beta": 0.4}, 1, 13),
    ("HardSwish", {"x": [2, 5]}, {}, 1, 14),
    ("Gelu", {"x": [2, 5]}, {"approximate": "tanh"}, 1, 20),
    ("Erf", {"x": [2, 5]}, {}, 1, 13),
    ("Softplus", {"x": [2, 5]}, {}, 1, 13),
    ("Max", {"x": [2, 5], "y": [5], "z": np.array(0.1, np.float32)}, {}, 1, 13),
    ("Mean", {"x": [2, 5], "y": [2, 5]}, {}, 1, 13),
    ("Pow", {"x": [2, 5], "y": [2, 5]}, {}, 1, 13),
    ("Clip", {"x": [2, 5], "lo": [], "hi": np.array(0.5, np.float32)}, {}, 1, 13),
    ("Equal", {"x": np.array([1.0, 2.0, 3.0], np.float32), "y": [3]}, {}, 1, 13),
    ("Gather", {"x": np.arange(12, dtype=np.float32).reshape(4, 3), "i": np.array(-2)},
     {"axis": 0}, 1, 13),
    ("Gemm", {"a": [3, 4], "b": [5, 4], "c": [3, 5]}, {"transB": 1, "alpha": 0.5, "beta": 2.0},
     1, 13),
    ("MatMul", {"a": [2, 3, 4], "b": RNG.standard_normal([4, 5]).astype(np.float32)}, {}, 1, 13),
    ("GRU", {"x": [3, 2, 4], "w": RNG.standard_normal([2, 15, 4]).astype(np.float32),
             "r": RNG.standard_normal([2, 15, 5]).astype(np.float32),
             "b": RNG.standard_normal([2, 30]).astype(np.float32)},
     {"hidden_size": 5, "direction": "bidirectional", "linear_before_reset": 1}, 2, 14),
    ("LSTM", {"x": [2, 3, 4], "w": RNG.standard_normal([1, 20, 4]).astype(np.float32),
              "r": RNG.standard_normal([1, 20, 5]).astype(np.float32)},
     {"hidden_size": 5}, 3, 14),
]  # fmt: skip


@pytest.mark.parametrize(
    ("op_type", "inputs", "attrs", "n_out", "opset"),
    ONE_NODE,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(ONE_NODE)],
)
def test_one_node_matches_onnxruntime(tmp_path, op_type, inputs, attrs, n_out, opset):
    graph_inputs, inits = [], []
    for name, spec in inputs.items():
        if isinstance(spec, np.ndarray):
            inits.append(init(name, spec))
        else:
            graph_inputs.append(tensor(name, spec))
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op_type, list(inputs), outs, **attrs)
    outputs = [onnx.ValueInfoProto(name=o) for o in outs]  # any element type
    path = save(tmp_path, [node], graph_inputs, outputs, inits, opset)
    module, weights = convert_onnx(path, "m")
    assert all_static(module)
    assert_shape_rules_agree(module)
    check_numerics(path, module, weights)
