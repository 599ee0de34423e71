"""The output-cosine growth of the automatic mixed precision
(tpuc/workflow/calibration/float_growth.py): the rule against hand-computed
cases, the table block it writes, and one growth on a real lowering whose
outputs are checked against onnxruntime's float run."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpuc.base.cali_table import CaliEntry, CaliTable, format_table, parse_table
from tpuc.base.compare import cosine_similarity
from tpuc.frontends.onnx import convert_onnx
from tpuc.interp.top_interpreter import TopInterpreter
from tpuc.target.chips import get_chip
from tpuc.workflow.auto_mix import auto_float_layers, int8_share, report
from tpuc.workflow.calibration.float_growth import (
    FloatGrowth,
    Score,
    added_error,
    holders,
    next_batch,
)
from tpuc.workflow.calibration.positions import Agreement


def test_added_error_subtracts_the_worst_input():
    """c reads a (1 − cos 0.02) and b (0.05): it adds 0.10 − 0.05; a reads
    the network input, not measured here, so it adds all of its 0.02."""
    cosines = {"a": 0.98, "b": 0.95, "c": 0.90}
    inputs_of = {"a": ["x"], "b": ["a"], "c": ["a", "b"]}
    added = added_error(cosines, inputs_of)
    assert added == pytest.approx({"a": 0.02, "b": 0.03, "c": 0.05})


def test_added_error_skips_unmeasured_layers():
    assert added_error({"a": 0.9}, {"a": [], "b": ["a"]}) == pytest.approx({"a": 0.1})


def test_next_batch_doubles_and_takes_only_positive():
    added = {"a": 0.3, "b": 0.1, "c": 0.2, "d": -0.01, "e": 0.0, "f": 0.2}
    assert next_batch(added, 0, min_batch=2) == ["a", "c"]  # c before f: tie by name
    assert next_batch(added, 3, min_batch=2) == ["a", "c", "f"]
    assert next_batch(added, 9, min_batch=2) == ["a", "c", "f", "b"]  # d, e add nothing
    assert next_batch({"d": -0.1}, 4) == []


def test_table_block_round_trips():
    table = CaliTable({"a": CaliEntry(1.0, -1.0, 1.0)}, lossy={"a": 3.5},
                      float_layers={"conv": 0.0125, "add": 0.003})  # fmt: skip
    text = format_table(table, mlir="m.mlir", methods=["kl"], histogram_bins=2048, samples=1,
                        tune_num=0)  # fmt: skip
    assert "# int8_float conv 0.012500" in text
    again = parse_table(text, "t")
    assert again.float_layers == {"conv": 0.0125, "add": 0.003}
    assert again.lossy == {"a": 3.5} and list(again.entries) == ["a"]


RNG = np.random.default_rng(3)


def chain_model():
    """x -> Conv 'c1' -> Relu 'r1' -> Conv 'c2' -> Relu 'r2' -> Conv 'c3':
    three layers that each round their output."""
    nodes, arrays, prev = [], {}, "x"
    for i, name in enumerate(("c1", "c2", "c3")):
        nodes.append(helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [name], pads=[1] * 4))
        arrays[f"w{i}"] = RNG.standard_normal((8, 8, 3, 3)) * 0.3
        arrays[f"b{i}"] = RNG.standard_normal(8) * 0.1
        prev = name
        if name != "c3":
            nodes.append(helper.make_node("Relu", [name], [f"r{i + 1}"]))
            prev = f"r{i + 1}"
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in arrays.items()]
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
        [helper.make_tensor_value_info("c3", TensorProto.FLOAT, None)], inits,
    )  # fmt: skip
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    module, store = convert_onnx("chain.onnx", "chain", model=proto)
    return proto, module, store


def test_growth_reaches_its_target_on_a_real_lowering(tmp_path):
    """A target above what all-INT8 gives: the growth moves layers to F16
    until the INT8 run's output, compared with onnxruntime's float run,
    reaches it; the table's block then gives model_deploy those layers."""
    proto, module, store = chain_model()
    x = {"x": RNG.standard_normal((1, 8, 6, 6)).astype(np.float32)}
    interp = TopInterpreter(module, native=False)
    floats = interp.run(store, x, dump_all=True)
    names = ("x", "c1", "r1", "c2", "r2", "c3")
    entries = {n: CaliEntry(float(np.abs(floats[n]).max()), -1.0, 1.0) for n in names}
    table = tmp_path / "cali_table"
    text = format_table(CaliTable(entries), mlir="m.mlir", methods=["max"], histogram_bins=2048,
                        samples=1, tune_num=0)  # fmt: skip
    table.write_text(text)
    chip = get_chip("bm1684x")
    growth = FloatGrowth(module, store, table, chip, [x], interp, tmp_path)
    all_int8 = growth.measure({})[0].cos
    reference = ort.InferenceSession(proto.SerializeToString()).run(None, x)[0]
    assert all_int8 < 0.99999
    grown = growth.grow({}, 0.99999, "F16")
    assert grown.reached and grown.after >= 0.99999 > grown.before == pytest.approx(all_int8)
    # One round: MIN_BATCH (4) layers and their readers are all 5; the
    # bisection then tries shorter heads of that batch, and keeps what reaches.
    assert [n for n, _ in grown.history][:2] == [0, 5]
    assert all(cos < 0.99999 for n, cos in grown.history[2:-1] if n < len(grown.layers))
    assert grown.history[-1] == (len(grown.layers), grown.after)
    # The measured cosine is the deployed module's against float: check it
    # against onnxruntime rather than the TOP interpreter it used.
    from tpuc.interp.tpu_interpreter import TpuInterpreter
    from tpuc.ir.qtable import format_qtable
    from tpuc.ir.weights import WeightStore, attach_weights, weights_of
    from tpuc.workflow.deploy import lower

    lowered = module.clone()
    attach_weights(lowered, WeightStore(store))
    qtable = tmp_path / "q"
    qtable.write_text(format_qtable(dict.fromkeys(grown.layers, "F16")))
    lower(lowered, "bm1684x", "INT8", cali_table=table, qtable=qtable)
    tpu = TpuInterpreter(lowered)
    out = tpu.real_values(tpu.run(weights_of(lowered), x))["c3"]
    assert cosine_similarity(out, reference) == pytest.approx(grown.after, abs=1e-5)
    # model_deploy's side: the block's layers, reported with what stays INT8.
    table.write_text(format_table(CaliTable(entries, float_layers=grown.layers), mlir="m.mlir",
                                  methods=["max"], histogram_bins=2048, samples=1,
                                  tune_num=0))  # fmt: skip
    layers = auto_float_layers(module, table, chip)
    assert [x.name for x in layers] == list(grown.layers)
    kept, total, _ = int8_share(module, chip, grown.layers)
    assert total == 5 and kept == total - len(grown.layers)  # 3 Convs, 2 Relus
    assert "adds" in report(layers) and f"kept {len(layers)} layer" in report(layers)


