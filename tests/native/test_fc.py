"""MatMul with a weight right operand through the vendor's fc call
(`backend_api_fc_global`, TPU-MLIR's MatMul.cpp) against tpuc's TPU
interpreter, bit for bit in every mode:
- F16/BF16 with a bias: the product rounded to the half type plus the
  bias rounded to it (the call's MM2 path, test_half_fc.py);
- INT8 whose columns share one multiplier (weights scaled alike per
  column): the call's own requant;
- INT8 per column (tpuc's per-column weight scales): the call's own
  requant with the columns' multipliers over one right shift (`fuse_rq`,
  the multipliers a fourth operand; lowering gives matmul one shift);
and which call the rule chose."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import matches, native_vs_interp, node
from onnx import numpy_helper


def fc_model(rng, same_columns: bool, bias: bool, transposed: bool = False, binade=False):
    w = (rng.standard_normal((32, 80)) * 0.2).astype("f4")
    if same_columns:
        w = w / np.abs(w).max(axis=0, keepdims=True)
    if binade:  # column scales within one power of two: one right shift for all
        w = w / np.abs(w).max(axis=0, keepdims=True) * rng.uniform(1.0, 1.15, 80).astype("f4")
    b = (rng.standard_normal(80) * (0.01 if same_columns else 1.0)).astype("f4")
    if transposed:
        nodes = [node("Gemm", ["x", "W"], ["y"], transB=1)]
        inits = [numpy_helper.from_array(w.T.copy(), "W")]
    else:
        nodes = [node("MatMul", ["x", "W"], ["m" if bias else "y"])]
        inits = [numpy_helper.from_array(w, "W")]
    if bias and not transposed:
        nodes.append(node("Add", ["m", "B"], ["y"]))
        inits.append(numpy_helper.from_array(b, "B"))
    return nodes, inits


def functions(tmp_path, nodes, feeds, inits, mode) -> set[str]:
    """The backend functions the native rules call for the model."""
    from native_models import cali_table, save_onnx

    from tpuc.frontends.onnx.converter import convert_onnx
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import build_calls
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import finalize, run_passes, transform_passes

    path = save_onnx(tmp_path / "f.onnx", nodes, feeds, ["y"], inits, 14)
    module, weights = convert_onnx(path, "f")
    store = WeightStore(weights)
    attach_weights(module, store)
    run_passes(module, transform_passes())
    table = cali_table(tmp_path, module, store, feeds) if mode == "INT8" else None
    lower(module, "bm1684x", mode, False, table)
    finalize(module, store, "bm1684x", 2, True)
    calls = build_calls(module, NativeContext(module))
    return {c.function for op, cs in calls if op.name == "tpu.MatMul" for c in cs}


CASES = {
    "f16 bias": ("F16", False, True, False, "backend_api_fc_global"),
    "bf16 bias": ("BF16", False, True, False, "backend_api_fc_global"),
    "int8 one multiplier": ("INT8", True, True, False, "backend_api_fc_global"),
    "int8 one multiplier, transB": ("INT8", True, False, True, "backend_api_fc_global"),
    "int8 per column": ("INT8", False, True, False, "backend_api_fc_global"),
    "int8 per column, one shift": ("INT8", "binade", False, False, "backend_api_fc_global"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fc_call(tmp_path, case):
    mode, same, bias, transposed, function = CASES[case]
    rng = np.random.default_rng(5)
    nodes, inits = fc_model(rng, same is True, bias, transposed, binade=same == "binade")
    feeds = {"x": rng.standard_normal((4, 32)).astype("f4")}
    run = native_vs_interp(tmp_path, nodes, feeds, ["y"], mode, inits)
    matches(run.got, run.expected, "INT8")  # bit for bit, floats too
    (tmp_path / "calls").mkdir()
    used = functions(tmp_path / "calls", nodes, feeds, inits, mode)
    assert "backend_api_fc_global" in used and function in used
    # per column: the multipliers in the call (fuse_rq), no transposes, no requant pass
    assert used == {"backend_api_fc_global"} or mode != "INT8"


@pytest.mark.parametrize("k, bound", [(2048, 12_000), (1000, 6_000), (67, 3_000)])
def test_fc_as_conv_rows_over_lanes(tmp_path, k, bound):
    """M = 1, per-column requant, ReLU (fc_as_conv): the row goes to the
    convolution as [C, 1, K/C] over the lanes, bit for bit. Whole-net vendor
    cycles (input cast, fc, output cast), measured 2026-11-27 with the row as
    [K, 1, 1] before: K = 2048, N = 128: 48,415 (the fc alone 47,097;
    TPU-MLIR 1.30.2's smallcnn fc1 10,944) -> 10,804; K = 1000, N = 64:
    22,835 -> 5,132; K = 67 (prime: kept as [K, 1, 1]) 2,887."""
    from native_models import native_run_and_cycles

    rng = np.random.default_rng(0)
    n = 128 if k == 2048 else 64 if k == 1000 else 32
    w = (rng.standard_normal((k, n)) * 0.05).astype("f4")
    b = rng.standard_normal(n).astype("f4")
    nodes = [node("Gemm", ["a", "w", "b"], ["c"]), node("Relu", ["c"], ["y"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    feeds = {"a": rng.standard_normal((1, k)).astype("f4")}
    run, cycles = native_run_and_cycles(
        tmp_path, nodes, feeds, ["y"], "INT8", inits, all_global=True
    )
    matches(run.got, run.expected, "INT8")
    assert cycles < bound
