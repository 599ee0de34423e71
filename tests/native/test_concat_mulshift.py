"""bm1684x's INT8 Concat rescale, the chip's MulShift: each rescaled input
is round((q·M) >> r) half up with a u8 multiplier M and its own rshift r,
saturated to the output's 8-bit type (TPU-MLIR's do_transfer MulShift
before its Concat; the lowering's per-term form). Every int8 value of two
inputs goes through the vendor runtime's concat, as one native layer group
(backend_api_mulshift_local, then backend_api_concat_local) and as global
layers (backend_api_mulshift_global into the concat's windows), and
through the TPU interpreter with the pairs set by hand (rounding ties of
negative and positive values, saturation, the identity); all must equal
the integer formula computed here. A u8 input (a Relu's) rescaled into an
i8 result is checked against the interpreter. The lowering gives a
densenet-like rescale its u8 pair and half-up rounding."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import cali_table, node, save_onnx

STEP = 0.05  # inputs are q·STEP, calibrated to a scale of STEP: q exact
Q = np.arange(-127, 128)
SHAPES = {"a": (1, 96, 15, 17), "b": (1, 32, 15, 17)}  # a past the 64 lanes


def grid(shape, shift: int) -> np.ndarray:
    """Every stored value -127..127, cycled (rolled by `shift`) over `shape`."""
    return np.resize(np.roll(Q, shift), shape).astype(np.int64)


def term(q: np.ndarray, m: int, r: int) -> np.ndarray:
    """(q·M + 2^(r−1)) >> r: the chip's half-up rounding."""
    x = q.astype(np.int64) * m
    return (x + (1 << (r - 1))) >> r if r else x


def lowered(tmp, pairs, relu: bool):
    """(module, store, feeds, output scale): Concat(a, b) lowered for
    bm1684x INT8 with `pairs` set by hand (a through a Relu when `relu`)."""
    from tpuc.dialects import tpu
    from tpuc.frontends.onnx.converter import convert_onnx
    from tpuc.ir.core import element_of, main_function
    from tpuc.ir.qparams import QuantParams
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import run_passes, transform_passes

    feeds = {
        n: (grid(s, 7 * i) * STEP).astype(np.float32) for i, (n, s) in enumerate(SHAPES.items())
    }
    first = "a"
    nodes = []
    if relu:
        nodes.append(node("Relu", ["a"], ["ra"]))
        first = "ra"
    nodes.append(node("Concat", [first, "b"], ["y"], axis=1))
    shape = (1, 128, 15, 17)
    path = save_onnx(tmp / "m.onnx", nodes, feeds, {"y": shape})
    module, weights = convert_onnx(path, "m")
    store = WeightStore(weights)
    attach_weights(module, store)
    run_passes(module, transform_passes())
    lower(module, "bm1684x", "INT8", cali_table=cali_table(tmp, module, store, feeds))
    cat = next(op for op in main_function(module).body.block.ops if isinstance(op, tpu.ConcatOp))
    cat.set_value("multiplier", [m for m, _ in pairs])
    cat.set_value("rshift", [r for _, r in pairs])
    cat.set_value("round_mode", "HalfUp")
    scale = QuantParams.of(element_of(cat.results[0])).scale
    return module, store, feeds, scale


def native_outputs(tmp, module, store, feeds, vendor) -> tuple[dict, dict, dict]:
    """(interpreter, group, global) outputs; the group is every op but the
    output cast, planned by plan_chain."""
    from tpuc.dialects import top
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.core import main_function
    from tpuc.ir.weights import WeightStore
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.data import concat_calls
    from tpuc.passes.native.emit import generate_native
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.concat import concat_command
    from tpuc.target.vendor.run import run_native
    from tpuc.workflow.pipeline import finalize

    expected = run_tpu(module, store, feeds)
    finalize(module, WeightStore(store), "bm1684x", 2, True)
    skip = (top.WeightOp, top.NoneOp)
    ops = [op for op in main_function(module).body.block.ops
           if op.name.startswith("tpu.") and not isinstance(op, skip)]  # fmt: skip
    cut = [i for i, op in enumerate(ops) if op.name == "tpu.Concat"][0] + 1
    ctx = NativeContext(module)
    plan = plan_chain(ops[:cut], ctx)
    cat = ops[cut - 1]
    local = {command[2] for command in concat_command(cat, ctx, plan, 0)}
    assert local == {"backend_api_mulshift_local", "backend_api_concat_local"}
    assert "backend_api_mulshift_global" in {call.function for call in concat_calls(cat, ctx)}
    outs = []
    for name, groups in (("group", [plan]), ("global", [])):
        path = tmp / f"{name}.bmodel"
        path.write_bytes(generate_native(module, vendor, profile=False, groups=groups).bmodel)
        outs.append(run_native(path, feeds, vendor))
    return expected, outs[0], outs[1]


