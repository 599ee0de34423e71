"""Backward slices against what a full-tensor conv/pool reads (halo
correctness), near-even splits and invalid slicings."""

from __future__ import annotations

import random

import pytest
from lg_chains import Q8, Chain

from tpuc.ir.core import main_function
from tpuc.passes.layer_group.rules import dims, reset_cache, why_global
from tpuc.passes.layer_group.rules_ops import transposed_range
from tpuc.passes.layer_group.search import layers
from tpuc.passes.layer_group.slicing import GroupGraph, Secs, SliceError, infer, split


def test_split_gives_the_first_remainder_slices_one_more():
    assert split(10, 4) == [(0, 3), (3, 3), (6, 2), (8, 2)]
    assert split(56, 2) == [(0, 28), (28, 28)]
    assert split(5, 1) == [(0, 5)]


def taps(out_start: int, out_size: int, k: int, s: int, p: int, d: int) -> list[int]:
    """Every input row (padding included) a full-tensor window op visits
    for these output rows: the reference for the halo."""
    return [o * s - p + t * d for o in range(out_start, out_start + out_size) for t in range(k)]


def rows_read(out_start: int, out_size: int, k: int, s: int, p: int, d: int, size: int):
    """The rows of the input the taps span, clamped to the tensor (rows a
    dilation skips at an edge still belong to the span)."""
    rows = taps(out_start, out_size, k, s, p, d)
    start, end = max(min(rows), 0), min(max(rows) + 1, size)
    return (start, end - start)


