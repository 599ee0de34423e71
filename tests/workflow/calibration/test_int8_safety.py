"""INT8 that is never silently wrong (issue 26): attention masks, bounded
activations far from their bound, tensors INT8 cannot hold, overflow.

References are independent of the code under test: numpy's float softmax,
hand-computed SQNR values, hand-written table entries.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpuc.base.cali_table import CaliEntry, CaliTable, format_table, parse_table
from tpuc.base.errors import TpucError
from tpuc.frontends.onnx import convert_onnx
from tpuc.interp.top_interpreter import TopInterpreter
from tpuc.interp.tpu_interpreter import TpuInterpreter
from tpuc.ir.module_io import parse_module
from tpuc.ir.weights import attach_weights, weights_of
from tpuc.workflow.calibration.calibrate import Calibration
from tpuc.workflow.calibration.int8_error import MIN_SQNR_DB, int8_sqnr_db, lossy_tensors
from tpuc.workflow.calibration.rules import apply_rules
from tpuc.workflow.calibration.stats import TensorStats

RNG = np.random.default_rng(26)
SEQ, HEADS = 8, 2
LOWEST = float(np.finfo(np.float32).min)


# --- a masked softmax in INT8 equals FP32's --------------------------------------------


def attention_model(mask_value: float):
    """q, k [1,H,S,4] -> MatMul(q, kᵀ)·0.5 -> + Where(keep, 0, mask_value) -> Softmax,
    as transformers exports eager attention (mask_value float32's lowest)."""
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["qk"]),
        helper.make_node("Mul", ["qk", "half"], ["scores"]),
        helper.make_node("Cast", ["keep"], ["keep_b"], to=TensorProto.BOOL),
        helper.make_node("Where", ["keep_b", "zero", "low"], ["mask"]),
        helper.make_node("Add", ["scores", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
    ]
    inits = [
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(mask_value, np.float32), "low"),
    ]
    shape = [1, HEADS, SEQ, 4]
    inputs = [
        helper.make_tensor_value_info("q", TensorProto.FLOAT, shape),
        helper.make_tensor_value_info("k", TensorProto.FLOAT, shape),
        helper.make_tensor_value_info("keep", TensorProto.FLOAT, [1, 1, 1, SEQ]),
    ]
    out = [helper.make_tensor_value_info("probs", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "attn", inputs, out, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return convert_onnx("attn.onnx", "attn", model=proto)


def attention_sample(padding: int) -> dict[str, np.ndarray]:
    keep = np.ones((1, 1, 1, SEQ), np.float32)
    keep[..., SEQ - padding :] = 0
    q, k = (RNG.standard_normal((1, HEADS, SEQ, 4)).astype(np.float32) for _ in range(2))
    return {"q": q, "k": k, "keep": keep}


def float_softmax(sample: dict[str, np.ndarray]) -> np.ndarray:
    scores = sample["q"] @ np.swapaxes(sample["k"], -1, -2) * 0.5
    scores = np.where(sample["keep"] > 0, scores, -np.inf).astype(np.float64)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def int8_softmax(mask_value: float, tmp_path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """INT8 (bm1684x, TPU interpreter) and numpy float softmax on test samples,
    calibrated on others."""
    from tpuc.base.cali_table import CaliTable as Table
    from tpuc.workflow.deploy import lower

    module, store = attention_model(mask_value)
    attach_weights(module, store)
    cal = Calibration(module, store, "attn", warn=lambda message: None)
    cal.load = lambda sample: sample  # samples are input dicts already
    entries = cal.run([attention_sample(p) for p in (1, 2, 3, 0)], [], "kl")
    table = tmp_path / "attn_cali_table"
    table.write_text(
        format_table(
            Table(entries),
            mlir="attn.mlir",
            methods=["kl"],
            histogram_bins=2048,
            samples=4,
            tune_num=0,
        )  # fmt: skip
    )
    lowered = module.clone()
    attach_weights(lowered, store)
    lower(lowered, "bm1684x", "INT8", cali_table=table)
    tpu = TpuInterpreter(lowered)
    tests = [attention_sample(p) for p in (2, 5)]
    got = [tpu.real_values(tpu.run(weights_of(lowered), x))["probs"] for x in tests]
    return got, [float_softmax(x) for x in tests]


@pytest.mark.parametrize("mask_value", [LOWEST, -np.inf, -10000.0])
def test_masked_softmax_equals_fp32(mask_value, tmp_path):
    got, want = int8_softmax(mask_value, tmp_path)
    for g, w in zip(got, want, strict=True):
        assert np.all(g[w == 0] == 0)  # masked: exactly 0, as in float
        rows_g, rows_w = g.reshape(-1, SEQ), w.reshape(-1, SEQ)
        cos = (
            (rows_g * rows_w).sum(1)
            / np.linalg.norm(rows_g, axis=1)
            / np.linalg.norm(rows_w, axis=1)
        )
        assert cos.min() > 0.98  # issue 26: every row within 0.02 of FP32 (q, k, scores in INT8)
        assert np.all(np.ptp(rows_g, axis=1) > 0)  # no uniform row


# --- calibration: mask-adds and bounded activations ----------------------------------------


def test_mask_add_takes_the_scores_range():
    module, _ = attention_model(LOWEST)
    steps = TopInterpreter(module).steps
    entries = {
        "scores": CaliEntry(1.2, -1.3, 1.1),
        "mask": CaliEntry(-LOWEST, LOWEST, 0.0),
        "masked": CaliEntry(-LOWEST, LOWEST, 1.1),
        "probs": CaliEntry(1.0, 0.0, 0.9),
    }
    ruled = apply_rules(steps, entries)
    assert ruled["masked"] == entries["scores"]
    assert ruled["mask"] == entries["mask"]  # the mask itself keeps its range


def sigmoid_steps():
    nodes = [helper.make_node("Sigmoid", ["x"], ["y"])]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in "xy"]
    graph = helper.make_graph(nodes, "sig", io[:1], io[1:])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    module, _ = convert_onnx("sig.onnx", "sig", model=proto)
    return TopInterpreter(module).steps


@pytest.mark.parametrize(
    ("measured", "expected"),
    [
        (CaliEntry(0.05, 0.001, 0.12), CaliEntry(0.12, 0.0, 0.12)),  # PicoDet's scores
        (CaliEntry(0.7, 0.0, 0.83), CaliEntry(1.0, 0.0, 1.0)),  # YOLOv8's: near 1
        (CaliEntry(1.0, 0.2, 1.0), CaliEntry(1.0, 0.0, 1.0)),
        (CaliEntry(0.3, 0.0, 0.35), CaliEntry(1.0, 0.0, 1.0)),  # ppocr_cls's SE gate
    ],
)
def test_bounded_output_takes_its_bound_only_near_it(measured, expected):
    ruled = apply_rules(sigmoid_steps(), {"x": CaliEntry(8.0, -8.0, 8.0), "y": measured})
    assert ruled["y"] == expected


# --- tensors INT8 cannot hold ----------------------------------------------------------------


def histogram_stats(values: np.ndarray, bins: int = 2048) -> TensorStats:
    """TPU-MLIR's histogram of |x| over [0, absmax] (zeros left out)."""
    stats = TensorStats("t", float(values.min()), float(values.max()), values.size)
    stats.width = stats.absmax / (bins - 1)
    index = np.minimum((np.abs(values) / stats.width + 0.5).astype(int), bins - 1)
    stats.hist = np.bincount(index[values != 0], minlength=bins).astype(np.int64)
    return stats


def test_sqnr_of_a_clipped_box_concat_is_low():
    """YOLOv8's output: 4 box rows 0–316 and 18 score rows 0–0.83 in one
    tensor, kl's threshold 20.35: clipping dominates the noise."""
    boxes = RNG.uniform(0, 316, (4, 2100))
    scores = RNG.uniform(0, 0.83, (18, 2100))
    values = np.concatenate([boxes, scores]).astype(np.float32)
    entry = CaliEntry(20.35, 0.0, 316.0)
    sqnr = int8_sqnr_db(histogram_stats(values), entry)
    clipped = np.maximum(np.abs(values) - 20.35, 0)
    expected = 10 * math.log10((values.astype(np.float64) ** 2).sum() / (clipped**2).sum())
    assert sqnr == pytest.approx(expected, abs=0.1)  # clipping only: rounding adds ~nothing
    assert sqnr < 3
    entries = {"t": entry}
    assert lossy_tensors({"t": histogram_stats(values)}, entries) == {"t": round(sqnr, 2)}


def test_sqnr_of_a_clean_tensor_is_rounding_noise():
    """Uniform values in [-t, t] at threshold t: signal t²/3 against
    step²/12 with step t/127, 10·log10(4·127²) = 46.1 dB."""
    values = RNG.uniform(-4, 4, 200_000).astype(np.float32)
    sqnr = int8_sqnr_db(histogram_stats(values), CaliEntry(4.0, -4.0, 4.0))
    assert sqnr == pytest.approx(10 * math.log10(4 * 127**2), abs=0.3)
    assert sqnr > MIN_SQNR_DB


def test_mask_values_are_not_measured():
    values = np.concatenate([RNG.uniform(-1, 1, 1000), [LOWEST] * 100]).astype(np.float32)
    assert int8_sqnr_db(histogram_stats(values), CaliEntry(1.0, LOWEST, 1.0)) is None


def test_lossy_lines_round_trip_and_are_comments():
    table = CaliTable({"a": CaliEntry(1.0, -1.0, 1.0)}, lossy={"a": 2.5})
    text = format_table(table, mlir="m.mlir", methods=["kl"], histogram_bins=2048, samples=1,
                        tune_num=0)  # fmt: skip
    assert "# int8_lossy a 2.50" in text.splitlines()
    parsed = parse_table(text, "t")
    assert parsed.lossy == {"a": 2.5} and parsed.entries == table.entries
    # TPU-MLIR reads every '#' line that is not a block marker as a comment
    assert all(line.startswith("#") for line in text.splitlines() if "int8_lossy" in line)


# --- overflow in the TPU interpreter is an error naming the op --------------------------------

HUGE = f"!quant.uniform<i8:f32, {-LOWEST / 127!r}>"


def test_overflow_names_the_op():
    """An Add saturates at -128; -128 times a scale of 3.4e38/127 leaves float32."""
    q_type = f"tensor<1x4x{HUGE}>"
    add = 'multiplier = [1, 1], rshift = [0], round_mode = "HalfAwayFromZero"'
    text = f"""
builtin.module {{
  func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {{
    %0 = "top.Input"(%arg0) {{name = "x"}} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %1 = "tpu.Cast"(%0) {{name = "q"}} : (tensor<1x4xf32>) -> {q_type}
    %2 = "tpu.Add"(%1, %1) {{name = "twice", {add}}} : ({q_type}, {q_type}) -> {q_type}
    %3 = "tpu.Cast"(%2) {{name = "back"}} : ({q_type}) -> tensor<1x4xf32>
    func.return %3 : tensor<1x4xf32>
  }}
}}
"""
    interp = TpuInterpreter(parse_module(text))
    x = np.array([[LOWEST, -1e38, 0.0, 1e30]], np.float32)
    with pytest.raises(TpucError, match="tpu.Cast 'back'.*overflow"):
        interp.run({}, {"x": x})


def test_concat_parts_are_measured_at_the_outputs_threshold():
    """YOLOv8's head with a threshold that keeps the boxes (318.9): the whole
    tensor measures well (boxes dominate its energy), its scores part rounds
    to 0 (u8 step 1.25 against scores of 0–0.83): the Concat is lossy."""
    nodes = [helper.make_node("Concat", ["boxes", "scores"], ["out"], axis=0)]
    inputs = [
        helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [4, 2100]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [18, 2100]),
    ]
    out = [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "head", inputs, out)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    module, _ = convert_onnx("head.onnx", "head", model=proto)
    steps = TopInterpreter(module).steps
    boxes = RNG.uniform(0, 316, (4, 2100)).astype(np.float32)
    scores = RNG.uniform(0, 0.83, (18, 2100)).astype(np.float32)
    stats = {
        "boxes": histogram_stats(boxes),
        "scores": histogram_stats(scores),
        "out": histogram_stats(np.concatenate([boxes, scores])),
    }
    entries = {
        "boxes": CaliEntry(316.0, 0.0, 316.0),
        "scores": CaliEntry(1.0, 0.0, 1.0),
        "out": CaliEntry(318.9, 0.0, 318.9),
    }
    assert int8_sqnr_db(stats["out"], entries["out"]) > 30  # the whole tensor hides it
    lossy = lossy_tensors(stats, entries, steps)
    assert list(lossy) == ["out"] and lossy["out"] < 5  # the scores part, far below 15


def test_a_technique_keeps_the_lossy_lines():
    """run_calibration.py --we (or any technique, or search_threshold) writes
    the table the plan made: its lossy tensors must be the ones plain
    calibration finds, or model_deploy.py's automatic mix silently stops
    (YOLOv8n with --we: output cosine 0.999 -> 0.790)."""
    from tpuc.ir.weights import WeightStore
    from tpuc.workflow.calibration.techniques import Plan, run_plan

    nodes = [helper.make_node("Concat", ["boxes", "scores"], ["out"], axis=0)]
    inputs = [
        helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [4, 64]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [18, 64]),
    ]
    out = [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "head", inputs, out)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    module, arrays = convert_onnx("head.onnx", "head", model=proto)
    store = WeightStore(arrays)
    attach_weights(module, store)
    cal = Calibration(module, store, "head", warn=lambda message: None)
    cal.load = lambda sample: sample
    samples = [
        {"boxes": RNG.uniform(0, 316, (4, 64)).astype(np.float32),
         "scores": RNG.uniform(0, 0.83, (18, 64)).astype(np.float32)}
        for _ in range(2)
    ]  # fmt: skip
    plain = cal.run(samples, [], "kl")
    assert "out" in cal.lossy and plain
    for techniques, search in ((("we",), None), ((), "search_threshold")):
        plan = Plan(techniques, search, "bm1684x", "kl", 2048, 2)
        outcome = run_plan(cal, samples, [], plan, lambda items, what: items, lambda line: None)
        assert "out" in outcome.lossy