def test_a_chosen_layer_takes_its_readers():
    """c1's output is read by r1 only; r2's by c3; c3 is the output."""
    _, module, _ = chain_model()
    assert holders(module, "c1") == ["c1", "r1"]
    assert holders(module, "r2") == ["r2", "c3"]
    assert holders(module, "c3") == ["c3"]


def test_int8_share_weights_by_flops():
    """c1, c2, c3: 8·8·9 MACs per output element, 2 FLOPs each, over 8·6·6
    elements; the Relus one FLOP per element."""
    _, module, _ = chain_model()
    conv, relu = 2 * 8 * 8 * 9 * 288, 288
    kept, total, share = int8_share(module, "bm1684x", ["c1"])
    assert (kept, total) == (4, 5)
    assert share == pytest.approx((2 * conv + 2 * relu) / (3 * conv + 2 * relu), rel=0.01)


class Scripted(FloatGrowth):
    """The growth's rule on a hand-made network: ten independent layers
    l0..l9, each adding `LOSS[i]` to the output's 1 − cosine."""

    LOSS = [0.004, 0.003, 0.002, 0.001, 0.0008, 0.0006, 0.0004, 0.0003, 0.0002, 0.0001]

    def __init__(self):
        self.inputs_of = {f"l{i}": [] for i in range(10)}
        self.holders = {name: [name] for name in self.inputs_of}
        self.per_position = []
        self.measures = 0

    def measure(self, qtable, target=1.0, losses=True):
        self.measures += 1
        left = {n: loss for n, loss in zip(self.inputs_of, self.LOSS, strict=True)
                if n not in qtable}  # fmt: skip
        return Score(1.0 - sum(left.values()), self.agreement(qtable)), (left if losses else {})

    def agreement(self, qtable) -> Agreement:
        return Agreement()  # no per-position output


