"""The calibration techniques against hand-computed cases and onnxruntime:
weight equalization keeps the float function (1e-5 of the output's range,
onnxruntime on the original model) and equalizes each pair's channel
ranges; bias correction removes a planted mean error; SmoothQuant's scales
follow s = max|X|^α / max|W|^(1−α) and keep the float function; learned
rounding never does worse than nearest rounding on its own objective and
is nearest rounding when the inputs are uncorrelated; search_threshold picks
the threshold whose INT8 output cosine a hand computation says is best."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpuc.base.numerics import fake_quant
from tpuc.interp.top_interpreter import TopInterpreter
from tpuc.ir.module_io import load_module
from tpuc.tools import model_transform
from tpuc.workflow.calibration.adaround import learn_rows
from tpuc.workflow.calibration.bias_correction import correct_biases
from tpuc.workflow.calibration.equalize import equalize
from tpuc.workflow.calibration.linear import Linear
from tpuc.workflow.calibration.smoothquant import smooth, smooth_scales

F = TensorProto.FLOAT


def _no_progress(items, what):
    return items


def onnx_model(path: Path, nodes, inputs, outputs, inits, opset=13) -> Path:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


def to_top(onnx_path: Path) -> Path:
    mlir = onnx_path.with_suffix(".mlir")
    argv = ["--model_name", onnx_path.stem, "--model_def", str(onnx_path), "--mlir", str(mlir)]
    with contextlib.redirect_stdout(io.StringIO()):
        assert model_transform.run(argv) == 0
    return mlir


def init(name: str, array) -> object:
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


def uneven(rng, shape, axis=0) -> np.ndarray:
    """Gaussian weights whose slices along `axis` span four decades."""
    w = rng.standard_normal(shape)
    gains = 10.0 ** rng.uniform(-2, 2, shape[axis])
    return (np.moveaxis(np.moveaxis(w, axis, -1) * gains, -1, axis)).astype(np.float32)


def ops(module):
    return list(next(iter(module.ops)).body.block.ops)


# --- weight equalization ------------------------------------------------------------


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Path:
    """Conv+Relu -> depthwise Conv -> PRelu -> 1x1 Conv -> LeakyRelu -> GAP
    -> Gemm+Relu -> Gemm, channel ranges four decades apart."""
    rng = np.random.default_rng(3)
    inits = [
        init("w1", uneven(rng, (8, 3, 3, 3))), init("b1", rng.standard_normal(8)),
        init("w2", uneven(rng, (8, 1, 3, 3))), init("b2", rng.standard_normal(8)),
        init("slope", np.full((8, 1, 1), 0.2)),
        init("w3", uneven(rng, (6, 8, 1, 1), axis=1)), init("b3", rng.standard_normal(6)),
        init("g1", uneven(rng, (6, 5), axis=1)), init("c1", rng.standard_normal(5)),
        init("g2", uneven(rng, (5, 4), axis=0)), init("c2", rng.standard_normal(4)),
    ]  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["a"], ["ar"], name="relu1"),
        helper.make_node("Conv", ["ar", "w2", "b2"], ["b"], pads=[1, 1, 1, 1], group=8,
                         name="dw"),
        helper.make_node("PRelu", ["b", "slope"], ["bp"], name="prelu"),
        helper.make_node("Conv", ["bp", "w3", "b3"], ["c"], name="conv3"),
        helper.make_node("LeakyRelu", ["c"], ["cl"], alpha=0.1, name="leaky"),
        helper.make_node("GlobalAveragePool", ["cl"], ["p"], name="gap"),
        helper.make_node("Flatten", ["p"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "g1", "c1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["hr"], name="relu2"),
        helper.make_node("Gemm", ["hr", "g2", "c2"], ["y"], name="fc2"),
    ]  # fmt: skip
    folder = tmp_path_factory.mktemp("chain")
    path = onnx_model(folder / "chain.onnx", nodes,
                      [helper.make_tensor_value_info("x", F, [2, 3, 8, 8])],
                      [helper.make_tensor_value_info("y", F, [2, 4])], inits)  # fmt: skip
    return path


def test_equalization_keeps_the_float_function(chain):
    module, store = load_module(to_top(chain))
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(str(chain)).run(None, {"x": x})[0]
    pairs = equalize(ops(module), store)
    assert [p.label for p in pairs] == ["ar -> b", "b -> c", "hr -> y"]  # by output tensor
    got = TopInterpreter(module, native=False).run(store, {"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_equalization_makes_each_pairs_channel_ranges_equal(chain):
    module, store = load_module(to_top(chain))
    pairs = equalize(ops(module), store)
    last = pairs[-1]  # fc1 -> fc2 is alone: one round makes its ranges equal
    r1 = np.abs(last.first.out_major()).max(axis=1)
    r2 = np.abs(last.second.out_major()).max(axis=0)
    np.testing.assert_allclose(r1, r2, rtol=1e-5)
    assert r1.max() / r1.min() < 1e3  # the gains alone span four decades


# --- bias correction ----------------------------------------------------------------


@pytest.fixture
def planted(tmp_path) -> Path:
    """A 1x1 Conv (4 -> 2): each row's abs-max is 1.27 (INT8 step 0.01) and
    its other weights 0.004 (0.4 of a step): nearest rounding makes them 0,
    a mean error of -0.004·Σx per output channel."""
    w = np.array([[1.27, 0.004, 0.004, 0.004], [-1.27, 0.004, 0.004, -0.004]], np.float32)
    inits = [init("w", w.reshape(2, 4, 1, 1)), init("b", [0.5, -0.5])]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv")]
    return onnx_model(tmp_path / "planted.onnx", nodes,
                      [helper.make_tensor_value_info("x", F, [1, 4, 2, 2])],
                      [helper.make_tensor_value_info("y", F, [1, 2, 2, 2])], inits)  # fmt: skip


def test_bias_correction_removes_a_planted_mean_error(planted):
    module, store = load_module(to_top(planted))
    interp = TopInterpreter(module, native=False)
    rng = np.random.default_rng(1)
    samples = [rng.uniform(0.5, 1.5, (1, 4, 2, 2)).astype(np.float32) for _ in range(4)]
    mean_x = np.mean([s.mean(axis=(0, 2, 3)) for s in samples], axis=0)
    done = correct_biases(interp, store, samples, lambda s: {"x": s}, _no_progress)
    assert [c.layer.name for c in done] == ["y"]
    # hand-computed: W_q - W is -0.004 on three inputs (row 0), -0.004, -0.004, +0.004 (row 1)
    planted_error = np.array([-0.004 * mean_x[1:].sum(), -0.004 * (mean_x[1] + mean_x[2])
                              + 0.004 * mean_x[3]])  # fmt: skip
    np.testing.assert_allclose(done[0].mean_error, planted_error, rtol=1e-5)
    np.testing.assert_allclose(store["b"], np.array([0.5, -0.5]) - planted_error, rtol=1e-5)
    layer = Linear.of(done[0].layer.op, store)
    for s in samples:  # INT8-rounded weights with the new bias: the mean error is gone
        q = layer.linear(s, layer.quantized_weight()) + store["b"].reshape(1, 2, 1, 1)
        f = layer.linear(s, layer.weight) + np.array([0.5, -0.5]).reshape(1, 2, 1, 1)
        assert np.abs((q - f).mean()) < np.abs(planted_error).max()
    errors = [(layer.linear(s, layer.quantized_weight()) - layer.linear(s, layer.weight))
              .mean(axis=(0, 2, 3)) for s in samples]  # fmt: skip
    np.testing.assert_allclose(np.mean(errors, axis=0) - done[0].mean_error, 0, atol=1e-7)


# --- SmoothQuant --------------------------------------------------------------------


def test_smoothquant_scales_by_hand():
    s = smooth_scales(np.array([4.0, 1.0, 0.0]), np.array([0.5, 2.0, 1.0]), 0.5)
    np.testing.assert_allclose(s, [np.sqrt(4 / 0.5), np.sqrt(1 / 2.0), 1.0])
    s = smooth_scales(np.array([9.0]), np.array([3.0]), 0.75)
    np.testing.assert_allclose(s, [9.0**0.75 / 3.0**0.25])


def test_smoothquant_follows_its_formula_and_keeps_the_function(tmp_path):
    rng = np.random.default_rng(5)
    gamma = np.ones(6, np.float32)
    gamma[2] = 40.0  # an outlier channel
    inits = [
        init("gamma", gamma),
        init("beta", rng.standard_normal(6) * 0.1),
        init("wq", rng.standard_normal((6, 5))),
        init("wk", rng.standard_normal((6, 3))),
    ]
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["n"], axis=-1,
                         name="ln"),
        helper.make_node("MatMul", ["n", "wq"], ["q"], name="q"),
        helper.make_node("MatMul", ["n", "wk"], ["k"], name="k"),
    ]  # fmt: skip
    path = onnx_model(tmp_path / "ln.onnx", nodes,
                      [helper.make_tensor_value_info("x", F, [1, 7, 6])],
                      [helper.make_tensor_value_info("q", F, [1, 7, 5]),
                       helper.make_tensor_value_info("k", F, [1, 7, 3])],
                      inits, opset=17)  # fmt: skip
    module, store = load_module(to_top(path))
    samples = [rng.standard_normal((1, 7, 6)).astype(np.float32) for _ in range(3)]
    session = ort.InferenceSession(str(path))
    want = [session.run(None, {"x": s}) for s in samples]
    ln = ort.InferenceSession(str(onnx_model(tmp_path / "n.onnx", nodes[:1],
                              [helper.make_tensor_value_info("x", F, [1, 7, 6])],
                              [helper.make_tensor_value_info("n", F, [1, 7, 6])], inits[:2],
                              opset=17)))  # fmt: skip
    act_max = np.max([np.abs(ln.run(None, {"x": s})[0]).max(axis=(0, 1)) for s in samples], 0)
    weight_max = np.maximum(
        np.abs(inits_of(store, "wq")).max(1), np.abs(inits_of(store, "wk")).max(1)
    )
    interp = TopInterpreter(module, native=False)
    sites = smooth(interp, store, samples, lambda s: {"x": s}, _no_progress)
    assert [s.name for s in sites] == ["n"] and sorted(r.name for r in sites[0].readers) == [
        "k",
        "q",
    ]
    expected = smooth_scales(act_max, weight_max, sites[0].alpha)
    np.testing.assert_allclose(sites[0].scales, expected, rtol=1e-5)
    assert sites[0].scales[2] == sites[0].scales.max()  # the outlier channel moves most
    for s, (q, k) in zip(samples, want, strict=True):
        got = interp.run(store, {"x": s})
        np.testing.assert_allclose(got["q"], q, atol=1e-5 * np.abs(q).max())
        np.testing.assert_allclose(got["k"], k, atol=1e-5 * np.abs(k).max())


def inits_of(store, base: str) -> np.ndarray:
    """The weight model_transform named after ONNX initializer `base`."""
    names = [n for n in store if n == base or n.startswith(base + "_")]
    return np.asarray(store[names[0]])


# --- learned rounding ---------------------------------------------------------------


def test_learned_rounding_is_nearest_rounding_for_uncorrelated_inputs():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 9))
    scale = np.abs(w).max(axis=1) / 127
    q = learn_rows(w, scale, np.eye(9))
    np.testing.assert_array_equal(q, np.round(w / scale[:, None]))


def test_learned_rounding_beats_nearest_rounding_on_correlated_inputs():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((200, 1)) + 0.1 * rng.standard_normal((200, 12))  # one direction
    gram = x.T @ x
    w = rng.standard_normal((6, 12))
    scale = np.abs(w).max(axis=1) / 127
    nearest = np.round(w / scale[:, None])
    learned = learn_rows(w, scale, gram)

    def loss(q):
        d = q * scale[:, None] - w
        return float(np.sum((d @ gram) * d))

    assert loss(learned) < 0.8 * loss(nearest)
    assert np.abs(learned - w / scale[:, None]).max() < 1.0 + 1e-9  # floor or ceil only
    np.testing.assert_array_equal(np.abs(learned).max(axis=1), 127)  # scales kept


# --- search_threshold ---------------------------------------------------------------


def test_search_threshold_picks_what_a_hand_computation_says(tmp_path):
    """y = Relu(x), x Laplace-like with one outlier (3.0) in one sample: kl
    clips it (threshold 0.38), max / percentile9999 keep it whole, mse clips
    it a little; the cosine of each candidate threshold, computed by hand
    with fake quantization, names the winner (mse's)."""
    from tpuc.workflow.calibration.calibrate import Calibration
    from tpuc.workflow.calibration.collect import collect
    from tpuc.workflow.calibration.search import method_thresholds
    from tpuc.workflow.calibration.techniques import Plan, run_plan

    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    path = onnx_model(tmp_path / "r.onnx", nodes,
                      [helper.make_tensor_value_info("x", F, [1, 1000])],
                      [helper.make_tensor_value_info("y", F, [1, 1000])], [])  # fmt: skip
    mlir = to_top(path)
    rng = np.random.default_rng(6)
    (tmp_path / "s").mkdir()
    samples = []
    for i in range(4):
        x = np.abs(rng.laplace(0, 0.05, (1, 1000))).astype(np.float32)
        if i == 0:
            x[0, 7] = 3.0
        np.save(tmp_path / "s" / f"{i}.npy", x)
        samples.append(x)
    cal = Calibration.open(mlir, lambda m: None)
    listed = cal.samples(str(tmp_path / "s"), None, 0)
    plan = Plan((), "search_threshold", "bm1684x", "kl", 2048, 4)
    with contextlib.redirect_stdout(io.StringIO()):
        outcome = run_plan(cal, listed, [], plan, _no_progress, print)
    stats = collect(cal.interp, cal.weights, listed, cal.load, bins=2048, histogram=True,
                    moments=True, progress=_no_progress, warn=lambda m: None)  # fmt: skip
    candidates = sorted({c["x"] for c in method_thresholds(stats, None).values()})
    assert len(candidates) > 1

    def hand_cos(t):
        cos = [
            np.dot(fake_quant(s, t).ravel(), s.ravel())
            / np.linalg.norm(fake_quant(s, t))
            / np.linalg.norm(s)
            for s in samples
        ]
        return float(np.mean(cos))  # fmt: skip

    best = max(candidates, key=hand_cos)
    assert candidates[0] < 0.5 and 2.5 < best < 3.0  # kl clips the outlier; mse wins
    assert outcome.entries["x"].threshold == pytest.approx(best, rel=1e-6)
    assert outcome.after > outcome.before


def test_bias_correction_gives_a_layer_without_bias_one(tmp_path):
    w = np.array([[1.27, 0.004, 0.004, 0.004]], np.float32).reshape(1, 4, 1, 1)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    path = onnx_model(tmp_path / "nobias.onnx", nodes,
                      [helper.make_tensor_value_info("x", F, [1, 4, 2, 2])],
                      [helper.make_tensor_value_info("y", F, [1, 1, 2, 2])],
                      [init("w", w)])  # fmt: skip
    module, store = load_module(to_top(path))
    samples = [np.ones((1, 4, 2, 2), np.float32)]
    done = correct_biases(TopInterpreter(module, native=False), store, samples,
                          lambda s: {"x": s}, _no_progress)  # fmt: skip
    # 3 x 0.004 x 1, a difference of sums near 1.27: float32 rounding of those is the bound
    np.testing.assert_allclose(done[0].layer.bias, [0.012], rtol=0, atol=1e-6)
    module.verify()
    y = TopInterpreter(module, native=False).run(store, {"x": samples[0]})["y"]
    np.testing.assert_allclose(y, 1.27 + 0.012 + 0.012, rtol=1e-5)  # float W plus the bias
