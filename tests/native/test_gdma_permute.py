"""Permutes as the GDMA's own moves (passes/native/gdma_permute.py): a
swap of the last two axes as the C/W transpose, a permute that keeps its
last axis through local memory. Bit for bit against tpuc's TPU interpreter
in the vendor runtime (INT8 and F16), and cheaper in vendor cycles than
`backend_api_transpose_global` on the same net (ppocr_rec's transpose_43
and attention-head permutes)."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node

from tpuc.passes.native.gdma_permute import cw_dims, strided_view

HEADS = [
    ((1, 40, 360), (1, 40, 3, 8, 15), [2, 0, 3, 1, 4]),  # transpose_44: q, k, v apart
    ((1, 8, 40, 15), (1, 8, 40, 15), [0, 2, 1, 3]),  # transpose_46: heads back together
    ((1, 464, 7, 7), (1, 2, 232, 7, 7), [0, 2, 1, 3, 4]),  # a channel shuffle, 49-byte runs
]


def permute_net(tmp_path, shape, view, perm, mode: str):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    nodes = [
        node("Mul", ["a", "k"], ["r"]),
        node("Reshape", ["r", "s"], ["v"]),
        node("Transpose", ["v"], ["t"], perm=perm),
        node("Mul", ["t", "k"], ["y"]),
    ]
    inits = [("k", np.array(0.75, np.float32)), ("s", np.array(view, np.int64))]
    return native_run_and_cycles(tmp_path, nodes, {"a": x}, ["y"], mode, inits, all_global=True)


def transpose_net(tmp_path, shape, perm, mode: str):
    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape).astype(np.float32)
    nodes = [
        node("Mul", ["a", "k"], ["r"]),
        node("Transpose", ["r"], ["t"], perm=perm),
        node("Mul", ["t", "k"], ["y"]),
    ]
    inits = [("k", np.array(0.75, np.float32))]
    return native_run_and_cycles(tmp_path, nodes, {"a": x}, ["y"], mode, inits, all_global=True)


def exact(run) -> None:
    chip = np.asarray(run.got["y"])
    tpuc = np.asarray(run.expected["y"]).reshape(chip.shape)
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"


@pytest.mark.parametrize("mode", ["INT8", "F16"])
@pytest.mark.parametrize(("shape", "view", "perm"), HEADS)
def test_head_permute_is_exact_and_cheaper(tmp_path, monkeypatch, mode, shape, view, perm):
    import tpuc.passes.native.data as data

    (tmp_path / "gdma").mkdir()
    run, cycles = permute_net(tmp_path / "gdma", shape, view, perm, mode)
    exact(run)
    monkeypatch.setattr(data, "gdma_permute", lambda op, ctx: None)  # the vendor's transpose
    (tmp_path / "tr").mkdir()
    plain, vendor_cycles = permute_net(tmp_path / "tr", shape, view, perm, mode)
    exact(plain)
    assert cycles < vendor_cycles, (cycles, vendor_cycles)


SWAPS = [((1, 120, 40), [0, 2, 1]), ((2, 1, 33, 70), [1, 0, 3, 2]), ((1, 8, 40, 15), [0, 1, 3, 2])]


@pytest.mark.parametrize("mode", ["INT8", "F16"])
@pytest.mark.parametrize(("shape", "perm"), SWAPS)
def test_cw_transpose_is_exact_and_cheaper(tmp_path, monkeypatch, mode, shape, perm):
    """Whole nets measured 2026-11-27: int8 [120, 40] 5,352 -> 2,987
    (the identity matmul) or 30.5k (the vendor's transpose); f16 23,121 -> 2,895."""
    import tpuc.passes.native.data as data

    (tmp_path / "cw").mkdir()
    run, cycles = transpose_net(tmp_path / "cw", shape, perm, mode)
    exact(run)
    monkeypatch.setattr(data, "cw_permute", lambda *args: None)  # the vendor's transpose
    (tmp_path / "tr").mkdir()
    plain, vendor_cycles = transpose_net(tmp_path / "tr", shape, perm, mode)
    exact(plain)
    assert cycles < vendor_cycles, (cycles, vendor_cycles)


def test_cw_dims():
    """Only the swap of the last two axes with H = 1 is the C/W transpose."""
    assert cw_dims([1, 1, 120, 40], [0, 1, 3, 2]) == (1, 120, 1, 40)
    assert cw_dims([1, 2, 33, 70], [0, 1, 3, 2]) == (2, 33, 1, 70)
    assert cw_dims([2, 3, 5, 7], [0, 3, 2, 1]) is None
    assert cw_dims([2, 3, 5, 7], [1, 0, 3, 2]) is None


@pytest.mark.parametrize(("shape", "view", "perm"), HEADS[:2])
def test_local_round_trip_is_exact_and_cheaper(tmp_path, monkeypatch, shape, view, perm):
    """The S2L + L2S path, taken where the C/W transposes' dims do not fit."""
    import tpuc.passes.native.data as data
    import tpuc.passes.native.gdma_permute as gp

    monkeypatch.setattr(gp, "cw_swappable", lambda *dims: False)
    (tmp_path / "local").mkdir()
    run, cycles = permute_net(tmp_path / "local", shape, view, perm, "INT8")
    exact(run)
    monkeypatch.setattr(data, "gdma_permute", lambda op, ctx: None)
    (tmp_path / "tr").mkdir()
    plain, vendor_cycles = permute_net(tmp_path / "tr", shape, view, perm, "INT8")
    assert cycles < vendor_cycles, (cycles, vendor_cycles)


def test_long_runs_keep_the_vendor_move():
    """A shuffle of 28x28 planes (784-byte runs) moves faster in the
    vendor's one S2S move than through local memory (30,103 against
    30,518 cycles): the round trip is refused there."""
    from tpuc.passes.native.gdma_permute import MAX_RUN_BYTES, outer_swap

    assert 49 * 2 <= MAX_RUN_BYTES < 14 * 14 * 2
    assert outer_swap([40, 8, 15], [15, 600, 1]) == (8, 40, 15)
    assert outer_swap([24, 40, 15], [15, 360, 1]) == (40, 24, 15)


def test_view_merges_and_refuses():
    """Merged dims and source strides in output order; a swap of the last
    two axes (single elements) and four dims that stay apart are refused."""
    assert strided_view([1, 40, 3, 8, 15], [2, 0, 3, 1, 4]) == ([24, 40, 15], [15, 360, 1])
    assert strided_view([1, 8, 40, 15], [0, 2, 1, 3]) == ([40, 8, 15], [15, 600, 1])
    assert strided_view([2, 3, 4, 5], [1, 0, 2, 3]) == ([3, 2, 20], [20, 60, 1])
    assert strided_view([1, 120, 40], [0, 2, 1]) is None
    assert strided_view([2, 3, 4, 5, 6], [3, 2, 1, 0, 4]) is None
