"""Calibration on the fast float path: tune's near-tie rule on hand-made
distances, observers seeing true operands (checked against onnxruntime), and
tables that are the same bytes at 1, 2 and 4 threads and on either path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpuc.frontends.onnx import convert_onnx
from tpuc.interp.top_interpreter import TopInterpreter
from tpuc.workflow.calibration.tune import NEAR_TIE, Candidate, Tuner, pick

ROOT = Path(__file__).resolve().parents[3]

# --- the near-tie rule --------------------------------------------------------------


def test_pick_keeps_the_current_threshold_on_a_near_tie():
    # the best candidate beats the current one by half the tolerance: a tie
    d = np.array([1.0, 1.0 - NEAR_TIE / 2, 1.0 + 0.3, 1.0 - NEAR_TIE / 4])
    assert pick(d) == 0


def test_pick_moves_on_a_real_improvement():
    d = np.array([1.0, 0.97, 0.95, 0.99])
    assert pick(d) == 2


def test_pick_takes_the_smallest_candidate_tied_with_the_best():
    # candidates 1 and 3 are within the tolerance of each other: the smaller wins
    d = np.array([1.0, 0.9 + NEAR_TIE / 2, 0.95, 0.9])
    assert pick(d) == 1
    assert int(np.argmin(d)) == 3  # where a bare argmin would go


def test_pick_does_not_follow_rounding():
    """Two runs whose distances differ by float32 rounding (1e-6 relative,
    more than the gap between the two best candidates) pick the same one."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        d = 1.0 - np.sort(rng.uniform(0, 0.05, 11))[::-1] * rng.integers(0, 2)
        d[rng.integers(1, 11)] = d.min() * (1 + 2e-7)  # a near-tie for the best
        noisy = d * (1 + rng.uniform(-1e-6, 1e-6, d.size))
        assert pick(d) == pick(noisy)


def test_tuner_applies_the_rule_per_reader_and_keeps_the_largest():
    """Hand-made candidate scores on a tensor read by two ops: one reader's
    best is a near-tie (stays at 2.0), the other's a real gain (3.0)."""
    tuner = Tuner.__new__(Tuner)
    grid = np.array([2.0, 3.0, 4.0])
    tuner.candidates = {
        0: [Candidate(0, "t", grid, np.array([1.0, 1.0 - 1e-5, 1.1]))],
        1: [Candidate(0, "t", grid, np.array([1.0, 0.5, 0.8]))],
        2: [Candidate(0, "u", grid, np.array([1.0, 1.0 - 1e-5, 1.0 - 2e-5]))],
    }
    assert tuner.thresholds() == {"t": 3.0, "u": 2.0}


def test_tune_keeps_weights_as_int8_with_the_same_floats_back():
    """Tune holds (int8, scale) instead of fake-quantized floats: the floats it
    rebuilds are fake_quant_per_channel's, bit for bit."""
    from tpuc.base.numerics import fake_quant_per_channel, quant_per_channel

    rng = np.random.default_rng(4)
    w = (rng.standard_normal((16, 8, 3, 3)) * rng.uniform(0.01, 3, (16, 1, 1, 1))).astype(
        np.float32
    )
    w[3] = 0.0  # an all-zero channel
    for axis in (0, None):
        q, scale = quant_per_channel(w, axis)
        assert q.dtype == np.int8 and np.abs(q).max() == 127
        rebuilt = (q * scale).astype(np.float32)
        np.testing.assert_array_equal(rebuilt, fake_quant_per_channel(w, axis))
        # by hand: scale = abs-max / 127 per channel (1 for a zero channel),
        # round half away from zero, in float32 as the chip's lowering does
        absmax = np.abs(w).max(axis=(1, 2, 3), keepdims=True) if axis == 0 else np.abs(w).max()
        step = np.where(absmax > 0, absmax / np.float32(127), 1).astype(np.float32)
        v = (w / step).astype(np.float64)
        hand = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -127, 127)
        np.testing.assert_array_equal(q, hand.astype(np.int8))


# --- observers see operands, not results written over them -----------------------


