"""INT8 grouped (not depthwise) convolutions in native layer groups: the
local kernel's own groups (`conv_local_spec_t.common.groups`) over the
global rule's merged coefficient, as a ShuffleNet unit uses them (1x1
group-4 convolution + relu, depthwise 3x3, 1x1 group-4 convolution),
bit for bit against tpuc's TPU interpreter and the global native bmodel,
in 1 and 3 H slices, with the group's vendor cycles below the global
layers'. A float grouped convolution stays a global layer (the local
kernel reads the blocked half-float filter otherwise: cosine 0.91)."""

from __future__ import annotations

import numpy as np
import pytest
from local_groups import lowered
from native_models import check, transformed
from onnx import helper, numpy_helper


@pytest.fixture(scope="module")
def unit(tmp_path_factory):
    """(work, mlir, cali table) of 24 -> 136 channels in 4 groups (+relu),
    depthwise 3x3, 136 -> 136 in 4 groups, on 1x24x28x28: 34 channels per
    group, so groups start mid-lane."""
    work = tmp_path_factory.mktemp("grouped_conv")
    rng = np.random.default_rng(7)

    def init(name, shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)

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
    channel a lane holds (24 -> 136 in 4 groups at 28x28: 6 input channels
    a group, one plane a lane: 832 + 2 bytes; the sums 3 planes of 832
    int32)."""
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.ops import conv_buffer

    work, mlir, table = unit
    module, _, _, ops = lowered(work, mlir, table, "INT8")
    plan = plan_chain(ops, NativeContext(module))
    assert conv_buffer(ops[0], plan) == 3 * 832 * 4 + 832 + 2


def test_float_grouped_conv_stays_global(unit):
    from tpuc.passes.native.context import NativeContext, NotExpressible
    from tpuc.passes.native.local.chain import plan_chain

    work, mlir, table = unit
    module, _, _, ops = lowered(work, mlir, table, "F16")
    with pytest.raises(NotExpressible, match="grouped"):
        plan_chain(ops[:1], NativeContext(module))
