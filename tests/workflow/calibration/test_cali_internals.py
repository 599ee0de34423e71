"""Statistics collection, auto-tune and range rules, each checked against an
independent numpy computation (onnxruntime for the float tensors)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpuc.base.cali_table import CaliEntry
from tpuc.frontends.onnx import convert_onnx
from tpuc.interp.top_interpreter import TopInterpreter
from tpuc.workflow.calibration.collect import StatsCollector, bucket_counts, collect, tensor_order
from tpuc.workflow.calibration.rules import apply_rules
from tpuc.workflow.calibration.tune import Tuner

RNG = np.random.default_rng(7)
W = RNG.standard_normal((6, 4)).astype(np.float32)
TENSORS = ["x", "m", "r", "rs", "y", "a"]


def small_model() -> onnx.ModelProto:
    """x[4,6] -> MatMul(W) m -> Relu r -> Reshape rs -> Sigmoid y; x -> Abs a."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["m"]),
        helper.make_node("Relu", ["m"], ["r"]),
        helper.make_node("Reshape", ["r", "shape"], ["rs"]),
        helper.make_node("Sigmoid", ["rs"], ["y"]),
        helper.make_node("Abs", ["x"], ["a"]),
    ]
    inits = [
        numpy_helper.from_array(W, "W"),
        numpy_helper.from_array(np.array([2, 8], np.int64), "shape"),
    ]
    out = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in TENSORS[1:]]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])], out, inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.fixture(scope="module")
def model():
    proto = small_model()
    module, weights = convert_onnx("small.onnx", "small", model=proto)
    return proto, TopInterpreter(module), weights


def samples(count: int) -> list[np.ndarray]:
    data = [RNG.standard_normal((4, 6)).astype(np.float32) * (i + 1) for i in range(count)]
    data[1][0, 0] = 0.0
    return data


def ort_tensors(proto: onnx.ModelProto, x: np.ndarray) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = session.run(TENSORS[1:], {"x": x})
    return {"x": x, **dict(zip(TENSORS[1:], outs, strict=True))}


def test_tensor_order_is_network_order(model):
    _, interp, _ = model
    assert tensor_order(interp) == ["x", "m", "r", "rs", "y", "a"]


def test_statistics_match_numpy(model):
    proto, interp, weights = model
    data = samples(3)
    stats = collect(
        interp, weights, range(3), lambda i: {"x": data[i]}, bins=256, histogram=True,
        moments=True, progress=lambda items, what: items, warn=pytest.fail,
    )  # fmt: skip
    refs = [ort_tensors(proto, x) for x in data]
    for name in TENSORS:
        values = np.concatenate([r[name].reshape(-1) for r in refs])
        s = stats[name]
        assert s.min == pytest.approx(values.min(), rel=1e-6)
        assert s.max == pytest.approx(values.max(), rel=1e-6)
        assert s.count == values.size
        assert s.zeros == np.count_nonzero(values == 0)
        assert s.mean == pytest.approx(values.mean(), rel=1e-4, abs=1e-6)
        assert s.std == pytest.approx(values.std(), rel=1e-4)
        assert s.mean_abs_dev == pytest.approx(np.abs(values - values.mean()).mean(), rel=1e-4)
        # TPU-MLIR's buckets, computed here in float64
        width = np.abs(values).max() / 255
        nonzero = np.abs(values[values != 0]).astype(np.float64)
        want = np.bincount(np.minimum(np.floor(nonzero / width + 0.5), 255).astype(int), None, 256)
        assert np.abs(s.hist - want).sum() <= 2, name  # float32 vs float64 at bucket edges
        assert s.hist.sum() == values.size - s.zeros


def test_bucket_counts_edges():
    # width 1: 0.49 -> 0, 0.5 -> 1, 2.5 -> 3, values beyond the last bucket stay in it
    got = bucket_counts(np.array([0.49, 0.5, -0.5, 2.5, 9.0], np.float32), 1.0, 4)
    assert list(got) == [1, 2, 0, 2]