def residual_model(size: int = 16, channels: int = 8) -> onnx.ModelProto:
    """x -> Conv c1 -> Relu r1 -> Conv c2 -> Add(c2, r1) s -> Relu y -> Mul(y, y) m,
    MaxPool p; Concat(m, p) out. Seeded weights."""
    rng = np.random.default_rng(11)
    w1 = (rng.standard_normal((channels, 3, 3, 3)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((channels, channels, 3, 3)) * 0.15).astype(np.float32)
    b = (rng.standard_normal(channels) * 0.1).astype(np.float32)
    pads = [1, 1, 1, 1]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b"], ["c1"], pads=pads),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b"], ["c2"], pads=pads),
        helper.make_node("Add", ["c2", "r1"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
        helper.make_node("Mul", ["y", "y"], ["m"]),
        helper.make_node("MaxPool", ["y"], ["p"], kernel_shape=[3, 3], pads=pads),
        helper.make_node("Concat", ["m", "p"], ["out"], axis=1),
    ]
    inits = [numpy_helper.from_array(a, n) for n, a in (("w1", w1), ("w2", w2), ("b", b))]
    graph = helper.make_graph(
        nodes,
        "residual",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def ort_tensors(proto: onnx.ModelProto, x: np.ndarray) -> dict[str, np.ndarray]:
    names = [n for node in proto.graph.node for n in node.output]
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    del model.graph.output[:]
    model.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return {"x": x, **dict(zip(names, session.run(names, {"x": x}), strict=True))}


@pytest.mark.parametrize("native", [False, True])
def test_observer_sees_each_operand_as_onnxruntime_computes_it(native):
    proto = residual_model()
    module, weights = convert_onnx("residual.onnx", "residual", model=proto)
    interp = TopInterpreter(module, native=native)
    x = np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)
    ref = ort_tensors(proto, x)
    seen: dict[str, np.ndarray] = {}

    def observe(step, args, results):
        from tpuc.interp.top_interpreter import activation_name

        for value, array in zip(step.operands, args, strict=False):  # leaves: no args
            name = activation_name(value)
            if name in ref:
                seen.setdefault(f"{step.names[0]}<-{name}", np.array(array, copy=True))

    interp.run(weights, {"x": x}, observe=observe)
    assert any(key.startswith("s<-") for key in seen)  # the Add whose operands die there
    for key, array in seen.items():
        operand = key.split("<-")[1]
        np.testing.assert_allclose(array, ref[operand], rtol=1e-5, atol=1e-5, err_msg=key)


def test_an_observer_of_results_only_gets_no_operands():
    """Statistics read results only: they let kernels reuse dying operands'
    memory (a plain run's peak) and see the same results."""
    proto = residual_model()
    module, weights = convert_onnx("residual.onnx", "residual", model=proto)
    interp = TopInterpreter(module, native=False)
    x = np.random.default_rng(6).standard_normal((1, 3, 16, 16)).astype(np.float32)
    ref = ort_tensors(proto, x)
    seen = []

    def observe(step, args, results):
        assert args == []
        seen.extend(step.names)
        for name, array in zip(step.names, results, strict=True):
            np.testing.assert_allclose(array, ref[name], rtol=1e-5, atol=1e-5, err_msg=name)

    interp.run(weights, {"x": x}, observe=observe, operands=False)
    assert {"s", "y", "m", "out"} <= set(seen)


# --- the same table at any thread count and on either path ------------------------


@pytest.fixture(scope="module")
def calibration_case(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("threads")
    onnx.save(residual_model(size=48, channels=16), folder / "residual.onnx")
    done = subprocess.run(
        [sys.executable, "-m", "tpuc.tools.model_transform", "--model_name", "residual",
         "--model_def", str(folder / "residual.onnx"), "--mlir", str(folder / "residual.mlir")],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = folder / "data"
    data.mkdir()
    rng = np.random.default_rng(9)
    for i in range(4):
        x = rng.standard_normal((1, 3, 48, 48)).astype(np.float32) * (1 + i)
        np.savez(data / f"s{i}.npz", x=x)
    return folder / "residual.mlir", data


def table_with(case, out: Path, **env: str) -> bytes:
    mlir, data = case
    done = subprocess.run(
        [sys.executable, "-m", "tpuc.tools.run_calibration", str(mlir), "--dataset", str(data),
         "--tune_num", "2", "-o", str(out)],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out.read_bytes()


def test_tables_are_the_same_bytes_at_1_2_and_4_threads(calibration_case, tmp_path):
    tables = {
        n: table_with(calibration_case, tmp_path / f"t{n}", OMP_NUM_THREADS=str(n))
        for n in (1, 2, 4)
    }
    assert tables[1] == tables[2] == tables[4]


def test_native_and_numpy_paths_give_the_same_table(calibration_case):
    """onnxruntime and numpy kernels differ in float32 rounding only: every
    number within 1e-6 relative (a tune pick that differed would move a
    threshold by a grid step, far more)."""
    from tpuc.workflow.calibration.calibrate import Calibration

    mlir, data = calibration_case
    tables = {}
    for native in (False, True):
        cal = Calibration.open(mlir, pytest.fail)
        cal.interp = TopInterpreter(cal.module, native=native)
        samples = cal.samples(str(data), None, 0)
        tables[native] = cal.run(samples, samples[:2], "kl")
    assert tables[False].keys() == tables[True].keys()
    for name, entry in tables[True].items():
        other = tables[False][name]
        for field in ("threshold", "min", "max"):
            got, want = getattr(entry, field), getattr(other, field)
            assert got == pytest.approx(want, rel=1e-6, abs=1e-7), (name, field)
