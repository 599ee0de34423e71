"""An INT8 layer read by an F16/BF16 one (a quantize table, or the automatic
mix, keeps ppocr_det's hard-swish after its stem in F16): the Cast INT8 ->
f16/bf16 is a local op (quantize.py's dequantize form:
dequant_float_local with the half output type), so the INT8 convolution's
group stores the half tensor instead of a global Cast reading it back.
A conv + relu, a 2x2 max pool (INT8: a convolution would take the half
result into its own epilogue) and a conv in `mode` by a quantize table;
the first convolution, the pool and the Cast planned as one group in H
slices, bit for bit against tpuc's TPU interpreter and the global native
bmodel."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import check, transformed
from onnx import helper, numpy_helper


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    work = tmp_path_factory.mktemp("local_dequant_half")
    rng = np.random.default_rng(8)

    def init(name, shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c1"], ["r1"]),
        node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["p1", "W2", "B2"], ["r2"], pads=[1] * 4, kernel_shape=[3, 3]),
    ]
    inits = [
        init("W1", (16, 8, 3, 3)),
        init("B1", (16,), 1.0),
        init("W2", (16, 16, 3, 3), 0.1),
        init("B2", (16,), 1.0),
    ]
    return (work, *transformed(work, "dq", nodes, [("x", [1, 8, 24, 12])], "r2", inits))


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("hsecs", [1, 3])
def test_int8_conv_then_half_cast_in_one_group(chain, vendor, mode, hsecs):
    from tpuc.dialects import tpu
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.module_io import load_module
    from tpuc.ir.weights import WeightStore
    from tpuc.passes.native.context import NativeContext, dtype_name
    from tpuc.passes.native.emit import generate_native
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.target.vendor.run import run_native
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import finalize

    work, mlir, table = chain
    qtable = work / f"qtable_{mode}"
    qtable.write_text(f"r2 {mode}\n")  # the second conv, named by its output
    module, store = load_module(mlir)
    lower(module, "bm1684x", "INT8", False, table, str(qtable))
    inputs = dict(np.load(work / "in.npz"))
    expected = run_tpu(module, store, inputs)
    finalize(module, WeightStore(store), "bm1684x", 2, True)
    body = list(next(iter(module.ops)).body.block.ops)
    conv = next(op for op in body if isinstance(op, tpu.Conv2DOp))
    pool = next(use.operation for use in conv.results[0].uses)
    cast = next(use.operation for use in pool.results[0].uses)
    assert isinstance(cast, tpu.CastOp) and dtype_name(cast.results[0]) == mode.lower()
    plan = plan_chain([conv, pool, cast], NativeContext(module), hsecs=hsecs)
    outs = []
    for name, groups in (("group", [plan]), ("global", [])):
        path = work / f"{mode}_{name}_{hsecs}.bmodel"
        path.write_bytes(generate_native(module, vendor, profile=False, groups=groups).bmodel)
        outs.append(run_native(path, inputs, vendor, fixed=True))
    check(run_native(work / f"{mode}_group_{hsecs}.bmodel", inputs, vendor), expected, "INT8")
    for name in outs[0]:
        assert np.array_equal(outs[0][name], outs[1][name]), name
