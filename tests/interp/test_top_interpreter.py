"""run_top on small hand-written TOP modules, against onnxruntime."""

from __future__ import annotations

import weakref

import numpy as np
import onnxruntime as ort
import pytest
from interp_helpers import assert_close, rand
from onnx import TensorProto, helper, numpy_helper
from xdsl.parser import Parser

from tpuc.base.errors import TpucError
from tpuc.dialects import top
from tpuc.interp.top_interpreter import TopInterpreter, run_top
from tpuc.interp.top_ops import KERNELS
from tpuc.ir.context import make_context

CONV_RELU = """
builtin.module {
  func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
    %1 = "top.Weight"() {name = "w"} : () -> tensor<4x3x3x3xf32>
    %2 = "top.Weight"() {name = "b"} : () -> tensor<4xf32>
    %3 = "top.Conv"(%0, %1, %2) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1],
        dilations = [1, 1], group = 1 : i64, name = "conv"}
        : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
    %4 = "top.Relu"(%3) {name = "relu"} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    %5 = "top.Sigmoid"(%4) {name = "sig"} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    func.return %5 : tensor<1x4x8x8xf32>
  }
}
"""

SPLIT_GATHER = """
builtin.module {
  func.func @main(%arg0: tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<2x6xf32>) -> tensor<2x6xf32>
    %1:2 = "top.Split"(%0) {name = "split", result_names = ["s0", "s1"], axis = 1 : i64,
        split_size = [2, 4]} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>)
    %2 = "top.Weight"() {name = "idx"} : () -> tensor<2xf32>
    %3 = "top.Gather"(%1#1, %2) {name = "g", axis = 1 : i64}
        : (tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
    func.return %3, %1#1 : tensor<2x2xf32>, tensor<2x4xf32>
  }
}
"""


def parse(text: str):
    return Parser(make_context(), text).parse_module()


@pytest.fixture
def conv_case():
    weights = {"w": rand(4, 3, 3, 3), "b": rand(4)}
    return parse(CONV_RELU), weights, {"x": rand(1, 3, 8, 8)}


def ort_conv_relu_sigmoid(weights, x):
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["conv"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("Sigmoid", ["relu"], ["sig"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("conv", "sig")],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(("conv", "sig"), session.run(None, {"x": x}), strict=True))


def test_outputs_match_onnxruntime(conv_case):
    module, weights, inputs = conv_case
    ref = ort_conv_relu_sigmoid(weights, inputs["x"])
    outputs = run_top(module, weights, inputs)
    assert list(outputs) == ["sig"]
    assert outputs["sig"].dtype == np.float32
    assert_close(outputs["sig"], ref["sig"])


def test_dump_all_returns_every_tensor(conv_case):
    module, weights, inputs = conv_case
    ref = ort_conv_relu_sigmoid(weights, inputs["x"])
    tensors = run_top(module, weights, inputs, dump_all=True, progress=True)
    assert set(tensors) == {"x", "conv", "relu", "sig"}
    assert_close(tensors["conv"], ref["conv"])
    np.testing.assert_array_equal(tensors["x"], inputs["x"])


def test_intermediates_are_reused_after_last_use(conv_case, monkeypatch):
    """The conv result dies at the ReLU, which may overwrite it; with
    dump_all every tensor keeps its own memory."""
    module, weights, inputs = conv_case
    seen: dict[str, weakref.ref] = {}
    reused_at_sigmoid: list[bool] = []
    conv_kernel, sig_kernel = KERNELS[top.ConvOp], KERNELS[top.SigmoidOp]

    def spy_conv(op, args):
        out = conv_kernel(op, args)
        seen["conv"] = weakref.ref(out)
        return out

    def spy_sigmoid(op, args):
        conv_out = seen["conv"]()
        reused_at_sigmoid.append(conv_out is None or np.shares_memory(conv_out, args[0]))
        return sig_kernel(op, args)

    monkeypatch.setitem(KERNELS, top.ConvOp, spy_conv)
    monkeypatch.setitem(KERNELS, top.SigmoidOp, spy_sigmoid)
    run_top(module, weights, inputs)
    dumped = run_top(module, weights, inputs, dump_all=True)
    assert reused_at_sigmoid == [True, False]
    assert not np.shares_memory(dumped["conv"], dumped["relu"])


def test_multi_result_ops_and_float_indices():
    module = parse(SPLIT_GATHER)
    x = rand(2, 6)
    weights = {"idx": np.array([3, 0], dtype=np.int64)}  # integers stored in the npz
    outputs = run_top(module, weights, {"x": x})
    assert list(outputs) == ["g", "s1"]
    np.testing.assert_array_equal(outputs["g"], x[:, 2:][:, [3, 0]])
    tensors = run_top(module, weights, {"x": x}, dump_all=True)
    assert set(tensors) == {"x", "s0", "s1", "g"}
    np.testing.assert_array_equal(tensors["s0"], x[:, :2])


def test_bad_inputs_name_the_tensor(conv_case):
    module, weights, inputs = conv_case
    with pytest.raises(TpucError, match=r"input 'x' \(shape \[1, 3, 8, 8\]\) is missing"):
        run_top(module, weights, {})
    with pytest.raises(
        TpucError, match=r"input 'x' has shape \[1, 3, 8\], expected \[1, 3, 8, 8\]"
    ):
        run_top(module, weights, {"x": rand(1, 3, 8)})
    with pytest.raises(TpucError, match="weight 'b' is missing"):
        run_top(module, {"w": weights["w"]}, inputs)
    # integer inputs are accepted and cast to float32
    out = run_top(module, weights, {"x": np.ones((1, 3, 8, 8), dtype=np.int32)})
    assert out["sig"].dtype == np.float32


def test_missing_kernel_names_the_op(conv_case, monkeypatch):
    module, weights, inputs = conv_case
    monkeypatch.delitem(KERNELS, top.ReluOp)
    with pytest.raises(TpucError, match="no kernel for: top.Relu"):
        TopInterpreter(module)


def test_kernel_failure_names_op_and_tensor(conv_case):
    module, weights, inputs = conv_case
    with pytest.raises(TpucError, match=r"weight 'w' has shape \[4, 3, 3, 2\], the IR declares"):
        run_top(module, dict(weights, w=rand(4, 3, 3, 2)), inputs)
    split_gather = parse(SPLIT_GATHER)
    with pytest.raises(TpucError, match=r"top.Gather 'g' failed: gather index out of range"):
        run_top(split_gather, {"idx": np.array([7.0, 0.0], np.float32)}, {"x": rand(2, 6)})
