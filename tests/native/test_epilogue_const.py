"""The float epilogue of a per-tensor INT8 batched matmul (ppocr_rec's
attention scores q·kᵀ before their Softmax) multiplies by its one scale as
a constant (`backend_api_constbinary_global`, passes/native/epilogue.py):
bit for bit against tpuc's TPU interpreter in the vendor runtime, and
cheaper than the broadcast [1, M, 1, 1] coefficient it replaces ([8, 40,
15] x [8, 15, 40] then Softmax, whole-net vendor cycles measured
2026-11-27: 18,286 -> 16,047)."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node


def scores_net(tmp_path):
    rng = np.random.default_rng(7)
    feeds = {
        "a": rng.standard_normal((1, 8, 40, 15)).astype("f4"),
        "b": rng.standard_normal((1, 8, 15, 40)).astype("f4"),
    }
    nodes = [node("MatMul", ["a", "b"], ["s"]), node("Softmax", ["s"], ["y"], axis=-1)]
    return native_run_and_cycles(tmp_path, nodes, feeds, ["y"], "INT8", all_global=True)


def exact(run) -> None:
    chip = np.asarray(run.got["y"])
    tpuc = np.asarray(run.expected["y"]).reshape(chip.shape)
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"


def test_const_scale_is_exact_and_cheaper(tmp_path, monkeypatch):
    import tpuc.passes.native.epilogue as ep

    (tmp_path / "const").mkdir()
    run, cycles = scores_net(tmp_path / "const")
    exact(run)
    monkeypatch.setattr(ep, "uniform_scale", lambda scales: None)  # the broadcast coefficient
    (tmp_path / "bc").mkdir()
    plain, bc_cycles = scores_net(tmp_path / "bc")
    exact(plain)
    assert cycles < bc_cycles, (cycles, bc_cycles)


@pytest.mark.parametrize("scales, expected", [([0.5, 0.5, 0.5], 0.5), ([0.5, 0.25], None)])
def test_uniform_scale(scales, expected):
    from tpuc.passes.native.epilogue import uniform_scale

    assert uniform_scale(np.array(scales, np.float32)) == expected
