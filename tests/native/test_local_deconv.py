"""The local rule of an INT8 transposed convolution (passes/native/local/
deconv.py: the vendor's deconv_local into an int32 buffer, then its
per-channel requant_int_local): ppocr_det's head in small, conv 3x3 + relu,
ConvTranspose 2x2/2 (16->24) without bias, + a per-channel constant (the
bias as paddle2onnx writes it: a local Add with its weight held,
bias_add.py), a batch norm + relu (INT8: a depthwise 1x1 convolution; F16/BF16:
a Scale, local/scale.py), ConvTranspose 2x2/2 (24->1), planned
as one group cut into H slices (odd slice boundaries too, where an output
slice starts inside an input row's pair of rows), run in the vendor
runtime bit for bit against tpuc's TPU interpreter and against tpuc's
global native bmodel of the same ops."""

from __future__ import annotations

import numpy as np
import pytest
from local_groups import lowered
from native_models import check, transformed
from onnx import helper, numpy_helper
from onnx_init import normal_init


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    work = tmp_path_factory.mktemp("local_deconv")
    rng = np.random.default_rng(5)

    init = normal_init(rng)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c1"], ["r1"]),
        node("ConvTranspose", ["r1", "W2"], ["d1"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Add", ["d1", "C2"], ["a1"]),
        node("BatchNormalization", ["a1", "G3", "B3", "M3", "V3"], ["c3"]),
        node("Relu", ["c3"], ["r3"]),
        node("ConvTranspose", ["r3", "W4", "B4"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    inits = [
        init("W1", (16, 8, 3, 3)),
        init("B1", (16,), 1.0),
        init("W2", (16, 24, 2, 2)),
        init("C2", (1, 24, 1, 1), 0.5),
        init("G3", (24,), 1.0),
        init("B3", (24,), 0.5),
        init("M3", (24,), 0.2),
        numpy_helper.from_array(np.abs(rng.standard_normal(24)).astype("f4") + 0.5, "V3"),
        init("W4", (24, 1, 2, 2)),
        init("B4", (1,), 0.5),
    ]
    return (work, *transformed(work, "head", nodes, [("x", [1, 8, 10, 12])], "y", inits))


def group_ops(module):
    from tpuc.dialects import tpu

    return [
        op
        for op in next(iter(module.ops)).body.block.ops
        if isinstance(op, (tpu.Conv2DOp, tpu.DeconvOp, tpu.AddOp, tpu.ScaleOp))
    ]


@pytest.mark.parametrize("hsecs", [1, 3, 8])
def test_int8_deconv_head_in_h_slices(head, vendor, hsecs):
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import generate_native
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.target.vendor.run import run_native

    work, mlir, table = head
    module, expected, inputs, _ = lowered(work, mlir, table, "INT8")
    ops = group_ops(module)
    assert [op.name for op in ops] == [
        "tpu.Conv2D", "tpu.Deconv", "tpu.Add", "tpu.Conv2D", "tpu.Deconv"
    ]  # fmt: skip
    plan = plan_chain(ops, NativeContext(module), hsecs=hsecs)
    outs = []
    for name, groups in (("group", [plan]), ("global", [])):
        path = work / f"{name}_{hsecs}.bmodel"
        path.write_bytes(generate_native(module, vendor, profile=False, groups=groups).bmodel)
        outs.append(run_native(path, inputs, vendor, fixed=True))
    check(run_native(work / f"group_{hsecs}.bmodel", inputs, vendor), expected, "INT8")
    for name in outs[0]:
        assert np.array_equal(outs[0][name], outs[1][name]), name
    assert plan.steps == hsecs


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("hsecs", [1, 3])
def test_half_deconvs_in_h_slices(head, vendor, mode, hsecs):
    """F16/BF16: the whole head in one group (the batch norm + relu a float
    Scale, the bias Add of a half weight, the last deconv with its f32
    bias), bit for bit with the interpreter."""
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import generate_native
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.target.vendor.run import run_native

    work, mlir, table = head
    module, expected, inputs, _ = lowered(work, mlir, table, mode)
    ops = group_ops(module)
    assert [op.name for op in ops] == [
        "tpu.Conv2D", "tpu.Deconv", "tpu.Add", "tpu.Scale", "tpu.Deconv"
    ]  # fmt: skip
    plans = [plan_chain(ops, NativeContext(module), hsecs=hsecs)]
    path = work / f"{mode}_half_{hsecs}.bmodel"
    path.write_bytes(generate_native(module, vendor, profile=False, groups=plans).bmodel)
    check(run_native(path, inputs, vendor), expected, "INT8")  # bit for bit


@pytest.fixture(scope="module")
def head_sigmoid(tmp_path_factory):
    """The head with a sigmoid on its 1-channel map (ppocr_det's output)."""
    work = tmp_path_factory.mktemp("local_deconv_sigmoid")
    rng = np.random.default_rng(6)

    init = normal_init(rng)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c1"], ["r1"]),
        node("ConvTranspose", ["r1", "W2"], ["d1"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Add", ["d1", "C2"], ["a1"]),
        node("Conv", ["a1", "W3", "B3"], ["c3"], kernel_shape=[1, 1], group=24),
        node("Relu", ["c3"], ["r3"]),
        node("ConvTranspose", ["r3", "W4", "B4"], ["d2"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Sigmoid", ["d2"], ["y"]),
    ]
    inits = [
        init("W1", (16, 8, 3, 3)),
        init("B1", (16,), 1.0),
        init("W2", (16, 24, 2, 2)),
        init("C2", (1, 24, 1, 1), 0.5),
        init("W3", (24, 1, 1, 1), 1.0),
        init("B3", (24,), 0.5),
        init("W4", (24, 1, 2, 2)),
        init("B4", (1,), 0.5),
    ]
    return (work, *transformed(work, "heads", nodes, [("x", [1, 8, 16, 16])], "y", inits))


def test_deploy_groups_the_head_and_spreads_the_sigmoid(head_sigmoid, vendor, capsys):
    """model_deploy --codegen native: the deconvs and the bias Add in one
    group, the sigmoid's Lut and Cast on the 1x1x64x64 map viewed as
    1x64x... (spread.py) between two reshapes, bit for bit."""
    from tpuc.tools import model_deploy

    work, mlir, table = head_sigmoid
    argv = ["--mlir", mlir, "--chip", "bm1684x", "--quantize", "INT8", "--calibration_table"]
    argv += [table, "--test_input", str(work / "in.npz"), "--tolerance", "0.9,0.5"]
    argv += ["--codegen", "native", "--model", str(work / "m.bmodel")]
    assert model_deploy.run(argv) == 0
    said = capsys.readouterr().out
    assert "bmodel matches the TPU interpreter" in said  # an f32 output: compared again below
    final = (work / "heads_bm1684x_int8_sym_final.mlir").read_text()
    assert final.count('"tpu.Reshape"') == 2
    assert "tensor<1x64x" in final.split('"tpu.Lut"')[-1].split("\n")[0]
    group = final[final.index('"tpu.Group"') :]
    assert group.count('"tpu.Deconv"') == 2 and '"tpu.Add"' in group
    native = dict(np.load(work / "heads_bm1684x_int8_sym_model_outputs.npz"))
    interp = dict(np.load(work / "heads_bm1684x_int8_sym_tpu_outputs.npz"))
    for name, value in native.items():
        assert np.array_equal(value, interp[name]), name