def test_growth_keeps_the_shortest_head_of_its_last_batch():
    """Output 1 − cos 0.0124 with nothing in float; target 0.995 (loss ≤ 0.005).
    Doubling: 4 layers (l0..l3: loss 0.0024, reached). Bisection of that
    batch: l0, l1 leave 0.0054 (short), l0..l2 leave 0.0034 (reached): 3 kept."""
    growth = Scripted().grow({}, 0.995, "F16")
    assert growth.reached and set(growth.layers) == {"l0", "l1", "l2"}
    assert growth.history[-1] == (3, pytest.approx(1 - 0.0034))
    assert growth.history[:2] == [(0, pytest.approx(1 - 0.0124)), (4, pytest.approx(1 - 0.0024))]


def test_growth_keeps_what_the_start_already_floats():
    """A qtable's layers (the lossy tensors') stay; the bisection cuts only
    the grown batch: with l0 given (loss left 0.0084), the batch l1..l4
    reaches, l1 alone leaves 0.0054, l1 and l2 leave 0.0034."""
    growth = Scripted().grow({"l0": "F16"}, 0.995, "F16")
    assert set(growth.layers) == {"l1", "l2"}
    assert growth.history[-1] == (3, pytest.approx(1 - 0.0034))


class Positions(Scripted):
    """The same layers under a per-position output: its cosine reaches 0.99
    with all of them in INT8, but a position reads another class until l0
    and l1 are both in float."""

    def agreement(self, qtable) -> Agreement:
        return Agreement(160 if {"l0", "l1"} <= set(qtable) else 159, 160)


def test_growth_goes_on_until_every_position_agrees():
    """Cosine 0.9876 ≥ 0.98 at the start, yet one position of 160 differs:
    the growth floats the batch l0..l3 (all 160 agree), and its bisection
    keeps l0, l1 (l0 alone leaves 159)."""
    growth = Positions().grow({}, 0.98, "F16")
    assert growth.reached and set(growth.layers) == {"l0", "l1"}
    assert growth.scores[0].positions == Agreement(159, 160) and growth.scores[0].cos > 0.98
    assert growth.scores[-1].positions.complete
    assert [n for n, _ in growth.history] == [0, 4, 2, 1, 2]


class WorseLater(Scripted):
    """A position agrees only while l0 and l1 are in float and fewer than 8
    layers are: more float layers can read worse, and no set reaches."""

    def agreement(self, qtable) -> Agreement:
        return Agreement(159 if {"l0", "l1"} <= set(qtable) and len(qtable) < 8 else 158, 160)


def test_growth_short_of_its_target_keeps_the_round_that_measured_best():
    """Rounds of 0, 4, 8 and 10 layers read 158, 159, 158, 158 positions of
    160: the 4 layers of the second round are kept, with their cosine."""
    growth = WorseLater().grow({}, 0.98, "F16")
    assert not growth.reached
    assert set(growth.layers) == {"l0", "l1", "l2", "l3"}
    assert [n for n, _ in growth.history] == [0, 4, 8, 10, 4]
    assert growth.history[-1] == (4, pytest.approx(1 - 0.0024))
    assert growth.scores[-1].positions == Agreement(159, 160)


