"""A lossy network output takes its tail into float (tpuc/workflow/auto_mix.py):
the light ops computing it from the last Conv, not the Convs, and only
within the FLOPs budget. Expected layer sets are written by hand from the
graph below."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from tpuc.base.cali_table import CaliEntry, CaliTable, format_table
from tpuc.frontends.onnx import convert_onnx
from tpuc.ir.flops import module_flops
from tpuc.workflow import auto_mix
from tpuc.workflow.auto_mix import auto_float_layers, output_tail

RNG = np.random.default_rng(7)


def head_model():
    """x[1,8,4,4] -> Conv3x3 'feat'[1,4,4,4] -> Mul(stride) 'boxes';
    x -> Conv1x1 'logits'[1,2,4,4] -> Sigmoid 'scores';
    Concat(boxes, scores) 'out' — YOLOv8's decoded head in miniature."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["feat"], pads=[1, 1, 1, 1]),
        helper.make_node("Mul", ["feat", "stride"], ["boxes"]),
        helper.make_node("Conv", ["x", "w2", "b2"], ["logits"]),
        helper.make_node("Sigmoid", ["logits"], ["scores"]),
        helper.make_node("Concat", ["boxes", "scores"], ["out"], axis=1),
    ]
    arrays = {
        "w1": RNG.standard_normal((4, 8, 3, 3)), "b1": np.zeros(4),
        "w2": RNG.standard_normal((2, 8, 1, 1)), "b2": np.zeros(2),
        "stride": np.array(8.0),
    }  # fmt: skip
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in arrays.items()]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])]
    outs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "head", inputs, outs, inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    module, _ = convert_onnx("head.onnx", "head", model=proto)
    return module


def lossy_table(tmp_path, lossy: dict[str, float]):
    names = ("x", "feat", "boxes", "logits", "scores", "out")
    table = CaliTable({n: CaliEntry(4.0, -4.0, 4.0) for n in names}, lossy=lossy)
    path = tmp_path / "head_cali_table"
    path.write_text(format_table(table, mlir="head.mlir", methods=["kl"], histogram_bins=2048,
                                 samples=1, tune_num=0))  # fmt: skip
    return path


def test_tail_stops_at_the_convs():
    assert sorted(output_tail(head_model(), "out")) == ["boxes", "out", "scores"]


def test_lossy_output_keeps_its_tail_in_f16(tmp_path):
    module = head_model()
    layers = auto_float_layers(module, lossy_table(tmp_path, {"out": 1.5}), "bm1684x")
    assert sorted(x.name for x in layers) == ["boxes", "out", "scores"]
    assert {x.mode for x in layers} == {"F16"} and {x.sqnr_db for x in layers} == {1.5}


def test_a_lossy_inner_tensor_takes_no_tail(tmp_path):
    """'feat' is not an output: its producer and reader only (holders)."""
    layers = auto_float_layers(head_model(), lossy_table(tmp_path, {"feat": 3.0}), "bm1684x")
    assert sorted(x.name for x in layers) == ["boxes", "feat"]


def test_tail_stays_within_its_flops_share(monkeypatch):
    """Concat counts 0, Mul 64 and Sigmoid 32 FLOPs (one per element): a
    budget of 70 takes the Concat and the first op reached, then stops."""
    module = head_model()
    monkeypatch.setattr(auto_mix, "TAIL_SHARE", 70 / module_flops(module))
    assert output_tail(module, "out") == ["out", "boxes"]
