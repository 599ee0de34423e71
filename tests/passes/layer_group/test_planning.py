"""Group planning: growing slice counts, splitting groups that never fit,
the timestep table, allocator safety, the search against brute force."""

from __future__ import annotations

import itertools
import random

import pytest
from lg_chains import Q8, Chain

from tpuc.ir.core import main_function
from tpuc.ir.module_io import parse_module
from tpuc.passes.layer_group import group as group_module
from tpuc.passes.layer_group import plan_module
from tpuc.passes.layer_group.allocate import Buffer, allocate, place
from tpuc.passes.layer_group.group import GroupInvalid, GroupPlan, plan_group
from tpuc.passes.layer_group.layout import LocalLayout
from tpuc.passes.layer_group.rules import reset_cache
from tpuc.passes.layer_group.search import INVALID, Planner, base_groups, dynamic, greedy, layers
from tpuc.passes.layer_group.slicing import Secs
from tpuc.target.chips import get_chip

CV = get_chip("cv183x")
BM = get_chip("bm1684x")


def ops_of(chain: Chain):
    reset_cache()
    return layers(main_function(chain.module()).body.block)


def conv_chain(h=64, c=32) -> Chain:
    """Integer convs of f32-sized planes: (2h)² int8 bytes = h² f32 bytes."""
    chain = Chain((1, c, 2 * h, 2 * h), chip="cv183x", element=Q8)
    chain.conv(c, 3, 1, 1)
    chain.unary()
    chain.conv(c, 3, 1, 1)
    return chain


def test_local_layout_from_the_chip_data():
    layout = LocalLayout.of(BM)
    assert layout.lane_bytes((1, 64, 56, 56), 1) == 3136
    assert layout.lane_bytes((1, 256, 14, 14), 2) == 4 * 224 * 2  # planes x aligned plane
    assert layout.lane_bytes((1, 3, 224, 224), 4) == 50176 * 4
    assert layout.lane_bytes((1, 65, 3, 3), 1, compact=True) == 2 * 9
    assert layout.lane_of(70) == 6 and layout.bank_bytes == 16 * 1024


def test_a_group_that_does_not_fit_gets_more_slices(monkeypatch):
    ops = ops_of(conv_chain())
    layout = LocalLayout.of(CV)
    monkeypatch.setattr(group_module, "initial_secs", lambda graph, layout, bound: Secs())
    plan = plan_group(ops, layout, CV.timing)
    assert plan.tries > 1 and plan.secs.h > 1 and plan.secs.n == 1
    assert plan.allocation.used <= layout.lmem_bytes


def test_slice_counts_grow_n_first_then_h_then_w():
    chain = Chain((4, 8, 16, 256))
    chain.unary()
    chain.unary()
    graph = group_module.GroupGraph.of(ops_of(chain))
    bound = group_module.max_secs(graph)
    assert bound == Secs(4, 16, 4)  # W slices of at least 256 bytes: 1024 / 256
    assert group_module.grow(Secs(1, 1, 1), bound, graph) == Secs(2, 1, 1)
    assert group_module.grow(Secs(2, 1, 1), bound, graph) == Secs(4, 1, 1)  # 3 does not shrink
    assert group_module.grow(Secs(4, 1, 1), bound, graph) == Secs(4, 2, 1)
    assert group_module.grow(Secs(4, 16, 1), bound, graph) == Secs(4, 16, 2)
    assert group_module.grow(Secs(4, 16, 4), bound, graph) is None


