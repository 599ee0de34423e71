"""The local rule of a nearest Upsample (passes/native/local/upsample.py:
the vendor's upsample_local), as in ppocr_det's FPN: conv 3x3 + relu, a
nearest Resize x2 and an Add of a second input, planned as one group
(the upsample's index table a held coefficient), in INT8 (bit for bit)
and F16 against tpuc's TPU interpreter and against the global native
bmodel of the same ops; the group is never cut along H."""

from __future__ import annotations

import numpy as np
import pytest
from local_groups import lowered
from native_models import check, transformed
from onnx import helper, numpy_helper
from onnx_init import normal_init

from tpuc.base.errors import TpucError


@pytest.fixture(scope="module")
def fpn(tmp_path_factory):
    work = tmp_path_factory.mktemp("local_upsample")
    rng = np.random.default_rng(9)

    init = normal_init(rng)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c1"], ["r1"]),
        node("Resize", ["r1", "", "S"], ["u1"], mode="nearest"),
        node("Add", ["u1", "y"], ["z"]),
    ]
    inits = [
        init("W1", (16, 8, 3, 3)),
        init("B1", (16,), 1.0),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "S"),
    ]
    inputs = [("x", [1, 8, 10, 12]), ("y", [1, 16, 20, 24])]
    return (work, *transformed(work, "fpn", nodes, inputs, "z", inits))


def group_ops(module):
    from tpuc.dialects import tpu

    kinds = (tpu.Conv2DOp, tpu.UpsampleOp, tpu.AddOp)
    return [op for op in next(iter(module.ops)).body.block.ops if isinstance(op, kinds)]


@pytest.mark.parametrize("mode", ["INT8", "F16"])
def test_upsample_in_a_group(fpn, vendor, mode):
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import generate_native
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.target.vendor.run import run_native

    work, mlir, table = fpn
    module, expected, inputs, _ = lowered(work, mlir, table, mode)
    ops = group_ops(module)
    assert [op.name for op in ops] == ["tpu.Conv2D", "tpu.Upsample", "tpu.Add"]
    plan = plan_chain(ops, NativeContext(module))
    assert plan.hsecs == 1
    outs = []
    for name, groups in (("group", [plan]), ("global", [])):
        path = work / f"{mode}_{name}.bmodel"
        path.write_bytes(generate_native(module, vendor, profile=False, groups=groups).bmodel)
        outs.append(run_native(path, inputs, vendor, fixed=mode == "INT8"))
    check(run_native(work / f"{mode}_group.bmodel", inputs, vendor), expected, mode)
    for name in outs[0]:
        assert np.array_equal(outs[0][name], outs[1][name]), name


def test_the_index_table_is_tpu_mlirs():
    """index_table against the table TPU-MLIR 1.30.2 wrote for ppocr_det's
    10x10 -> 20x20 upsample (nearest_interp_v2_0.tmp_0_Resize_9_indices_
    reordered_trans, [1, 64, 1, 7]): lane 0 and lane 1, by hand."""
    from tpuc.passes.native.local.upsample import index_table

    table = index_table(20, 20, 2)
    assert table.shape == (64, 7) and table.dtype == np.uint16
    assert table[0].tolist() == [0, 12, 34, 46, 68, 80, 92]
    assert table[1].tolist() == [0, 12, 34, 46, 68, 80, 92]  # entry 65: row 3, col 5 -> 1*10+2
    assert table[2].tolist() == [1, 13, 35, 47, 69, 81, 93]
    assert table[:16, 6].tolist() == [92 + i // 2 for i in range(16)]  # entries 384..399
    assert table[16:, 6].tolist() == [0] * 48  # 400 entries padded to 448


def test_an_h_cut_is_refused(fpn):
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain

    work, mlir, table = fpn
    module, _, _, _ = lowered(work, mlir, table, "INT8")
    with pytest.raises(TpucError, match="not cut along H"):
        plan_chain(group_ops(module), NativeContext(module), hsecs=2)