def test_nan_and_inf_are_excluded_with_a_warning(model):
    _, interp, weights = model
    data = samples(2)
    data[0][1, 1] = np.nan
    data[1][2, 2] = np.inf
    warnings: list[str] = []
    stats = collect(
        interp, weights, range(2), lambda i: {"x": data[i]}, bins=128, histogram=True,
        moments=False, progress=lambda items, what: items, warn=warnings.append,
    )  # fmt: skip
    finite = np.concatenate([d.reshape(-1) for d in data])
    finite = finite[np.isfinite(finite)]
    assert stats["x"].nonfinite == 2
    assert stats["x"].max == pytest.approx(finite.max())
    assert stats["x"].hist.sum() + stats["x"].zeros == finite.size
    assert any("'x'" in w and "NaN/Inf" in w for w in warnings)


def test_all_zero_tensor_warns():
    collector = StatsCollector(["z"], 128, False)
    warnings: list[str] = []
    from tpuc.workflow.calibration.collect import report_odd

    collector._fold_range(collector.stats["z"], np.zeros(5, np.float32))
    report_odd(collector.stats["z"], 1, warnings.append)
    assert collector.stats["z"].absmax == 0
    assert "'z' is all zeros" in warnings[0]


# --- auto-tune against a brute-force search -----------------------------------------------


def fake_quant_ref(x: np.ndarray, threshold: float) -> np.ndarray:
    """Symmetric int8, ties away from zero, computed in float64."""
    v = x.astype(np.float64) * (127.0 / threshold)
    q = np.clip(np.trunc(v + np.copysign(0.5, v)), -128, 127)
    return q * (threshold / 127.0)


def weight_fake_quant_ref(w: np.ndarray) -> np.ndarray:
    scale = np.abs(w).max() / 127.0
    v = w.astype(np.float64) / scale
    return np.clip(np.trunc(v + np.copysign(0.5, v)), -127, 127) * scale


def best_threshold(data, start, absmax, op) -> float:
    grid = start + (absmax - start) * np.arange(11) / 10
    scores = []
    for t in grid:
        total = 0.0
        for x in data:
            ref = op(x.astype(np.float64), exact=True)
            out = op(fake_quant_ref(x, t), exact=False)
            total += np.linalg.norm(ref - out) / np.abs(ref).sum()
        scores.append(total)
    return float(grid[int(np.argmin(scores))])


def test_tune_matches_brute_force_and_keeps_the_largest(model):
    _, interp, weights = model
    data = samples(3)
    for x in data:
        x[0, :] *= 6.0  # a few large values: the best threshold lies below abs-max
    absmax = float(max(np.abs(x).max() for x in data))
    start = absmax / 4
    tuner = Tuner(interp, {"x": start}, {"x": absmax})
    for x in data:
        interp.run(weights, {"x": x}, observe=tuner.observe)
    wq = weight_fake_quant_ref(W)

    def matmul(v, exact):
        return v @ (W.astype(np.float64) if exact else wq)

    def absolute(v, exact):
        return np.abs(v)

    per_reader = [best_threshold(data, start, absmax, op) for op in (matmul, absolute)]
    assert tuner.thresholds()["x"] == pytest.approx(max(per_reader), rel=1e-6)
    assert start < tuner.thresholds()["x"] <= absmax


def test_tune_skips_tensors_already_at_absmax(model):
    _, interp, weights = model
    tuner = Tuner(interp, {"x": 2.0}, {"x": 2.0})
    assert tuner.evaluations == 0
    assert tuner.thresholds() == {}


# --- range rules ----------------------------------------------------------------------------


def test_rules(model):
    _, interp, _ = model
    entries = {
        "x": CaliEntry(3.0, -3.0, 3.5),
        "m": CaliEntry(5.0, -6.0, 6.0),
        "r": CaliEntry(4.0, -0.1, 6.0),  # a measured min below zero is noise
        "rs": CaliEntry(1.0, 0.0, 2.0),
        "y": CaliEntry(0.8, 0.5, 0.9),
        "a": CaliEntry(2.0, 0.0, 3.5),
    }
    ruled = apply_rules(interp.steps, entries)
    assert ruled["r"] == CaliEntry(4.0, 0.0, 6.0)  # ReLU: min 0
    assert ruled["rs"] == ruled["r"]  # Reshape: its input's range
    assert ruled["y"] == CaliEntry(1.0, 0.0, 1.0)  # Sigmoid: [0, 1]
    assert ruled["x"] == entries["x"] and ruled["m"] == entries["m"]
    assert entries["rs"] == CaliEntry(1.0, 0.0, 2.0)  # the input dict is not modified
