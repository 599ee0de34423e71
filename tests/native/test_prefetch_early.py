"""An unsliced group's longest load may be queued first (prefetch.py
`early`, chain._early_tries): densenet121's 1 MB classifier weights, whose
reader is the last op, otherwise wait behind every other load and stall
the last block. On the prefetch chain (tests/support/local_groups.py) the
longest load (the 3x3 128->256 filter) queued first is loaded beside the
first op; every other load still comes before its reader and no two
buffers alive in a common timestep overlap; the group runs bit for bit
against tpuc's TPU interpreter in the vendor runtime; and a kept group's
plan (`fine`) is never dearer by the estimate than the in-order sweep's.
"""

from __future__ import annotations

import pytest
from local_groups import lowered, prefetch_chain_onnx
from native_models import check
from test_prefetch import _events


@pytest.fixture(scope="module")
def planned(tmp_path_factory, vendor):
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.costs import VendorCosts
    from tpuc.passes.native.local.emit import GroupPricer
    from tpuc.passes.native.local.plan import allocate
    from tpuc.passes.native.local.prefetch import longest_load, unsliced_timesteps

    work = tmp_path_factory.mktemp("prefetch_early")
    mlir, table = prefetch_chain_onnx(work)
    module, expected, inputs, ops = lowered(work, mlir, table, "INT8")
    ctx = NativeContext(module)
    with GroupPricer(vendor) as pricer:
        costs = VendorCosts(ctx, pricer)
        plan = plan_chain(ops, ctx, costs=costs)
        key = longest_load(plan, costs)
        rows, lifetimes = unsliced_timesteps(plan, 0.8, costs, early=(key,))
        allocate(plan, lifetimes)
        plan.timesteps = rows
        fine = plan_chain(ops, ctx, costs=costs, fine=True)
        in_order = _in_order(ops, ctx, costs)
        estimates = [_estimate(p, costs) for p in (fine, in_order)]
    return work, module, expected, inputs, plan, key, estimates


def _in_order(ops, ctx, costs):
    from tpuc.passes.native.local import chain

    saved, chain.EARLY_TRIES = chain.EARLY_TRIES, 0
    try:
        return chain.plan_chain(ops, ctx, costs=costs, fine=True)
    finally:
        chain.EARLY_TRIES = saved


def _estimate(plan, costs) -> float:
    from tpuc.passes.native.local.prefetch import estimate

    return estimate(plan, plan.timesteps, costs)


def test_longest_load_first(planned):
    _, _, _, _, plan, key, _ = planned
    assert isinstance(key, tuple) and key[0].value("kernel_shape") == [3, 3]
    assert [i.target for i in plan.timesteps[1] if i.kind == "load"][0] is key
    row_of = {}
    for r, row in enumerate(plan.timesteps):
        for item in row:
            row_of.setdefault((item.kind, id(item.target)), r)
    for r, row in enumerate(plan.timesteps):
        for item in (i for i in row if i.kind == "compute"):
            for k in plan.inputs:
                if (isinstance(k, tuple) and k[0] is item.target) or k in item.target.operands:
                    assert row_of[("load", id(k))] < r, item.target.name
    events = _events(plan)
    spans = [(min(events[id(t)]), max(events[id(t)]), t.addrs[0], t.lane_bytes())
             for t in plan.tensors.values()]  # fmt: skip
    for i, (a0, a1, addr_a, size_a) in enumerate(spans):
        for b0, b1, addr_b, size_b in spans[i + 1 :]:
            if a0 <= b1 and b0 <= a1:
                assert addr_a + size_a <= addr_b or addr_b + size_b <= addr_a


def test_never_dearer_than_in_order(planned):
    fine, in_order = planned[-1]
    assert fine <= in_order


def test_early_plan_bit_for_bit(planned, vendor):
    from tpuc.passes.native.emit import generate_native
    from tpuc.target.vendor.run import run_native

    work, module, expected, inputs, plan, *_ = planned
    path = work / "early.bmodel"
    path.write_bytes(generate_native(module, vendor, profile=False, groups=[plan]).bmodel)
    check(run_native(path, inputs, vendor), expected, "INT8")
