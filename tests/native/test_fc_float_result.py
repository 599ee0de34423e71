"""An INT8 fc whose result only a float layer reads (ppocr_rec's classifier
before its Softmax: [40, 120] x [120, 6625], per-column weight scales):
the int32 product dequantized per column on the chip, bit for bit against
tpuc's TPU interpreter, at a cost near TPU-MLIR's fc + Cast."""

from __future__ import annotations

import numpy as np
from native_models import matches, native_run_and_cycles, node
from onnx import numpy_helper


def test_fc_float_result_per_column(tmp_path):
    """Whole-net vendor cycles (input cast, fc, dequantize, softmax),
    M = 40, K = 120, N = 1000, measured 2026-11-27: the per-column scale on
    the [M, N, 1, 1] view (one 4-byte plane per column) 481,299 -> 30,235
    with the rows over the lanes and the scales along W (the int8 result
    plus a dequantizing Cast, TPU-MLIR's form: 22,426)."""
    rng = np.random.default_rng(3)
    m, k, n = 40, 120, 1000
    w = (rng.standard_normal((k, n)) * rng.uniform(0.02, 0.2, n)).astype("f4")
    b = (rng.standard_normal(n) * 0.1).astype("f4")
    nodes = [
        node("MatMul", ["x", "w"], ["p"]),
        node("Add", ["p", "b"], ["l"]),
        node("Softmax", ["l"], ["y"], axis=-1),
    ]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    feeds = {"x": rng.standard_normal((1, m, k)).astype("f4")}
    run, cycles = native_run_and_cycles(
        tmp_path, nodes, feeds, ["y"], "INT8", inits, all_global=True
    )
    matches(run.got, run.expected, "INT8")
    assert cycles < 40_000
