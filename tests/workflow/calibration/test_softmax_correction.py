"""Softmax correction (--smc, TPU-MLIR's): the per-head scale is the mean
row maximum of the attention probabilities (numpy, by hand), the inserted
Muls take TPU-MLIR's names and keep the float function (onnxruntime on the
unchanged ONNX model as reference)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from tpuc.dialects import top
from tpuc.frontends.onnx import convert_onnx
from tpuc.interp.top_interpreter import TopInterpreter
from tpuc.ir.weights import WeightStore, attach_weights
from tpuc.workflow.calibration.calibrate import Calibration
from tpuc.workflow.calibration.softmax_correction import find_sites, head_scale
from tpuc.workflow.calibration.techniques import TECHNIQUES

HEADS, SEQ, DIM = 2, 6, 4
RNG = np.random.default_rng(3)


def attention_proto():
    """probs = Softmax(q·kᵀ·0.5); out = Transpose(probs·v): eager attention."""
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["qk"]),
        helper.make_node("Mul", ["qk", "half"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "v"], ["context"]),
        helper.make_node("Transpose", ["context"], ["out"], perm=[0, 2, 1, 3]),
    ]
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "half")]
    shape = [1, HEADS, SEQ, DIM]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "qkv"]
    outs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "attn", inputs, outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def samples(n: int) -> list[dict[str, np.ndarray]]:
    # head 1 sharper than head 0, so the two scales differ
    sharp = np.array([1.0, 3.0], np.float32).reshape(1, HEADS, 1, 1)
    return [
        {"q": (RNG.standard_normal((1, HEADS, SEQ, DIM)) * sharp).astype(np.float32),
         "k": RNG.standard_normal((1, HEADS, SEQ, DIM)).astype(np.float32),
         "v": RNG.standard_normal((1, HEADS, SEQ, DIM)).astype(np.float32)}
        for _ in range(n)
    ]  # fmt: skip


def by_hand_scale(feeds: list[dict[str, np.ndarray]]) -> np.ndarray:
    total = 0.0
    for x in feeds:
        s = x["q"].astype(np.float64) @ np.swapaxes(x["k"], -1, -2) * 0.5
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        total = total + p.max(-1, keepdims=True)
    return (total / len(feeds)).mean(axis=(0, 2, 3)).reshape(1, HEADS, 1, 1)


def test_head_scale_averages_all_but_the_head_axis():
    rows = np.arange(2 * 3 * 1, dtype=np.float64).reshape(2, 3, 1)  # 3-D: heads on axis 0
    assert head_scale(rows).ravel().tolist() == [1.0, 4.0]
    rows4 = np.array([[[[0.2], [0.4]], [[0.5], [0.7]]]])  # [1, 2 heads, 2 rows, 1]
    assert np.allclose(head_scale(rows4).ravel(), [0.3, 0.6])


def test_smc_scales_by_mean_row_max_and_keeps_the_float_function():
    proto = attention_proto()
    module, arrays = convert_onnx("attn.onnx", "attn", model=proto)
    store = WeightStore(arrays)
    attach_weights(module, store)
    cal = Calibration(module, store, "attn", warn=lambda message: None)
    cal.load = lambda sample: sample
    feeds = samples(3)
    (site,) = find_sites(s.op for s in cal.interp.steps)
    lines = TECHNIQUES["smc"](cal, feeds, lambda items, what: items, {})
    cal.rebuild()
    assert lines[0] == "softmax correction: 1 Softmax -> MatMul site(s)"
    expected = by_hand_scale(feeds)
    assert abs(expected[0, 0, 0, 0] - expected[0, 1, 0, 0]) > 0.1  # the heads differ
    muls = {op.names[0]: op for op in module.walk() if isinstance(op, top.MulOp)}
    inverse, back = muls["probs_Smc_Inv_Mul"], muls["context_Smc_Mul"]
    weight = lambda mul: store[mul.operands[1].owner.tensor_name.data]  # noqa: E731
    np.testing.assert_allclose(weight(inverse), 1.0 / expected, rtol=1e-5)
    np.testing.assert_allclose(weight(back), expected, rtol=1e-5)
    assert site.matmul.operands[0] is inverse.results[0]
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for x in samples(2):
        (want,) = session.run(None, x)
        got = TopInterpreter(module, native=False).run(store, x)["out"]
        np.testing.assert_allclose(got, want, atol=1e-5 * np.abs(want).max())
