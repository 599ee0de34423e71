"""What keeps big models cheap without changing results: Gemm weights
derived from constants (transposed, scaled by alpha) equal numpy's
`alpha * B.T` exactly with one copy; a model parsed by the caller converts
like its file; ONNX shape inference runs without big Constant values and
finds the shapes it finds on the whole model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx_helpers import check_numerics, init, ops, save, tensor

from tpuc.frontends.onnx import convert_onnx
from tpuc.frontends.onnx.graph import infer_onnx_shapes, load_model
from tpuc.frontends.onnx.nn import _scaled, _transposed

RNG = np.random.default_rng(7)


def weight_of(module, weights, operand: int) -> np.ndarray:
    mm = ops(module, "top.MatMul")[0]
    return weights[mm.operands[operand].owner.value("name")]


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_big_transposed_b_is_exact(tmp_path, alpha):
    """[700, 900] is larger than one 256x2048 tile and not a multiple of it."""
    b = RNG.standard_normal([700, 900]).astype(np.float32)  # [N, K], transB
    node = helper.make_node("Gemm", ["x", "b"], ["y"], transB=1, alpha=alpha)
    path = save(tmp_path, [node], [tensor("x", [2, 900])], [tensor("y", None)], [init("b", b)])
    module, weights = convert_onnx(path, "m")
    right = weight_of(module, weights, 1)
    expected = b.T * np.float32(alpha)
    assert right.dtype == np.float32 and right.flags.c_contiguous
    np.testing.assert_array_equal(right, expected)
    check_numerics(path, module, weights, atol=1e-4)


def test_const_a_transposed_and_scaled(tmp_path):
    a = RNG.standard_normal([4, 3]).astype(np.float32)  # transA: A' = [3, 4]
    node = helper.make_node("Gemm", ["a", "x"], ["y"], transA=1, alpha=3.0)
    path = save(tmp_path, [node], [tensor("x", [4, 5])], [tensor("y", None)], [init("a", a)])
    module, weights = convert_onnx(path, "m")
    np.testing.assert_array_equal(weight_of(module, weights, 0), a.T * np.float32(3.0))
    check_numerics(path, module, weights)


def test_scaling_never_writes_into_the_constant():
    b = RNG.standard_normal([5, 1]).astype(np.float32)
    keep = b.copy()
    out = _scaled(b, True, 2.0)  # b.T is already contiguous: no copy to scale in place
    np.testing.assert_array_equal(out, keep.T * np.float32(2.0))
    np.testing.assert_array_equal(b, keep)
    ints = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(_scaled(ints, True, 0.5), ints.T * 0.5)
    square = RNG.standard_normal([3, 3]).astype(np.float32)
    same = square.copy()
    np.testing.assert_array_equal(_scaled(square, False, 4.0), same * np.float32(4.0))
    np.testing.assert_array_equal(square, same)


@pytest.mark.parametrize("shape", [(7, 11), (6, 10), (1, 9), (13, 1)])
def test_tiled_transpose(shape):
    m = RNG.standard_normal(shape).astype(np.float32)
    out = _transposed(m, rows=3, cols=5)  # fewer than 15 elements: the plain copy
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, m.T)


def test_parsed_model_converts_like_its_file(tmp_path):
    b = RNG.standard_normal([6, 4]).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "b"], ["g"], transB=1, alpha=0.25),
        helper.make_node("Relu", ["g"], ["y"]),
    ]
    path = save(tmp_path, nodes, [tensor("x", [2, 4])], [tensor("y", None)], [init("b", b)])
    model = load_model(path)
    before = model.SerializeToString()
    module, weights = convert_onnx(path, "m", model=model)
    again, weights_again = convert_onnx(path, "m")
    assert str(module) == str(again)
    assert list(weights) == list(weights_again)
    for name, value in weights.items():
        np.testing.assert_array_equal(value, weights_again[name])
    assert model.SerializeToString() == before  # the caller's model is not modified


def test_shape_inference_without_big_constant_values(tmp_path):
    """Weights as Constant nodes (paddle2onnx): inference on the light copy
    agrees with onnx's inference on the whole model, tensor by tensor."""
    w = numpy_helper.from_array(RNG.standard_normal([160, 3, 3, 3]).astype(np.float32))  # > 4096
    nodes = [
        helper.make_node("Constant", [], ["w"], value=w),
        helper.make_node("Constant", [], ["k"], value=init("k", np.array([1, -1], np.int64))),
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "k"], ["y"]),
    ]
    path = save(tmp_path, nodes, [tensor("x", [1, 3, 6, 6])], [tensor("y", None)])
    model = load_model(path)
    found = infer_onnx_shapes(model, {"x": [1, 3, 6, 6]})
    full = onnx.shape_inference.infer_shapes(model, data_prop=True)
    expected = {
        v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim)
        for v in list(full.graph.value_info) + list(full.graph.output)
    }
    assert expected["w"] == (160, 3, 3, 3) and expected["y"] == (1, 5760)
    assert found == expected
    module, weights = convert_onnx(path, "m", model=model)
    check_numerics(path, module, weights)