def test_a_group_that_never_fits_is_invalid_and_the_search_splits_it():
    chain = Chain((1, 64, 240, 240), chip="cv183x", element=Q8)
    chain.conv(64, 3, 1, 1)
    chain.unary()
    chain.pool(240, 1, 0, "Avg")  # global pooling: H and W cannot split
    ops = ops_of(chain)
    layout = LocalLayout.of(CV)
    with pytest.raises(GroupInvalid, match="does not fit"):
        plan_group(ops, layout, CV.timing)
    planner = Planner(ops, layout, CV.timing)
    assert isinstance(planner.plan(0, 1), GroupPlan)
    assert dynamic(planner, 0, 2) == [(0, 1), (2, 2)]
    assert greedy(planner, 0, 2) == [(0, 1), (2, 2)]
    notes = plan_module(chain.module(), CV, explain=True).notes
    assert notes == [
        f"op1..op2 (2 ops): stops before 'op3' (tpu.Pool2D): does not fit "
        f"{CV.lmem_bytes} bytes per lane",
        "op3..op3 (1 ops): the last layer",
    ]


def test_timestep_table_pipelines_loads_and_stores():
    plan = plan_group(ops_of(conv_chain()), LocalLayout.of(CV), CV.timing)
    table, graph = plan.table, plan.graph
    assert table.op_ts == [0, 1, 2]
    first = table.steps[0]
    # op 0 computes while the last op's result of the previous slice is stored (stage 2)
    assert [(m.kind, m.stage) for m in first.moves if m.kind == "store"] == [("store", 2)]
    # the input of the next slice is loaded while the last op computes (stage 0)
    last = table.steps[-1]
    assert [(m.value, m.stage) for m in last.moves if m.kind == "load" and not m.held] == [
        (graph.inputs[0], 0)
    ]
    held = [m for _, m in table.moves() if m.held]
    assert {m.value for m in held} == set(graph.weights) and plan.secs.loop > 1


def _no_overlap(plan: GroupPlan, lmem: int) -> None:
    placed = [(plan.allocation.addresses[b.key], b) for b in plan.buffers]
    for addr, b in placed:
        assert addr >= 0 and addr + b.size <= lmem
    for (a1, b1), (a2, b2) in itertools.combinations(placed, 2):
        if b1.live & b2.live:
            assert a1 + b1.size <= a2 or a2 + b2.size <= a1, (b1.key, b2.key)


@pytest.mark.parametrize("seed", range(6))
def test_planned_groups_keep_live_buffers_apart_inside_the_lane(seed):
    found = plan_module(_random_graph(random.Random(100 + seed)).module(), CV)
    for plan in found.plans:
        _no_overlap(plan, CV.lmem_bytes)


@pytest.mark.parametrize("seed", range(5))
def test_allocator_never_overlaps_live_buffers(seed):
    rng = random.Random(seed)
    layout = LocalLayout.of(CV)
    for _ in range(30):
        steps = rng.randint(1, 8)
        buffers = []
        for i in range(rng.randint(1, 12)):
            start, length = rng.randrange(steps), rng.randint(1, steps)
            live = frozenset((start + t) % steps for t in range(length))
            buffers.append(Buffer(i, layout.buffer_bytes(rng.randint(1, 6000)), live))
        conflicts = {
            i: {j for j in range(len(buffers)) if j != i and rng.random() < 0.2}
            for i in range(len(buffers))
        }
        found = allocate(buffers, conflicts, layout)
        if found is None:
            assert sum(b.size for b in buffers) > layout.lmem_bytes // 4
            continue
        for a, b in itertools.combinations(buffers, 2):
            if a.live & b.live:
                x, y = found.addresses[a.key], found.addresses[b.key]
                assert x + a.size <= y or y + b.size <= x
        assert all(found.addresses[b.key] + b.size <= layout.lmem_bytes for b in buffers)


def test_allocator_keeps_a_tiu_ops_operands_in_other_banks():
    plan = plan_group(ops_of(conv_chain(h=16, c=8)), LocalLayout.of(BM), BM.timing)
    assert plan.allocation.bank_conflicts == 0
    layout = LocalLayout.of(BM)
    op = plan.graph.ops[0]
    addrs = plan.allocation.addresses
    sizes = {b.key: b.size for b in plan.buffers}
    assert not layout.banks_of(addrs[op.operands[0]], sizes[op.operands[0]]) & layout.banks_of(
        addrs[op.results[0]], sizes[op.results[0]]
    )


