"""A 3ic INT8 convolution whose input the group loads and only it reads:
the group loads that input broadcast, each channel to the lanes of its
folded taps (one tensor_broadcast_move_gen_cmd a channel, TPU-MLIR's Load
with use_3ic_optimize), and the kernel runs without its TIU copy of the
input (use_3ic_optimize without 0x30, no input copy in its buffer). Bit
for bit against tpuc's TPU interpreter and the global layers, over N and
H slices, and cheaper than the same group with the kernel's copy."""

from __future__ import annotations

import numpy as np
import pytest
from local_groups import lowered, pool_chain_onnx


@pytest.fixture(scope="module")
def pools(tmp_path_factory):
    """conv 3->16 3x3 (+relu; 3ic mode 3: 27 lanes), 2x2 max pool, conv
    16->32 3x3 stride 2 (mode 1), 3x3 max pool, on two 3x32x20 images."""
    work = tmp_path_factory.mktemp("local_3ic_load")
    return work, *pool_chain_onnx(work)


def plans(pools, nsecs: int, hsecs: int, copy: bool):
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local import chain

    work, mlir, table = pools
    module, expected, inputs, ops = lowered(work, mlir, table, "INT8")
    if copy:  # the kernel's own TIU copy of the input, as before
        saved, chain._broadcast_loads = chain._broadcast_loads, lambda *a: None
    try:
        plan = chain.plan_chain(ops, NativeContext(module), hsecs=hsecs, nsecs=nsecs)
    finally:
        if copy:
            chain._broadcast_loads = saved
    return module, expected, inputs, ops, plan


def test_only_a_3ic_input_is_loaded_broadcast(pools):
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.emit import group_commands
    from tpuc.passes.native.local.ops import conv_buffer

    module, _, _, ops, plan = plans(pools, 1, 1, copy=False)
    x = ops[0].operands[0]
    assert plan.tensors[x].bcast_lanes == 9  # mode 3: 3x3 taps a channel
    assert all(t.bcast_lanes == 0 for k, t in plan.tensors.items() if k is not x)
    loads = [c for c in group_commands(plan, NativeContext(module)) if c[0] == "bcast"]
    assert [c[2][3] for c in loads] == [0, 9, 18]  # first lane of each channel
    copied = plans(pools, 1, 1, copy=True)[4]
    first = copied.ops[0].op
    extra = conv_buffer(first, copied) - conv_buffer(ops[0], plan)
    assert extra == copied.tensors[first.operands[0]].lane_bytes()  # the kernel's copy


@pytest.mark.parametrize("nsecs, hsecs", [(1, 1), (2, 3)])
def test_broadcast_load_is_bit_exact_and_cheaper(pools, vendor, nsecs, hsecs):
    from tpuc.passes.native.emit import generate_native
    from tpuc.target.vendor.run import run_native

    work = pools[0]
    outs, cycles = {}, {}
    for name, copy in (("bcast", False), ("copy", True)):
        module, expected, inputs, _, plan = plans(pools, nsecs, hsecs, copy)
        compiled = generate_native(module, vendor, profile=True, groups=[plan])
        path = work / f"{name}_{nsecs}_{hsecs}.bmodel"
        path.write_bytes(compiled.bmodel)
        outs[name], cycles[name] = run_native(path, inputs, vendor), compiled.cycles
    glob = generate_native(module, vendor, profile=False, groups=[]).bmodel
    (work / "global.bmodel").write_bytes(glob)
    outs["global"] = run_native(work / "global.bmodel", inputs, vendor)
    for name in expected:
        want = np.asarray(expected[name], np.float32)
        for kind in ("bcast", "copy", "global"):
            got = np.asarray(outs[kind][name], np.float32).reshape(want.shape)
            assert np.array_equal(got, want), f"{kind} {name}: {np.count_nonzero(got != want)}"
    # measured 2026-11-27: 4,386 against 4,664 unsliced; 7,675 against 8,061 in 2x3 slices
    assert cycles["bcast"] < cycles["copy"]


def test_planner_keeps_the_cheaper_of_the_two_loads(pools, vendor):
    """groups.cheaper_load: the broadcast plan or the kernel's copy,
    whichever the vendor prices lower (a smaller buffer can move an
    unsliced group's prefetch for the worse); without a pricer, broadcast."""
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.emit import GroupPricer
    from tpuc.passes.native.local.groups import cheaper_load

    module, _, _, ops, _ = plans(pools, 1, 1, copy=False)
    ctx = NativeContext(module)
    assert cheaper_load(ops, ctx, None).tensors[ops[0].operands[0]].bcast_lanes == 9
    with GroupPricer(vendor) as pricer:
        chosen = pricer.price_plan(cheaper_load(ops, ctx, pricer), ctx)
        bcast = pricer.price_plan(plan_chain(ops, ctx), ctx)
        copy = pricer.price_plan(plan_chain(ops, ctx, broadcast=False), ctx)
    assert chosen == min(bcast, copy) and bcast < copy
