"""INT8 grouped (not depthwise) convolutions in native layer groups: the
local kernel's own groups (`conv_local_spec_t.common.groups`) over the
global rule's merged coefficient, as a ShuffleNet unit uses them (1x1
group-4 convolution + relu, depthwise 3x3, 1x1 group-4 convolution),
bit for bit against tpuc's TPU interpreter and the global native bmodel,
in 1 and 3 H slices, with the group's vendor cycles below the global
layers'. F16/BF16 grouped convolutions are local the same way, over the
global rule's per-group blocked filter, with the kernel's scratch buffer
for a group's input (without it the last group's input lands on the
output's first channels)."""

from __future__ import annotations

import numpy as np
import pytest
from local_groups import lowered
from native_models import check, transformed
from onnx import helper
from onnx_init import normal_init


@pytest.fixture(scope="module")
def unit(tmp_path_factory):
    """(work, mlir, cali table) of 24 -> 136 channels in 4 groups (+relu),
    depthwise 3x3, 136 -> 136 in 4 groups, on 1x24x28x28: 34 channels per
    group, so groups start mid-lane."""
    work = tmp_path_factory.mktemp("grouped_conv")
    rng = np.random.default_rng(7)

    init = normal_init(rng)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], kernel_shape=[1, 1], group=4),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1] * 4, kernel_shape=[3, 3], group=136),
        node("Conv", ["c2", "W3", "B3"], ["y"], kernel_shape=[1, 1], group=4),
    ]
    inits = [
        init("W1", (136, 6, 1, 1)),
        init("B1", (136,), 1.0),
        init("W2", (136, 1, 3, 3)),
        init("B2", (136,), 0.5),
        init("W3", (136, 34, 1, 1), 0.2),
        init("B3", (136,), 0.5),
    ]
    return (work, *transformed(work, "unit", nodes, [("x", [1, 24, 28, 28])], "y", inits))


@pytest.mark.parametrize("hsecs", [1, 3])
def test_int8_shufflenet_unit_as_one_group(unit, vendor, hsecs):
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import generate_native
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.target.vendor.run import run_native

    work, mlir, table = unit
    module, expected, inputs, ops = lowered(work, mlir, table, "INT8")
    assert [op.value("group") for op in ops] == [4, 136, 4]
    plan = plan_chain(ops, NativeContext(module), hsecs=hsecs)
    outs, cycles = {}, {}
    for name, groups in (("group", [plan]), ("global", [])):
        compiled = generate_native(module, vendor, profile=True, groups=groups)
        path = work / f"{name}_{hsecs}.bmodel"
        path.write_bytes(compiled.bmodel)
        outs[name], cycles[name] = run_native(path, inputs, vendor), compiled.cycles
    check(outs["group"], expected, "INT8")
    assert np.array_equal(np.asarray(outs["group"]["y"]), np.asarray(outs["global"]["y"]))
    # measured 2026-11-27: 1 slice 22,210 and 3 slices 21,306 against 34,051 global
    assert cycles["group"] < 0.8 * cycles["global"]


def test_grouped_conv_buffer_holds_a_group_input(unit):
    """getBufferSize_bm1684x for groups > 1: besides the int32 sums, one
    group's input slice (EU-aligned planes) and two elements per input
    channel a lane holds (136 -> 136 in 4 groups at 28x28: 34 input
    channels a group, one plane a lane: 832 + 2 bytes; the sums 3 planes
    of 832 int32). The first conv, 24 -> 136 in 4 groups, runs dense
    (every input channel in one pass of the lanes, TPU-MLIR's group 1 for
    shufflenet's 24 -> 112): the sums only."""
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.dense import dense_groups
    from tpuc.passes.native.local.ops import conv_buffer

    work, mlir, table = unit
    module, _, _, ops = lowered(work, mlir, table, "INT8")
    assert [dense_groups(op) for op in ops] == [True, False, False]
    plan = plan_chain(ops, NativeContext(module))
    assert conv_buffer(ops[2], plan) == 3 * 832 * 4 + 832 + 2
    assert conv_buffer(ops[0], plan) == 3 * 832 * 4


@pytest.mark.parametrize("mode, hsecs", [("F16", 1), ("F16", 3), ("BF16", 1)])
def test_half_shufflenet_unit_as_one_group(unit, vendor, mode, hsecs):
    """The unit in F16/BF16 as one group (grouped 1x1 convolutions local,
    the depthwise one half_depthwise.py's) gives the TPU interpreter's and
    the global layers' very bits."""
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import generate_native
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.target.vendor.run import run_native

    work, mlir, table = unit
    module, expected, inputs, ops = lowered(work, mlir, table, mode)
    assert [op.value("group") for op in ops] == [4, 136, 4]
    plan = plan_chain(ops, NativeContext(module), hsecs=hsecs)
    outs, cycles = {}, {}
    for name, groups in (("group", [plan]), ("global", [])):
        compiled = generate_native(module, vendor, profile=True, groups=groups)
        path = work / f"{mode}_{name}_{hsecs}.bmodel"
        path.write_bytes(compiled.bmodel)
        outs[name], cycles[name] = run_native(path, inputs, vendor), compiled.cycles
    got = np.asarray(outs["group"]["y"], np.float32)
    want = np.asarray(expected["y"], np.float32).reshape(got.shape)
    assert np.array_equal(got, want), f"{np.count_nonzero(got != want)} differ"
    assert np.array_equal(got, np.asarray(outs["global"]["y"], np.float32).reshape(got.shape))
    # measured 2026-11-27 (F16 and BF16): 30,656 in 1 slice, 31,827 in 3, against 91,893 global
    assert cycles["group"] < 0.5 * cycles["global"]


def test_half_grouped_conv_buffer_holds_a_group_input(unit):
    """A 16-bit grouped convolution's scratch is getBufferSize_bm1684x's
    group part (136 -> 136 in 4 groups at 28x28: 34 input channels a
    group, one plane a lane of 800 aligned halves + 2: 1,604 bytes, the
    size TPU-MLIR gives shufflenet's F16 grouped convolutions)."""
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.ops import conv_buffer

    work, mlir, table = unit
    module, _, _, ops = lowered(work, mlir, table, "F16")
    plan = plan_chain(ops, NativeContext(module))
    assert conv_buffer(ops[2], plan) == 1604