def ints(outputs: dict, scale: float) -> np.ndarray:
    return np.rint(np.asarray(outputs["y"], np.float64) / scale).astype(np.int64)


CASES = {
    "ties": ((128, 8), (192, 9)),  # q/2 and 3q/8: every half, both signs
    "saturate": ((255, 0), (200, 3)),  # 255q and 25q: past both ends
    "densenet": ((219, 8), (1, 0)),  # a 0.855 rescale beside a copy
}


@pytest.mark.parametrize("name", list(CASES))
def test_concat_mulshift_bit_exact(tmp_path, vendor, name):
    pairs = CASES[name]
    module, store, feeds, scale = lowered(tmp_path, pairs, relu=False)
    expected, group, glob = native_outputs(tmp_path, module, store, feeds, vendor)
    qa, qb = grid(SHAPES["a"], 0), grid(SHAPES["b"], 7)
    want = np.concatenate([np.clip(term(q, m, r), -128, 127) for q, (m, r)
                           in zip((qa, qb), pairs, strict=True)], axis=1)  # fmt: skip
    for label, got in (("tpuc", expected), ("group", group), ("global", glob)):
        found = ints(got, scale)
        assert np.array_equal(found, want), f"{label}: {np.count_nonzero(found != want)} differ"


def test_unsigned_input_bit_exact(tmp_path, vendor):
    """A Relu's u8 values (up to 255) times 200 >> 7 into an i8 result."""
    module, store, feeds, _ = lowered(tmp_path, ((200, 7), (1, 0)), relu=True)
    expected, group, glob = native_outputs(tmp_path, module, store, feeds, vendor)
    for got in (group, glob):
        assert np.array_equal(np.asarray(got["y"]), np.asarray(expected["y"]))


def test_lowering_gives_the_mulshift_pair(tmp_path):
    """S_a/S_out = 0.855 -> 219/2^8 (u8 in [128, 256)), half up; b shares
    the output's scale: (1, 0)."""
    from tpuc.dialects import tpu
    from tpuc.ir.core import main_function

    module, *_ = lowered_default(tmp_path)
    cat = next(op for op in main_function(module).body.block.ops if isinstance(op, tpu.ConcatOp))
    assert cat.value("multiplier") == [219, 1] and cat.value("rshift") == [8, 0]
    assert cat.value("round_mode") == "HalfUp"


def lowered_default(tmp):
    """Concat(a, b) with a calibrated to 0.855 of b's range (b's is the output's)."""
    from tpuc.frontends.onnx.converter import convert_onnx
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import run_passes, transform_passes

    feeds = {"a": (grid(SHAPES["a"], 0) * STEP * 0.855).astype(np.float32),
             "b": (grid(SHAPES["b"], 7) * STEP).astype(np.float32)}  # fmt: skip
    path = save_onnx(tmp / "m.onnx", [node("Concat", ["a", "b"], ["y"], axis=1)], feeds,
                     {"y": (1, 128, 15, 17)})  # fmt: skip
    module, weights = convert_onnx(path, "m")
    store = WeightStore(weights)
    attach_weights(module, store)
    run_passes(module, transform_passes())
    lower(module, "bm1684x", "INT8", cali_table=cali_table(tmp, module, store, feeds))
    return module, store, feeds
