"""A sliced group's loads and stores beside the compute that hides them
(passes/native/local/balance.py), and float convolutions cut into H slices
by the native planner (ppocr_det's F16 stem).

The chain starts as ppocr_det's does: the model input's cast (a short
op), then a 3x3 convolution and a 3x3 depthwise one. chain_timesteps puts
every per-slice load and store beside the cast, so the convolution's
timestep waits for them; balanced, they run beside the convolutions: the
vendor's cycles fall, and the bmodel still gives the TPU interpreter's
values bit for bit (INT8, F16, BF16). Through model_deploy's native
planner the same ops on a 3x320x320 f32 input (too large for one slice)
are one group cut along H, float convolutions included (the guard of
layer_group/slicing.gemm_float is for tpuc's own target), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from local_groups import lowered
from native_models import check, save_onnx, transformed
from onnx import helper, numpy_helper
from onnx_init import normal_init

MODES = ["INT8", "F16", "BF16"]


def stem_nodes():
    return [
        helper.make_node(
            "Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3], strides=[2, 2]
        ),  # fmt: skip
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node(
            "Conv", ["r1", "W2", "B2"], ["y"], pads=[1] * 4, kernel_shape=[3, 3], group=16
        ),  # fmt: skip
    ]


def stem_inits(init):
    return [
        init("W1", (16, 3, 3, 3)),
        init("B1", (16,), 1.0),
        init("W2", (16, 1, 3, 3), 0.5),
        init("B2", (16,), 0.5),
    ]


@pytest.fixture(scope="module")
def stem(tmp_path_factory):
    work = tmp_path_factory.mktemp("local_balance")
    init = normal_init(np.random.default_rng(12))
    return (work, *transformed(work, "stem", stem_nodes(), [("x", [1, 3, 96, 64])], "y",
                               stem_inits(init)))  # fmt: skip


def stem_ops(module):
    from tpuc.dialects import tpu

    kinds = (tpu.CastOp, tpu.Conv2DOp)
    found = [op for op in next(iter(module.ops)).body.block.ops if isinstance(op, kinds)]
    assert [op.name for op in found][:3] == ["tpu.Cast", "tpu.Conv2D", "tpu.Conv2D"]
    return found[:3]


@pytest.mark.parametrize("mode", MODES)
def test_moves_beside_the_convolutions(stem, vendor, mode):
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import generate_native
    from tpuc.passes.native.local.balance import balanced_timesteps
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.costs import VendorCosts
    from tpuc.passes.native.local.emit import GroupPricer
    from tpuc.passes.native.local.plan import LOAD, STORE, chain_timesteps
    from tpuc.target.vendor.run import run_native

    work, mlir, table = stem
    module, expected, inputs, _ = lowered(work, mlir, table, mode)
    ops = stem_ops(module)
    ctx = NativeContext(module)
    with GroupPricer(vendor) as pricer:
        costs = VendorCosts(ctx, pricer)
        plan = plan_chain(ops, ctx, hsecs=4, costs=costs)
        rows = balanced_timesteps(plan, ctx, costs)
        assert plan.timesteps == rows  # the vendor priced it lower, so it was kept
        balanced = pricer.price_plan(plan, ctx)
        plan.timesteps = chain_timesteps(plan)
        plain = pricer.price_plan(plan, ctx)
        plan.timesteps = rows
    moved = [i for row in rows[1:] for i in row if i.kind in (LOAD, STORE)]
    assert moved  # off the cast's timestep
    assert balanced < plain
    path = work / f"{mode}.bmodel"
    path.write_bytes(generate_native(module, vendor, profile=False, groups=[plan]).bmodel)
    check(run_native(path, inputs, vendor), expected, "INT8")  # bit for bit, every mode


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_deploy_cuts_the_float_stem_along_h(tmp_path, vendor, mode):
    """The whole stem in one group in H slices (before: the cast and the
    first convolution global, as tpuc's own planner refuses to slice
    float GEMM convolutions), the interpreter's bits."""
    from tpuc.dialects import tpu
    from tpuc.frontends.onnx.converter import convert_onnx
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.tools.deploy_native import native_codegen, run_native_check
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import run_passes, transform_passes

    init = normal_init(np.random.default_rng(13))
    inits = [(i.name, numpy_helper.to_array(i)) for i in stem_inits(init)]
    feeds = {"x": np.random.default_rng(14).standard_normal((1, 3, 320, 320)).astype("f4")}
    path = save_onnx(tmp_path / "m.onnx", stem_nodes(), feeds, ["y"], inits, 14)
    module, weights = convert_onnx(path, "m")
    store = WeightStore(weights)
    attach_weights(module, store)
    run_passes(module, transform_passes())
    lower(module, "bm1684x", mode, asymmetric=False, cali_table=None, qtable=None)
    expected = run_tpu(module, store, feeds)
    compiled = native_codegen(module, store, "bm1684x", vendor)
    body = next(iter(compiled.module.ops)).body.block.ops
    groups = [op for op in body if isinstance(op, tpu.GroupOp)]
    assert len(groups) == 1 and groups[0].secs[1] > 1
    names = [op.name for op in groups[0].layers()]
    assert names[:3] == ["tpu.Cast", "tpu.Conv2D", "tpu.Conv2D"]
    got = run_native_check(compiled.bmodel, feeds, vendor)
    chip, want = np.asarray(got["y"]), np.asarray(expected["y"])
    assert np.array_equal(chip, want.reshape(chip.shape)), f"{np.count_nonzero(chip != want)}"