class FloatFlipsIt(Positions):
    """The position that differs is one F16 itself reads otherwise."""

    def __init__(self):
        super().__init__()
        self.per_position = ["out"]

    def float_ties(self, mode):
        return [{"out": np.array([True])}]

    def agreement(self, qtable) -> Agreement:
        return Agreement(159, 159) if self.ties else super().agreement(qtable)


def test_a_position_the_float_mode_flips_does_not_grow():
    growth = FloatFlipsIt().grow({}, 0.98, "F16")
    assert growth.reached and not growth.layers and growth.scores[0].positions.complete


def softmax_model(tail: str):
    """x → MatMul 'logits' → Softmax 'prob' (→ Reshape 'out' when `tail`)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["prob"], axis=-1),
    ]
    inits = [numpy_helper.from_array(RNG.standard_normal((8, 100)).astype(np.float32), "w")]
    out = "prob"
    if tail:
        nodes.append(helper.make_node("Reshape", ["prob", "shape"], ["out"]))
        inits.append(numpy_helper.from_array(np.array([100, 1], np.int64), "shape"))
        out = "out"
    graph = helper.make_graph(
        nodes, "cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits,
    )  # fmt: skip
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return convert_onnx("cls.onnx", "cls", model=proto)[0]


@pytest.mark.parametrize("tail", ["", "reshape"])
def test_a_trailing_softmax_is_judged_by_its_logits(tail):
    from tpuc.ir.core import output_names
    from tpuc.workflow.calibration.float_growth import judged_tensors

    module = softmax_model(tail)
    (out,) = output_names(module)
    assert judged_tensors(module) == {out: "logits"}
    assert judged_tensors(chain_model()[1]) == {"c3": "c3"}


def test_output_cosine_is_pooled_over_the_samples(tmp_path):
    """One sample at full scale, one all but zero (its INT8 output rounds to
    few steps, its own cosine is poor): the growth's figure is the cosine of
    the two outputs taken together, against onnxruntime's float outputs."""
    from tpuc.interp.tpu_interpreter import TpuInterpreter
    from tpuc.ir.weights import WeightStore, attach_weights, weights_of
    from tpuc.workflow.deploy import lower

    proto, module, store = chain_model()
    big = RNG.standard_normal((1, 8, 6, 6)).astype(np.float32)
    samples = [{"x": big}, {"x": big * 1e-3}]
    interp = TopInterpreter(module, native=False)
    floats = interp.run(store, samples[0], dump_all=True)
    names = ("x", "c1", "r1", "c2", "r2", "c3")
    entries = {n: CaliEntry(float(np.abs(floats[n]).max()), -1.0, 1.0) for n in names}
    table = tmp_path / "cali_table"
    table.write_text(format_table(CaliTable(entries), mlir="m.mlir", methods=["max"],
                                  histogram_bins=2048, samples=1, tune_num=0))  # fmt: skip
    growth = FloatGrowth(module, store, table, get_chip("bm1684x"), samples, interp, tmp_path)
    pooled = growth.measure({})[0].cos
    lowered = module.clone()
    attach_weights(lowered, WeightStore(store))
    lower(lowered, "bm1684x", "INT8", cali_table=table)
    tpu = TpuInterpreter(lowered)
    session = ort.InferenceSession(proto.SerializeToString())
    got = [tpu.real_values(tpu.run(weights_of(lowered), x))["c3"] for x in samples]
    want = [session.run(None, x)[0] for x in samples]
    each = [cosine_similarity(g, w) for g, w in zip(got, want, strict=True)]
    assert min(each) < pooled - 0.01  # the near-zero sample alone is worse
    together = cosine_similarity(np.concatenate([g.ravel() for g in got]),
                                 np.concatenate([w.ravel() for w in want]))  # fmt: skip
    assert pooled == pytest.approx(together, abs=1e-5)
