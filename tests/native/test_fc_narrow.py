"""An INT8 fc with a float result (tpuc's float epilogue: int32 product,
cast, per-column scale) and only a few columns loads its weight as [N, K]
with `R_transpose` (passes/native/matmul.py `narrow_right`): N runs of K
bytes instead of K runs of N. Bit for bit against tpuc's TPU interpreter in
the vendor runtime, and cheaper than the [K, N] load (ppocr_cls's
classifier: 200 x 2 before a softmax)."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node, tensor

from tpuc.passes.native import matmul


def _run(tmp, m: int, k: int, n: int):
    tmp.mkdir(exist_ok=True)
    rng = np.random.default_rng(k + n)
    x = rng.uniform(0, 2, (m, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32) * 0.1
    b = rng.standard_normal(n).astype(np.float32) * 0.1
    nodes = [node("Gemm", ["x", "w", "b"], ["g"]), node("Softmax", ["g"], ["y"], axis=1)]
    inits = [tensor("w", w), tensor("b", b)]
    return native_run_and_cycles(tmp, nodes, {"x": x}, ["y"], "INT8", inits=inits)


@pytest.mark.parametrize("shape", [(1, 200, 2), (1, 128, 3), (1, 1000, 4), (1, 40, 2), (3, 40, 2)])
def test_narrow_fc_is_the_interpreters(tmp_path, vendor, shape):
    """(3, 40, 2): more rows keep the [K, N] load (transposed, 4 values differed)."""
    run, _ = _run(tmp_path, *shape)
    assert "tpu.MatMul" in run.kinds
    run.assert_bit_equal()


def test_transposed_weight_is_cheaper(tmp_path, vendor, monkeypatch):
    _, narrow = _run(tmp_path / "narrow", 1, 200, 2)
    monkeypatch.setattr(matmul, "NARROW_N", 0)
    _, wide = _run(tmp_path / "wide", 1, 200, 2)
    assert narrow < 0.6 * wide, (narrow, wide)