def _random_chain(rng: random.Random) -> tuple[Chain, list[tuple[int, int, int, int]]]:
    h = rng.randint(12, 64)
    chain = Chain((1, 4, h, h), element=Q8)
    geometry = []
    for _ in range(rng.randint(1, 4)):
        size = chain.shapes[chain.count][2]
        k = rng.choice([1, 2, 3, 5, 7])
        s, d = rng.choice([1, 1, 2, 3]), rng.choice([1, 1, 2])
        p = rng.randint(0, (k - 1) * d // 2 + 1) if rng.random() < 0.7 else 0
        if (size + 2 * p - (k - 1) * d - 1) // s + 1 < 2:
            break
        if rng.random() < 0.6:
            chain.conv(4, k, s, p, d)
        else:
            chain.pool(k, s, min(p, k - 1), rng.choice(["Max", "Avg"]))
            d = 1
        geometry.append((k, s, min(p, k - 1) if "Pool" in chain.lines[-1] else p, d))
    return chain, geometry


@pytest.mark.parametrize("seed", range(12))
def test_backward_slices_cover_exactly_what_the_full_op_reads(seed):
    rng = random.Random(seed)
    checked = 0
    for _ in range(6):
        chain, geometry = _random_chain(rng)
        if not geometry:
            continue
        reset_cache()
        ops = layers(main_function(chain.module()).body.block)
        assert all(why_global(op) is None for op in ops)
        graph = GroupGraph.of(ops)
        for hsecs in range(1, 9):
            try:
                slicing = infer(graph, Secs(1, hsecs, 1))
            except SliceError:
                continue
            checked += 1
            for pos, (op, (k, s, p, d)) in enumerate(zip(ops, geometry, strict=True)):
                size = dims(op.operands[0])[2]
                outs = slicing.held[op.results[0]]["h"]
                reads = slicing.reads[pos, 0]["h"]
                for j, (out, read) in enumerate(zip(outs, reads, strict=True)):
                    assert read == rows_read(*out, k, s, p, d, size), (seed, pos, hsecs, j)
                    inside = [r for r in taps(*out, k, s, p, d) if 0 <= r < size]
                    assert read[0] <= min(inside) and max(inside) < read[0] + read[1]
                    raw_start = out[0] * s - p
                    raw_end = (out[0] + out[1] - 1) * s - p + (k - 1) * d + 1
                    if j > 0:  # top padding only on the first slice
                        assert raw_start >= 0
                    if j < len(outs) - 1:  # bottom padding only on the last
                        assert raw_end <= size
                # each op reads exactly what its producer holds (one consumer)
                held = slicing.held[op.operands[0]]["h"]
                assert held == reads
            last = ops[-1].results[0]
            assert slicing.held[last]["h"] == split(dims(last)[2], hsecs)
    assert checked > 0


def test_consumers_needing_different_slices_invalidate_the_group():
    chain = Chain((1, 4, 32, 32))
    chain.unary()  # op1 read by a pool (halo) and by an add (no halo)
    chain.pool(3, 1, 1)
    chain.binary(1, 2)
    reset_cache()
    graph = GroupGraph.of(layers(main_function(chain.module()).body.block))
    infer(graph, Secs(1, 1, 1))  # whole tensors agree
    with pytest.raises(SliceError, match="two consumers need different h slices of 'op1'"):
        infer(graph, Secs(1, 2, 1))


def test_conv_consumers_share_the_hull():
    chain = Chain((1, 4, 32, 32), element=Q8)
    chain.unary()
    chain.conv(4, 3, 1, 1)  # reads op1 with a halo
    chain.conv(4, 1, 1, 0, src=1)  # reads op1 without one
    chain.binary(2, 3)
    reset_cache()
    graph = GroupGraph.of(layers(main_function(chain.module()).body.block))
    slicing = infer(graph, Secs(1, 2, 1))
    op1 = graph.ops[0].results[0]
    assert slicing.held[op1]["h"] == [(0, 17), (15, 17)]
    assert slicing.reads[1, 0]["h"] == [(0, 17), (15, 17)]
    assert slicing.reads[2, 0]["h"] == [(0, 16), (16, 16)]


def test_empty_or_stalled_slices_are_rejected():
    chain = Chain((1, 4, 2, 8))
    chain.pool(3, 1, 1)  # 2 rows: output row 1 reads rows [0, 2) again
    chain.unary()
    reset_cache()
    graph = GroupGraph.of(layers(main_function(chain.module()).body.block))
    with pytest.raises(SliceError, match="h slice 1 of 'in' makes no progress"):
        infer(graph, Secs(1, 2, 1))
    with pytest.raises(SliceError, match="an empty h slice"):
        infer(graph, Secs(1, 3, 1))


def test_a_broadcast_input_is_held_whole_in_every_slice():
    chain = Chain((1, 8, 32, 32))
    chain.pool(32, 1, 0, "Avg")  # global pooling: a global layer here (first op)
    chain.unary(src=0)
    chain.binary(2, 1, name="tpu.Mul")  # x * pooled, broadcast over H and W
    reset_cache()
    ops = layers(main_function(chain.module()).body.block)[1:]
    graph = GroupGraph.of(ops)
    assert graph.inputs[1] is ops[0].operands[0].owner.results[0] or len(graph.inputs) == 2
    slicing = infer(graph, Secs(1, 4, 1))
    pooled = ops[1].operands[1]
    assert slicing.held[pooled]["h"] == [(0, 1)] * 4
    assert slicing.held[ops[1].results[0]]["h"] == split(32, 4)


@pytest.mark.parametrize("seed", range(4))
def test_transposed_conv_rows_are_exactly_the_inputs_that_reach_the_output(seed):
    rng = random.Random(seed)
    for _ in range(200):
        k, s, d = rng.randint(1, 5), rng.randint(1, 4), rng.randint(1, 2)
        pad, size = rng.randint(0, (k - 1) * d), rng.randint(1, 12)
        out_size = (size - 1) * s - 2 * pad + (k - 1) * d + 1
        if out_size < 1:
            continue
        o0 = rng.randrange(out_size)
        o1 = rng.randint(o0 + 1, out_size)
        reach = [i for i in range(size) if any(o0 <= i * s - pad + t * d < o1 for t in range(k))]
        got = transposed_range((o0, o1 - o0), s, pad, k, d, size)
        if not reach:  # stride gaps: no input reaches these rows
            continue
        assert got[0] <= min(reach) and max(reach) < got[0] + got[1]  # covers
        if d == 1:  # without dilation gaps the span is exact
            assert got == (min(reach), max(reach) - min(reach) + 1)


def test_float_gemm_convs_compute_their_whole_output():
    chain = Chain((1, 4, 12, 12))
    chain.conv(4, 3, 1, 1)  # f32 GEMM conv: 12 rows
    chain.pool(3, 2, 0)  # reads rows [0, 11) only
    reset_cache()
    graph = GroupGraph.of(layers(main_function(chain.module()).body.block))
    slicing = infer(graph, Secs(1, 1, 1))
    conv = graph.ops[0].results[0]
    assert slicing.held[conv]["h"] == [(0, 12)]  # whole, not the 11 rows the pool reads
    assert slicing.reads[1, 0]["h"] == [(0, 11)]
    with pytest.raises(SliceError, match="float convolution 'op1' cannot be sliced along h"):
        infer(graph, Secs(1, 2, 1))
    depthwise = Chain((1, 4, 12, 12))
    depthwise.conv(4, 3, 1, 1, group=4)  # per-tap sums: slices are exact
    reset_cache()
    infer(GroupGraph.of(layers(main_function(depthwise.module()).body.block)), Secs(1, 2, 1))


def test_upsample_slices_hold_whole_repeats(monkeypatch):
    """Output row o of a nearest upsample by s reads input row o // s; a slice
    that starts or ends inside a repeat cannot be one strided copy, so its
    backward range is empty (the slicing is invalid and the planner moves on)."""
    from tpuc.passes.layer_group import rules_ops

    scale = {"scale_h": 2, "scale_w": 3}
    monkeypatch.setattr(rules_ops, "attr", lambda _op, key, default=None: scale[key])
    rule = rules_ops.UpsampleRule()
    assert rule.backward(None, "h", (4, 6)) == [(2, 3)]
    assert rule.backward(None, "w", (6, 9)) == [(2, 3)]
    assert rule.backward(None, "h", (3, 6))[0][1] == 0  # starts inside a repeat
    assert rule.backward(None, "h", (4, 5))[0][1] == 0  # ends inside one
    assert rule.backward(None, "n", (1, 2)) == [(1, 2)]
