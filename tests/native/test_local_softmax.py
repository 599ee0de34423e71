"""The local Softmax (passes/native/local/softmax.py) and the long-row
softmax the native target runs as a layer group of its own
(passes/native/softmax.py `softmax_group`), bit for bit against tpuc's TPU
interpreter in the vendor runtime.

The chip's local kernel sums a row in two stages at any length, the global
one only up to 4,096 (`chip_float.two_stage`): ppocr_rec's classifier
softmax, [1, 40, 6625], runs locally and the interpreter sums it so. Whole
nets measured 2026-11-27 (vendor cycles): f32 softmax alone 71,225 global
-> 57,592 local; F16 140,552 -> 99,219."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import locate_vendor, native_run_and_cycles, node, save_onnx

CLASSES = 6625  # ppocr_rec's


def exact(got, expected) -> None:
    chip = np.asarray(got)
    tpuc = np.asarray(expected).reshape(chip.shape)
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"


@pytest.mark.parametrize(
    "shape, two",
    [
        ((1, 40, 6625), True),  # one row a lane
        ((1, 40, 3000), True),  # the global kernel's two stages
        ((1, 200, 6625), False),  # 4 rows a lane: over LOCAL_ROW_MAX
        ((2, 40, 6625), False),  # N > 1
        ((40, 6625), False),  # rank 2
        ((1, 64, 8192), True),
        ((1, 65, 8192), False),
    ],
)
def test_two_stage(shape, two):
    from tpuc.kernels.chip_float import two_stage

    assert two_stage(shape, len(shape) - 1) is two


@pytest.mark.parametrize("mode", ["INT8", "F16", "BF16"])
def test_classifier_softmax(tmp_path, mode):
    """ppocr_rec's head: [1, 40, 120] x [120, 6625] + bias, Softmax over the
    classes, the output cast to f32, all in one group: INT8 the fc's int32
    sums cast and scaled there (tpuc's float epilogue, deferred_epilogue);
    F16/BF16 the fc's half form (half_fc) and the softmax's casts."""
    from tpuc.dialects import tpu
    from tpuc.passes.native.softmax import absorbed_cast, deferred_epilogue, half_fc

    rng = np.random.default_rng(3)
    feeds = {"a": rng.standard_normal((1, 40, 120)).astype("f4")}
    inits = [
        ("w", (rng.standard_normal((120, CLASSES)) * 0.2).astype("f4")),
        ("b", (rng.standard_normal(CLASSES) * 0.5).astype("f4")),
    ]
    nodes = [node("MatMul", ["a", "w"], ["m"]), node("Add", ["m", "b"], ["s"]),
             node("Softmax", ["s"], ["y"], axis=-1)]  # fmt: skip
    held = []
    run, _ = native_run_and_cycles(tmp_path, nodes, feeds, ["y"], mode, inits,
                                   all_global=True, tweak=held.append)  # fmt: skip
    softmax = next(op for op in next(iter(held[0].ops)).body.block.ops
                   if isinstance(op, tpu.SoftmaxOp))  # fmt: skip
    fc = deferred_epilogue(softmax) if mode == "INT8" else half_fc(softmax)
    assert isinstance(fc, tpu.MatMulOp)
    assert (absorbed_cast(softmax) is None) == (mode == "INT8")
    exact(run.got["y"], run.expected["y"])


@pytest.mark.parametrize("mode", ["F32", "F16", "BF16"])
def test_long_row_softmax(tmp_path, mode):
    """[1, 40, 6625] alone: f32, and f16/bf16 cast to f32 and back locally,
    the output's cast to f32 in the same group."""
    from tpuc.dialects import tpu
    from tpuc.passes.native.softmax import absorbed_cast

    rng = np.random.default_rng(1)
    feeds = {"a": (rng.standard_normal((1, 40, CLASSES)) * 3).astype("f4")}
    nodes = [node("Softmax", ["a"], ["y"], axis=-1)]
    held = []
    run, _ = native_run_and_cycles(tmp_path, nodes, feeds, ["y"], mode, all_global=True,
                                   tweak=held.append)  # fmt: skip
    softmax = next(op for op in next(iter(held[0].ops)).body.block.ops
                   if isinstance(op, tpu.SoftmaxOp))  # fmt: skip
    assert (absorbed_cast(softmax) is None) == (mode == "F32")
    exact(run.got["y"], run.expected["y"])


@pytest.mark.parametrize("mode", ["F32", "F16"])
@pytest.mark.parametrize("shape, nsecs", [((1, 8, 300), 1), ((3, 8, 300), 3), ((1, 4, 6, 50), 1)])
def test_local_softmax_in_plan(tmp_path, mode, shape, nsecs):
    """The local rule in a plan of its own (rows along H as W; over W of a
    4-D tensor; N slices) against the interpreter and the global kernel."""
    from tpuc.dialects import tpu
    from tpuc.frontends.onnx.converter import convert_onnx
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import generate_native
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.target.vendor.run import run_native
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import finalize, run_passes, transform_passes

    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    path = save_onnx(tmp_path / "m.onnx", [node("Softmax", ["a"], ["y"], axis=-1)],
                     {"a": x}, ["y"], [], 14)  # fmt: skip
    module, weights = convert_onnx(path, "m")
    store = WeightStore(weights)
    attach_weights(module, store)
    run_passes(module, transform_passes())
    lower(module, "bm1684x", mode, False, None, None)
    expected = run_tpu(module, store, {"a": x})
    finalize(module, store, "bm1684x", 2, True)
    ops = [op for op in next(iter(module.ops)).body.block.ops if isinstance(op, tpu.SoftmaxOp)]
    vendor = locate_vendor()
    outs = []
    for name, groups in (("group", [plan_chain(ops, NativeContext(module), nsecs=nsecs)]),
                         ("global", [])):  # fmt: skip
        bmodel = tmp_path / f"{name}.bmodel"
        bmodel.write_bytes(generate_native(module, vendor, profile=False, groups=groups).bmodel)
        outs.append(run_native(bmodel, {"a": x}, vendor))
    name = next(iter(outs[0]))
    exact(outs[0][name], expected[name])
    exact(outs[0][name], outs[1][name])
