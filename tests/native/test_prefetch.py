"""Unsliced native groups (passes/native/local/prefetch.py): later ops'
weights load while earlier ops compute, a timestep may run several ops
beside a long load, and buffers whose timesteps do not meet share bytes.

A conv chain whose late filters (128 and 256 channels) outweigh its late
compute is planned as one unsliced group with the vendor's op and move
cycles (costs.VendorCosts), written as the chip's local commands and run in
the vendor runtime: INT8 bit for bit against tpuc's TPU interpreter and
the global native bmodel; every load sits in a timestep before its reader,
no two buffers alive in a common timestep overlap (scratch buffers too), and the vendor's cycles
fall below the table that loads each tensor just before its reader.
"""

from __future__ import annotations

import pytest
from local_groups import lowered, prefetch_chain_onnx
from native_models import check
from test_local_groups import same


@pytest.fixture(scope="module")
def grouped(tmp_path_factory, vendor):
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.costs import VendorCosts
    from tpuc.passes.native.local.emit import GroupPricer

    work = tmp_path_factory.mktemp("prefetch")
    mlir, table = prefetch_chain_onnx(work)
    module, expected, inputs, ops = lowered(work, mlir, table, "INT8")
    ctx = NativeContext(module)
    with GroupPricer(vendor) as pricer:
        costs = VendorCosts(ctx, pricer)
        plan = plan_chain(ops, ctx, costs=costs)
        cycles = pricer.price_plan(plan, ctx)
        late = plan_chain(ops, ctx, costs=costs)
        _just_in_time(late, costs)
        late_cycles = pricer.price_plan(late, ctx)
    return work, module, expected, inputs, ops, plan, cycles, late_cycles


def _just_in_time(plan, costs) -> None:
    """The same plan with budget 0: each load in the timestep before its reader."""
    from tpuc.passes.native.local.plan import allocate
    from tpuc.passes.native.local.prefetch import unsliced_timesteps

    rows, lifetimes = unsliced_timesteps(plan, 0.0, costs)
    allocate(plan, lifetimes)
    plan.timesteps = rows


def _events(plan) -> dict:
    """id(tensor) -> the rows it is loaded, computed, read or stored in."""
    rows: dict[int, list[int]] = {}
    for r, row in enumerate(plan.timesteps):
        for item in row:
            if item.kind != "compute":
                rows.setdefault(id(plan.tensors[item.target]), []).append(r)
                continue
            op = item.target
            keys = [v for v in (*op.operands, *op.results) if v in plan.tensors]
            keys += [k for k in plan.tensors if isinstance(k, tuple) and k[0] is op]
            for key in keys:
                rows.setdefault(id(plan.tensors[key]), []).append(r)
    return rows


def test_loads_come_before_their_readers_and_live_buffers_never_overlap(grouped):
    plan = grouped[5]
    row_of = {}
    for r, row in enumerate(plan.timesteps):
        for item in row:
            row_of.setdefault((item.kind, id(item.target)), r)
    for r, row in enumerate(plan.timesteps):
        for item in row:
            if item.kind != "compute":
                continue
            op = item.target
            for key in plan.inputs:
                if (isinstance(key, tuple) and key[0] is op) or key in op.operands:
                    assert row_of[("load", id(key))] < r, op.name
    events = _events(plan)
    spans = [
        (min(events[id(t)]), max(events[id(t)]), t.addrs[0], t.lane_bytes())
        for t in plan.tensors.values()
    ]
    spans += [  # scratch buffers: their op's row
        (row_of[("compute", id(lop.op))],) * 2 + (lop.buffer_addr, lop.buffer_size)
        for lop in plan.ops
        if lop.buffer_size
    ]
    assert len(spans) > len(plan.tensors), "the chain's convolutions have scratch buffers"
    for i, (a0, a1, addr_a, size_a) in enumerate(spans):
        for b0, b1, addr_b, size_b in spans[i + 1 :]:
            if a0 <= b1 and b0 <= a1:
                assert addr_a + size_a <= addr_b or addr_b + size_b <= addr_a


def test_late_weights_load_early_and_pay(grouped):
    *_, plan, cycles, late_cycles = grouped
    computed = {
        id(item.target): r
        for r, row in enumerate(plan.timesteps)
        for item in row
        if item.kind == "compute"
    }
    ahead = [
        item.target
        for r, row in enumerate(plan.timesteps)
        for item in row
        if item.kind == "load" and isinstance(item.target, tuple)
        and r < computed[id(item.target[0])] - 1
    ]  # fmt: skip
    assert ahead, "no coefficients loaded ahead of the timestep before their reader"
    assert max(sum(i.kind == "compute" for i in row) for row in plan.timesteps) > 1
    assert cycles < late_cycles


def test_bit_for_bit(grouped, vendor):
    from tpuc.passes.native.emit import generate_native
    from tpuc.target.vendor.run import run_native

    work, module, expected, inputs, _ops, plan, *_ = grouped
    outs = []
    for name, groups in (("group", [plan]), ("global", [])):
        path = work / f"{name}.bmodel"
        path.write_bytes(generate_native(module, vendor, profile=False, groups=groups).bmodel)
        outs.append(run_native(path, inputs, vendor, fixed=True))
    real = run_native(work / "group.bmodel", inputs, vendor)
    check(real, expected, "INT8")
    same(outs[0], outs[1])
