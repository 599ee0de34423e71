"""Outputs judged position by position (tpuc/workflow/calibration/positions.py):
the agreement against hand-computed cases, which outputs it applies to, and
the growth's measure of it on a real lowering against onnxruntime's float run."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from tpuc.base.cali_table import CaliEntry, CaliTable, format_table
from tpuc.frontends.onnx import convert_onnx
from tpuc.interp.top_interpreter import TopInterpreter
from tpuc.target.chips import get_chip
from tpuc.workflow.calibration.float_growth import FloatGrowth
from tpuc.workflow.calibration.positions import (
    Agreement,
    argmax_agreement,
    disagreeing,
    per_position_outputs,
)


def test_agreement_counts_positions_whose_best_class_is_the_same():
    """Three positions of three classes: the first and last agree (classes
    1 and 2), the middle reads class 0 where float reads class 1."""
    quantized = np.array([[[0.1, 0.7, 0.2], [0.5, 0.4, 0.1], [0.3, 0.3, 0.4]]])
    reference = np.array([[[0.2, 0.6, 0.2], [0.4, 0.5, 0.1], [0.3, 0.2, 0.5]]])
    found = argmax_agreement(quantized, reference)
    assert found == Agreement(2, 3) and not found.complete
    assert abs(found.share - 2 / 3) < 1e-12 and str(found) == "2/3"


def test_a_tie_reads_the_first_class_as_a_greedy_decoder_does():
    """INT8 rounds classes 0 and 1 to the same value: the decoder reads 0,
    float reads 1, so the position disagrees."""
    assert argmax_agreement(np.array([[0.5, 0.5, 0.0]]), np.array([[0.4, 0.6, 0.0]])) == (
        Agreement(0, 1)
    )


def test_near_ties_the_float_mode_flips_are_not_counted():
    """The middle position is a tie (F16 itself reads another class there):
    of the two positions counted, both agree; without the mask 2 of 3."""
    quantized = np.array([[[0.1, 0.7, 0.2], [0.5, 0.4, 0.1], [0.3, 0.3, 0.4]]])
    reference = np.array([[[0.2, 0.6, 0.2], [0.4, 0.5, 0.1], [0.3, 0.2, 0.5]]])
    assert disagreeing(quantized, reference).tolist() == [[False, True, False]]
    ties = np.array([[False, True, False]])
    assert argmax_agreement(quantized, reference, ties) == Agreement(2, 2)
    ties = np.array([[True, False, False]])
    assert argmax_agreement(quantized, reference, ties) == Agreement(1, 2)


def test_agreements_add_up_over_samples():
    total = Agreement(38, 40) + Agreement(40, 40)
    assert total == Agreement(78, 80) and Agreement().complete and Agreement().share == 1.0


def test_agreement_rejects_different_shapes():
    import pytest

    with pytest.raises(ValueError, match="shapes differ"):
        argmax_agreement(np.zeros((1, 4, 3)), np.zeros((1, 4, 5)))


RNG = np.random.default_rng(5)


def classifier(shape: list[int], axis: int, positions: int = 6, classes: int = 30):
    """x [1, positions, 16] → MatMul 'logits' [1, positions, classes] →
    Reshape to `shape` → Softmax 'prob' along `axis`."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["logits"]),
        helper.make_node("Reshape", ["logits", "shape"], ["r"]),
        helper.make_node("Softmax", ["r"], ["prob"], axis=axis),
    ]
    inits = [
        numpy_helper.from_array(RNG.standard_normal((16, classes)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array(shape, np.int64), "shape"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, positions, 16])
    out = helper.make_tensor_value_info("prob", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "ctc", [x], [out], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return proto, *convert_onnx("ctc.onnx", "ctc", model=proto)


def test_per_position_outputs_are_softmaxes_over_the_last_axis_of_several_positions():
    assert per_position_outputs(classifier([1, 6, 30], -1)[1]) == ["prob"]
    assert per_position_outputs(classifier([1, 6, 30], 2)[1]) == ["prob"]
    assert per_position_outputs(classifier([1, 6, 30], 1)[1]) == []  # not over the classes
    assert per_position_outputs(classifier([1, 180], -1)[1]) == []  # one position
    assert per_position_outputs(classifier([1, 1, 180], -1)[1]) == []


def test_the_growth_measures_agreement_against_onnxruntime(tmp_path):
    """A coarse table (thresholds 16x the measured range) makes INT8 flip
    some positions: the growth's count is the argmax agreement of the
    lowered module's run against onnxruntime's float run, over 3 samples."""
    from tpuc.interp.tpu_interpreter import TpuInterpreter
    from tpuc.ir.weights import WeightStore, attach_weights, weights_of
    from tpuc.workflow.deploy import lower

    proto, module, store = classifier([1, 40, 30], -1, positions=40)
    samples = [{"x": RNG.standard_normal((1, 40, 16)).astype(np.float32)} for _ in range(3)]
    interp = TopInterpreter(module, native=False)
    floats = interp.run(store, samples[0], dump_all=True)
    entries = {n: CaliEntry(16 * float(np.abs(v).max()), -1.0, 1.0) for n, v in floats.items()}
    table = tmp_path / "cali_table"
    table.write_text(format_table(CaliTable(entries), mlir="m.mlir", methods=["max"],
                                  histogram_bins=2048, samples=1, tune_num=0))  # fmt: skip
    growth = FloatGrowth(module, store, table, get_chip("bm1684x"), samples, interp, tmp_path)
    score, _ = growth.measure({})
    lowered = module.clone()
    attach_weights(lowered, WeightStore(store))
    lower(lowered, "bm1684x", "INT8", cali_table=table)
    tpu = TpuInterpreter(lowered)
    session = ort.InferenceSession(proto.SerializeToString())
    want = Agreement()
    for x in samples:
        got = tpu.real_values(tpu.run(weights_of(lowered), x))["prob"]
        want += argmax_agreement(got, session.run(None, x)[0])
    assert score.positions == want and want.positions == 120
    assert not want.complete  # the coarse table flips at least one position


def test_run_calibration_says_how_many_positions_agree(tmp_path, capsys):
    """The user's view: run_calibration.py on a per-position classifier
    prints the positions agreeing before and after the growth (3 samples of
    40 positions), and writes its table."""
    from onnx import save
    from tools_helpers import run_main

    from tpuc.tools import model_transform
    from tpuc.tools.run_calibration import main

    proto = classifier([1, 40, 30], -1, positions=40)[0]
    save(proto, tmp_path / "ctc.onnx")
    mlir = tmp_path / "ctc.mlir"
    argv = ["--model_name", "ctc", "--model_def", str(tmp_path / "ctc.onnx"), "--mlir", str(mlir)]
    assert run_main(model_transform.main, argv, capsys)[0] == 0
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        np.savez(data / f"s{i}.npz", x=RNG.standard_normal((1, 40, 16)).astype(np.float32))
    table = tmp_path / "ctc_cali_table"
    code, out, err = run_main(main, [str(mlir), "--dataset", str(data), "-o", str(table)], capsys)
    assert code == 0, err
    (summary,) = [line for line in out.splitlines() if "auto mix: output cosine" in line]
    assert "positions agreeing " in summary and "/120 -> " in summary and table.exists()