def _random_graph(rng: random.Random) -> Chain:
    chain = Chain((rng.choice([1, 2]), 16, rng.choice([24, 48, 96]), 48), chip="cv183x")
    for _ in range(rng.randint(2, 8)):
        pick = rng.random()
        if pick < 0.35:
            chain.conv(rng.choice([16, 32]), rng.choice([1, 3]), 1, 1 if rng.random() < 0.5 else 0)
        elif pick < 0.5:
            chain.pool(2, 2) if chain.shapes[chain.count][2] >= 4 else chain.unary()
        elif (
            pick < 0.7
            and chain.count >= 2
            and chain.shapes[chain.count - 1] == chain.shapes[chain.count]
        ):
            chain.binary(chain.count - 1, chain.count)
        elif pick < 0.8:
            n, c, h, w = chain.shapes[chain.count]
            chain.reshape((n, c, h * w, 1))  # a global layer: cuts base groups
            chain.reshape((n, c, h, w))
        else:
            chain.unary(rng.choice(["tpu.Relu", "tpu.Sigmoid"]))
    return chain


@pytest.mark.parametrize("seed", range(8))
def test_dynamic_programming_equals_brute_force(seed):
    rng = random.Random(seed)
    chain = _random_graph(rng)
    ops = ops_of(chain)
    planner = Planner(ops, LocalLayout.of(CV), CV.timing)
    for first, last in base_groups(ops):
        best = INVALID
        n = last - first + 1
        assert n <= 8
        for cuts in itertools.product([False, True], repeat=n - 1):
            runs, start = [], first
            for k, cut in enumerate(cuts):
                if cut:
                    runs.append((start, first + k))
                    start = first + k + 1
            runs.append((start, last))
            best = min(best, sum(planner.cost(a, b) for a, b in runs))
        found = dynamic(planner, first, last)
        assert sum(planner.cost(a, b) for a, b in found) == best
        assert best < INVALID
        greedy_runs = greedy(planner, first, last)
        assert sum(planner.cost(a, b) for a, b in greedy_runs) >= best


def test_planning_is_deterministic_and_not_worse_than_all_global():
    rng = random.Random(3)
    text = _random_graph(rng).text()
    results = []
    for _ in range(2):
        found = plan_module(parse_module(text), CV)
        results.append((found.runs, found.slices, found.grouped_cycles))
        assert found.grouped_cycles <= found.global_cycles
    assert results[0] == results[1]


@pytest.mark.parametrize("seed", range(3))
def test_buffers_that_fit_side_by_side_are_always_placed(seed):
    rng = random.Random(seed)
    layout = LocalLayout.of(CV)
    for _ in range(40):
        steps, buffers, total = rng.randint(1, 6), [], 0
        while True:
            size = layout.buffer_bytes(rng.randint(1, 9000))
            if total + size > layout.lmem_bytes:
                break
            start, length = rng.randrange(steps), rng.randint(1, steps)
            live = frozenset((start + t) % steps for t in range(length))
            buffers.append(Buffer(len(buffers), size, live))
            total += size
        conflicts = {b.key: {o.key for o in buffers if o is not b} for b in buffers}
        found = place(buffers, conflicts, layout)
        assert found is not None and found.used <= layout.lmem_bytes
        for a, b in itertools.combinations(buffers, 2):
            if a.live & b.live:
                x, y = found.addresses[a.key], found.addresses[b.key]
                assert x + a.size <= y or y + b.size <= x


def test_w_does_not_split_when_dims_fold_into_it():
    flat = Chain((1, 4, 8, 512))
    flat.unary()
    folded = Chain((1, 4, 8, 8, 64))  # rank 5: W is 8 x 64 folded
    folded.unary()
    assert group_module.max_secs(group_module.GroupGraph.of(ops_of(flat))).w == 8  # 2 KiB rows
    assert group_module.max_secs(group_module.GroupGraph.of(ops_of(folded))).w == 1
