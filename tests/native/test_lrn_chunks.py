"""An LRN over more channels than lanes runs as calls of at most 64 channels
(passes/native/norm.py `lrn_in_chunks`): the vendor kernel's cycles grow
with the square of its planes per lane. Each chunk reads its window's halo
channels, the outputs it overwrites under its lower halo are saved and put
back. Checked against tpuc's TPU interpreter in the vendor runtime (F32 and
BF16 bit for bit, INT8 bit for bit after the casts), and cheaper than one
call."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node

from tpuc.passes.native import norm


def test_chunks_cover_the_channels_with_their_windows():
    chunks = norm.lrn_chunks(192, 5)
    assert chunks == [(0, 64, 0, 62), (60, 124, 62, 122), (120, 184, 122, 182),
                      (180, 192, 182, 192)]  # fmt: skip
    for first, end, a, b in chunks:
        assert end - first <= norm.LANES
        assert first == max(a - 2, 0) and (b == 192 or end == b + 2)
    assert norm.lrn_chunks(64, 5) == [(0, 64, 0, 64)]
    assert norm.lrn_chunks(100, 4) == [(0, 64, 0, 62), (61, 100, 62, 100)]


def _run(tmp, mode: str, shape):
    tmp.mkdir(exist_ok=True)
    rng = np.random.default_rng(7)
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    nodes = [
        node("LRN", ["x"], ["l"], size=5, alpha=1e-2, beta=0.75, bias=1.0),
        node("Relu", ["l"], ["y"]),  # INT8: the LRN in f32 between casts
    ]
    return native_run_and_cycles(tmp, nodes, {"x": x}, ["y"], mode, opset=17)


@pytest.mark.parametrize("mode", ["F32", "BF16", "INT8"])
@pytest.mark.parametrize("shape", [[1, 150, 16, 14], [2, 70, 15, 15]])
def test_chunked_lrn_is_the_interpreters(tmp_path, vendor, mode, shape):
    run, _ = _run(tmp_path, mode, shape)
    run.assert_bit_equal()


def test_chunks_are_cheaper_than_one_call(tmp_path, vendor, monkeypatch):
    _, chunked = _run(tmp_path / "chunked", "F32", [1, 150, 16, 14])
    monkeypatch.setattr(norm, "LANES", 1024)
    _, whole = _run(tmp_path / "whole", "F32", [1, 150, 16, 14])
    assert chunked < 0.8 * whole, (chunked, whole)
