"""The growth's check runs the INT8 and the float interpreter side by side
(tpuc/workflow/calibration/lockstep.py): its memory bound on a long chain
(a count of the tensors held and tracemalloc's peak, against the two
dump_all runs it replaces), its pairs against those runs bit for bit, and
its measure against the dump_all formula it replaced (the same floats, so
the same tables)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tpuc.base.cali_table import CaliEntry, CaliTable, format_table
from tpuc.frontends.onnx import convert_onnx
from tpuc.interp.top_interpreter import TopInterpreter
from tpuc.interp.tpu_interpreter import TpuInterpreter
from tpuc.ir.weights import WeightStore, attach_weights, weights_of
from tpuc.kernels.executor import Executor
from tpuc.target.chips import get_chip
from tpuc.workflow.calibration.float_growth import (
    FloatGrowth,
    _cosine,
    _sums,
    added_error,
    streamed_sums,
)
from tpuc.workflow.calibration.lockstep import Lockstep
from tpuc.workflow.deploy import lower

RNG = np.random.default_rng(11)
SHAPE = (1, 8, 96, 96)  # 288 KiB a tensor in float32
LAYERS = 24  # 1x1 Conv + Relu each: 48 tensors a run


def long_chain():
    """x -> (Conv 1x1 'c<i>' -> Relu 'r<i>') x LAYERS: every tensor dies at
    the next op, so a run needs two at a time and a dump_all all of them."""
    nodes, inits, prev = [], [], "x"
    for i in range(LAYERS):
        w = RNG.standard_normal((8, 8, 1, 1)) * 0.5
        inits += [numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(np.zeros(8, np.float32), f"b{i}")]  # fmt: skip
        nodes += [helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]  # fmt: skip
        prev = f"r{i}"
    graph = helper.make_graph(
        nodes, "long", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits,
    )  # fmt: skip
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return convert_onnx("long.onnx", "long", model=proto)[:2]


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """The chain, a sample, its float interpreter and a max table."""
    module, store = long_chain()
    x = {"x": RNG.standard_normal(SHAPE).astype(np.float32)}
    interp = TopInterpreter(module, native=False)
    floats = interp.run(store, x, dump_all=True)
    entries = {n: CaliEntry(float(np.abs(a).max()), -1.0, 1.0) for n, a in floats.items()}
    table = tmp_path_factory.mktemp("chain") / "cali_table"
    table.write_text(format_table(CaliTable(entries), mlir="m.mlir", methods=["max"],
                                  histogram_bins=2048, samples=1, tune_num=0))  # fmt: skip
    return module, store, x, interp, table


def lowered_interp(module, store, table, executor: Executor | None = None):
    lowered = module.clone()
    attach_weights(lowered, WeightStore(store))
    lower(lowered, "bm1684x", "INT8", cali_table=table)
    return TpuInterpreter(lowered, executor=executor), weights_of(lowered)


def test_pairs_equal_the_dump_all_runs_holding_two_tensors(chain):
    """Every tensor of both runs is paired once, bit for bit what each
    interpreter's dump_all gives, and at most two wait at any time."""
    module, store, x, interp, table = chain
    tpu, weights = lowered_interp(module, store, table, interp.executor.sibling())
    names = [s.names[0] for s in tpu.steps if s.names[0] in {n for t in interp.steps
                                                              for n in t.names}]  # fmt: skip
    runs = Lockstep(tpu, interp, names)
    pairs = {name: (a.copy(), b.copy()) for name, a, b in runs.pairs(weights, store, x)}
    quantized, reference = tpu.run(weights, x, dump_all=True), interp.run(store, x, dump_all=True)
    assert set(pairs) == runs.wanted and len(pairs) == 2 * LAYERS + 1
    for name, (a, b) in pairs.items():
        assert np.array_equal(a, quantized[name]) and np.array_equal(b, reference[name]), name
    assert runs.most_held <= 2


def test_a_sample_holds_a_few_tensors_whatever_the_length(chain, tmp_path):
    """tracemalloc's peak over one sample of the check (both runs and the
    sums of every tensor) stays within a few tensors of the chain, whatever
    its length (10.2 at 24 layers, 10.3 at 60): each run's live pair, the
    INT8 kernels' int64 accumulators and requant temporaries, the sums'
    real values. The two dump_all runs it replaced held all 2 x 49 of them."""
    module, store, x, interp, table = chain
    growth = FloatGrowth(module, store, table, get_chip("bm1684x"), [x], interp, tmp_path)
    tpu, weights = growth._int8_run({})
    runs = Lockstep(tpu, interp, growth.measured)
    names = sorted(runs.wanted)
    assert len(names) == 2 * LAYERS + 1
    streamed_sums(runs, (weights, store), x, [names[-1]], names)  # plans, recycled buffers
    tensor = np.zeros(SHAPE, np.float32).nbytes
    tracemalloc.start()
    try:
        sums, error, _ = streamed_sums(runs, (weights, store), x, [names[-1]], names)
        _, streamed = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        kept = (tpu.run(weights, x, dump_all=True), interp.run(store, x, dump_all=True))
        _, dumped = tracemalloc.get_traced_memory()
        del kept
    finally:
        tracemalloc.stop()
    assert set(sums) == set(names) and error is None
    assert dumped > 2 * LAYERS * tensor
    assert streamed < 12 * tensor, f"{streamed / tensor:.1f} tensors"


def dump_all_measure(growth: FloatGrowth, target: float):
    """The check as it was: both runs dumped whole, then summed (the
    formula the streamed check must reproduce to the last bit)."""
    tpu, weights = lowered_interp(growth.module, growth.store, growth.cali_table)
    pooled, summed, below = {}, {}, 0
    for x in growth.samples:
        reference = growth.float_interp.run(growth.store, x, dump_all=True)
        quantized = tpu.run(weights, x, dump_all=True)
        judged = [j if j in quantized and j in reference else o
                  for o, j in growth.outputs.items()]  # fmt: skip
        sums = {n: _sums(tpu, quantized, reference, n) for n in judged}
        for name, three in sums.items():
            pooled[name] = pooled.get(name, 0.0) + three
        if min(_cosine(*three) for three in sums.values()) < target:
            names = [n for n in reference if n in quantized and n in growth.measured]
            cosines = {n: _cosine(*_sums(tpu, quantized, reference, n)) for n in names}
            for layer, loss in added_error(cosines, growth.inputs_of).items():
                summed[layer] = summed.get(layer, 0.0) + loss
            below += 1
    worst = min(_cosine(*three) for three in pooled.values())
    return worst, {k: v / below for k, v in summed.items()}


def test_streamed_measure_is_the_dump_all_formula_bit_for_bit(chain, tmp_path):
    module, store, x, interp, table = chain
    samples = [x, {"x": RNG.standard_normal(SHAPE).astype(np.float32)}]
    growth = FloatGrowth(module, store, table, get_chip("bm1684x"), samples, interp, tmp_path)
    score, added = growth.measure({}, target=1.0)
    cos = score.cos
    want_cos, want_added = dump_all_measure(growth, 1.0)
    assert cos == want_cos and cos < 1.0
    assert added == want_added and len(added) == 2 * LAYERS
