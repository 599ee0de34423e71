"""The native planner's prices are the vendor's cycles of what it emits,
and it slices when the vendor says slicing pays.

A conv chain on 56x56 planes (after a global transpose) and a squeezenet fire module (branches and a
rescaling channel Concat) go through the native finalize (weight-reorder,
subnet-divide, the layer-group search priced by the vendor library,
address-assign) as model_deploy runs it: the chain's group is cut into H
slices (the price of more slices fell), the fire module is one group with
the input quantization and the Concat, a squeeze-excite block
(tests/support/se_block.py) is one unsliced group with its LUTs, global
pool and broadcast Mul, the `cycles` each tpu.Group
carries equal the vendor's cycles for the commands native codegen then
writes for it (priced again with issuing off, and added when emitted for
real in a subnet of their own), and the bmodel equals the TPU interpreter
bit for bit in the vendor runtime.
"""

from __future__ import annotations

import numpy as np
import pytest
from local_groups import fire_onnx, wide_chain_onnx
from se_block import se_block_onnx

MODELS = {
    "wide": wide_chain_onnx,
    "fire": fire_onnx,
    "se": lambda work: se_block_onnx(work, channels=88),
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def grouped(request, tmp_path_factory, vendor):
    """(finalized module with its tpu.Group ops, interpreter outputs, inputs, work)."""
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.module_io import load_module
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.tools.deploy_native import finalize_grouped
    from tpuc.workflow.deploy import lower

    work = tmp_path_factory.mktemp(f"native_group_prices_{request.param}")
    mlir, table = MODELS[request.param](work)
    module, store = load_module(mlir)
    lower(module, "bm1684x", "INT8", False, table, None)
    inputs = dict(np.load(work / "in.npz"))
    expected = run_tpu(module, store, inputs)
    final_store = WeightStore(store)
    finalize_grouped(module, final_store, "bm1684x", 2, vendor)
    attach_weights(module, final_store)
    return module, expected, inputs, work, request.param


def groups_of(module):
    from tpuc.dialects.tpu.group import GroupOp
    from tpuc.ir.core import main_function

    return [op for op in main_function(module).body.block.ops if isinstance(op, GroupOp)]


def test_one_group_sliced_when_the_vendor_says_it_pays(grouped, vendor):
    """One group; the wide chain's H slicing is one that twice as many H
    slices do not beat on the vendor's cycles (the planner's refine): with
    the unsliced prefetch that may be one slice."""
    from tpuc.dialects import tpu
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.emit import GroupPricer
    from tpuc.passes.native.local.groups import native_group_plans

    module, name = grouped[0], grouped[-1]
    groups = groups_of(module)
    assert len(groups) == 1
    n, h, w = groups[0].secs
    assert (n, w) == (1, 1)
    kinds = {type(op) for op in groups[0].layers()}
    if name == "wide":
        flat, plans = native_group_plans(module, vendor)
        ctx = NativeContext(flat)
        doubled = plan_chain([lop.op for lop in plans[0].ops], ctx, hsecs=2 * h)
        with GroupPricer(vendor) as pricer:
            assert pricer.price_plan(plans[0], ctx) <= pricer.price_plan(doubled, ctx)
    elif name == "se":  # the whole block, its global pool inside: never cut along H
        assert h == 1
        assert {tpu.CastOp, tpu.Pool2DOp, tpu.LutOp, tpu.MulOp} <= kinds
    else:  # the input quantization and the concat joined the group
        assert {tpu.CastOp, tpu.ConcatOp} <= kinds


def test_group_prices_are_the_cycles_of_the_emitted_commands(grouped, vendor):
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.emit import GroupPricer, group_commands
    from tpuc.passes.native.local.groups import native_group_plans
    from tpuc.target.vendor.worker import Worker

    module = grouped[0]
    groups = groups_of(module)
    flat, plans = native_group_plans(module, vendor)  # as emit.py plans them
    ctx = NativeContext(flat)
    with GroupPricer(vendor) as pricer:
        for group, plan in zip(groups, plans, strict=True):
            assert plan.hsecs == group.secs[1]
            commands = group_commands(plan, ctx)
            planned = group.attributes["cycles"].value.data
            assert pricer.price(commands) == planned
            with Worker("backend", vendor.lib, "vendor backend") as w:
                w.call("begin", "begin", True)
                assert w.call("the group", "run", commands) == planned
                assert w.call("end", "end")["cycles"] == planned


def test_the_sliced_group_is_bit_exact(grouped, vendor):
    from tpuc.passes.native.emit import generate_native
    from tpuc.target.vendor.run import run_native

    module, expected, inputs, work, _ = grouped
    path = work / "grouped.bmodel"
    path.write_bytes(generate_native(module, vendor, profile=False).bmodel)
    got = run_native(path, inputs, vendor, fixed=True)
    assert got.keys() == expected.keys()
    for name in got:
        assert np.unique(np.asarray(expected[name])).size > 10  # not a saturated output
        assert np.array_equal(np.asarray(got[name]), np.asarray(expected[name])), name
