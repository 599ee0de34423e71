"""Add(MatMul, vector) folds into the MatMul's bias, with the same values."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tpuc.frontends.onnx import convert_onnx
from tpuc.interp.top_interpreter import run_top
from tpuc.ir.weights import WeightStore, attach_weights
from tpuc.passes.canonicalize import canonicalize


def test_add_of_vector_after_matmul_becomes_its_bias(tmp_path):
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    module, store = convert_onnx(str(path), "m")
    store = WeightStore(store)
    attach_weights(module, store)
    canonicalize(module)
    kinds = [op.name for op in module.walk() if op.name.startswith("top.")]
    assert "top.Add" not in kinds and kinds.count("top.MatMul") == 1
    x = rng.standard_normal((2, 8)).astype(np.float32)
    y = run_top(module, store, {"x": x})["y"]
    np.testing.assert_allclose(y, x @ w + b, rtol=1e-5, atol=1e-6)
