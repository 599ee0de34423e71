"""tpu.Cast and the data-movement ops through the native target (the vendor
backend and its chip model) against tpuc's TPU interpreter: INT8 bit for
bit, floats with cosine >= 0.99999.

- `edges`: a reshape between the input cast and the output cast, fed values
  at every half step of the input scale (the quantize's ties: the chip
  multiplies by the f32 reciprocal of the scale and rounds half away from
  zero) plus random ones;
- `moves`: two concats (one on axis 1, one on the last axis, each with an
  input of another scale, so INT8 rescales it), a transpose, a strided
  slice, a pad, a nearest upsample and a depth-to-space.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from native_models import calibrate, check, run_both, save_onnx, transformed
from onnx import helper, numpy_helper

GAINS = {"z": 4.0, "w": 0.25}


def input_scale(module) -> float | None:
    """The scale the first input is quantized to (None in float modes)."""
    from tpuc.dialects import tpu
    from tpuc.ir.core import main_function
    from tpuc.passes.native.context import quant_of

    for op in main_function(module).body.block.ops:
        if isinstance(op, tpu.CastOp) and quant_of(op.results[0]) is not None:
            return quant_of(op.results[0]).scale
    return None


def half_steps(shape, scale: float) -> np.ndarray:
    """Every half step of `scale` around 0 (past saturation), a few random values."""
    size = int(np.prod(shape))
    x = ((np.arange(size) - size // 2) * 0.5 * scale * 2.2).astype("f4")
    x[: size // 2] = ((np.arange(size // 2) - size // 4) * 0.5 * scale).astype("f4")
    x[::9] = np.random.default_rng(3).standard_normal(x[::9].size).astype("f4")
    return x.reshape(shape)


def half_step_feeds(module, inputs: dict) -> dict:
    """The inputs replaced by half_steps of the input scale (INT8 only)."""
    scale = input_scale(module)
    return inputs if scale is None else {n: half_steps(a.shape, scale) for n, a in inputs.items()}


def ints(name: str, values) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


@pytest.fixture(scope="module")
def edges_model(tmp_path_factory):
    work = tmp_path_factory.mktemp("native_edges")
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"])]
    inits = [ints("s", [1, 512])]
    return work, *transformed(work, "edges", nodes, [("x", [1, 4, 8, 16])], ["y"], inits)


@pytest.fixture(scope="module")
def moves_model(tmp_path_factory):
    work = tmp_path_factory.mktemp("native_moves")
    node = helper.make_node
    nodes = [
        node("Concat", ["x", "z"], ["c1"], axis=1),  # [1, 6, 6, 8]
        node("Transpose", ["c1"], ["t"], perm=[0, 2, 3, 1]),  # [1, 6, 8, 6]
        node("Concat", ["t", "w"], ["c2"], axis=3),  # [1, 6, 8, 8]
        node("Slice", ["c2", "st", "en", "ax", "sp"], ["s"]),  # [1, 4, 4, 8]
        node("Pad", ["s", "p"], ["y1"]),  # [1, 4, 7, 9]
        node("Resize", ["x", "", "sc"], ["y2"], mode="nearest"),  # [1, 4, 12, 16]
        node("DepthToSpace", ["x"], ["y3"], blocksize=2, mode="CRD"),  # [1, 1, 12, 16]
    ]
    inits = [
        ints("st", [1, 0]),
        ints("en", [5, 8]),
        ints("ax", [1, 2]),
        ints("sp", [1, 2]),
        ints("p", [0, 0, 2, 0, 0, 0, 1, 1]),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc"),
    ]
    inputs = [("x", [1, 4, 6, 8]), ("z", [1, 2, 6, 8]), ("w", [1, 6, 8, 2])]
    return work, *transformed(work, "moves", nodes, inputs, ["y1", "y2", "y3"], inits, gains=GAINS)


@pytest.mark.parametrize("mode", ["INT8", "F16", "BF16"])
def test_cast_edges(edges_model, vendor, mode):
    check(*run_both(*edges_model, mode, vendor, feeds=half_step_feeds), mode)


@pytest.mark.parametrize("mode", ["INT8", "F16", "BF16", "F32"])
def test_data_moves(moves_model, vendor, mode):
    check(*run_both(*moves_model, mode, vendor), mode)


@pytest.mark.parametrize("mode", ["F32", "BF16", "INT8"])
def test_concat_with_fused_relu(tmp_path, vendor, mode):
    """Concat -> Relu fuses into the concat (shufflenet's branches); natively
    a relu in place on the output (none for an unsigned INT8 output)."""
    from tpuc.tools import model_deploy, model_transform, run_calibration

    nodes = [
        helper.make_node("Concat", ["a", "b"], ["c"], axis=1, name="cat"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Mul", ["r", "k"], ["o"], name="mul"),
    ]
    k = ("k", np.full((1, 8, 1, 1), 0.7, np.float32))
    ins = [(n, [1, 4, 8, 8]) for n in "ab"]
    save_onnx(tmp_path / "cr.onnx", nodes, ins, [("o", [1, 8, 8, 8])], [k])
    rng = np.random.default_rng(0)
    (tmp_path / "cali").mkdir()
    for i in range(3):
        arrays = {n: rng.standard_normal((1, 4, 8, 8)).astype("f4") for n in "ab"}
        np.savez(tmp_path / "cali" / f"s{i}.npz", **arrays)
    mlir, sample = str(tmp_path / "cr.mlir"), str(tmp_path / "cali" / "s0.npz")
    top = str(tmp_path / "top.npz")
    argv = ["--model_name", "cr", "--model_def", str(tmp_path / "cr.onnx"), "--mlir", mlir]
    assert model_transform.run([*argv, "--test_input", sample, "--test_result", top]) == 0
    table = str(tmp_path / "cr_cali")
    assert run_calibration.run([mlir, "--dataset", str(tmp_path / "cali"), "-o", table]) == 0
    argv = ["--mlir", mlir, "--chip", "bm1684x", "--quantize", mode, "--calibration_table", table]
    argv += ["--test_input", sample, "--test_reference", top, "--tolerance", "0.9,0.5"]
    argv += ["--codegen", "native", "--model", str(tmp_path / f"cr_{mode}.bmodel")]
    assert model_deploy.run(argv) == 0  # checks the vendor runtime against the interpreter


def half_ties(mode: str) -> np.ndarray:
    """f32 values exactly halfway between neighbouring f16 (or bf16) values,
    every 7th pair over the whole finite range (f16 subnormals, f32
    subnormals for bf16), both signs, [1, 64, n]."""
    if mode == "F16":
        low = np.arange(0, 0x7BFF, 7, dtype=np.uint16).view(np.float16)
        high = np.nextafter(low, np.float16(np.inf))
    else:
        bits = np.arange(0, 0x7F7F, 7, dtype=np.uint32) << 16
        low, high = bits.view(np.float32), (bits + (1 << 16)).view(np.float32)
    mid = ((low.astype(np.float64) + high.astype(np.float64)) / 2).astype(np.float32)
    x = np.concatenate([mid, -mid])
    return x[: x.size - x.size % 64].reshape(1, 64, -1)


def with_cast_round_mode(round_mode: str | None):
    """A run_both tweak: every tpu.Cast of the module gets `round_mode`."""

    def tweak(module) -> None:
        from tpuc.dialects import tpu
        from tpuc.ir.core import main_function

        for op in main_function(module).body.block.ops:
            if isinstance(op, tpu.CastOp) and round_mode is not None:
                op.set_value("round_mode", round_mode)

    return tweak


@pytest.mark.parametrize("round_mode", [None, "HalfToEven", "Down"])
@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_half_cast_rounds_ties_with_its_round_mode(tmp_path, vendor, mode, round_mode):
    """The chip's f32 -> f16/bf16 cast rounds with the Cast's round mode
    (None: the default, HalfAwayFromZero: ties away from zero, where numpy
    rounds to even) and flushes f32 subnormals in bf16 (chip_cast.py): bit
    for bit over every kind of tie, through a transpose."""
    x = half_ties(mode)
    nodes = [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1])]
    save_onnx(tmp_path / "t.onnx", nodes, [("x", x.shape)], ["y"])
    np.savez(tmp_path / "in.npz", x=x)
    (tmp_path / "samples").mkdir()
    np.savez(tmp_path / "samples" / "s0.npz", x=x)
    mlir, table = calibrate(tmp_path, "t")
    got, expected = run_both(tmp_path, mlir, table, mode, vendor,
                             tweak=with_cast_round_mode(round_mode))  # fmt: skip
    a, b = np.asarray(got["y"], np.float32).ravel(), np.asarray(expected["y"], np.float32).ravel()
    same = a.view(np.uint32) == b.view(np.uint32)
    assert same.all(), f"{np.count_nonzero(~same)} of {same.size} differ"
    if round_mode is None:  # every tie away from zero (numpy's nearest even: half of them not)
        ties = x.transpose(0, 2, 1).ravel()
        normal = np.abs(ties) >= 2.0**-126
        assert np.all(np.abs(a[normal]) > np.abs(ties[normal]))
        assert np.all(a[~normal] == 0)


def test_half_cast_refuses_a_round_mode_the_chip_lacks(tmp_path, vendor):
    """HalfUp: the vendor's cast asserts; the native target says so first."""
    from tpuc.base.errors import TpucError

    x = half_ties("F16")
    nodes = [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1])]
    save_onnx(tmp_path / "t.onnx", nodes, [("x", x.shape)], ["y"])
    np.savez(tmp_path / "in.npz", x=x)
    (tmp_path / "samples").mkdir()
    np.savez(tmp_path / "samples" / "s0.npz", x=x)
    mlir, table = calibrate(tmp_path, "t")
    with pytest.raises(TpucError, match=r"tpu.Cast .*round_mode HalfUp") as info:
        run_both(tmp_path, mlir, table, "F16", vendor, tweak=with_cast_round_mode("HalfUp"))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("half", ["F16", "BF16"])
def test_int8_net_with_a_half_layer_is_bit_exact(tmp_path, vendor, half):
    """An INT8 network with one layer kept in a half type (as auto mix keeps
    ppocr_det's p2o.Add.15/19): the INT8 -> half dequantize and the half ->
    INT8 quantize compute in the half type on the chip (chip_cast.py), so
    the output is bit for bit the interpreter's — every int8 value through
    both casts, at scales whose products are not half-exact."""
    x = np.linspace(-3.0, 3.0, 1 * 8 * 16 * 16, dtype=np.float32).reshape(1, 8, 16, 16)
    nodes = [
        helper.make_node("Mul", ["x", "k"], ["m"], name="scale_in"),
        helper.make_node("Add", ["m", "c"], ["a"], name="half_add"),
        helper.make_node("Mul", ["a", "k2"], ["y"], name="scale_out"),
    ]
    inits = [numpy_helper.from_array(np.float32(1.37), "k"),
             numpy_helper.from_array(np.float32(-0.5466), "c"),
             numpy_helper.from_array(np.float32(0.73), "k2")]  # fmt: skip
    save_onnx(tmp_path / "h.onnx", nodes, [("x", x.shape)], ["y"], inits)
    np.savez(tmp_path / "in.npz", x=x)
    (tmp_path / "samples").mkdir()
    np.savez(tmp_path / "samples" / "s0.npz", x=x)
    mlir, table = calibrate(tmp_path, "h")
    qtable = tmp_path / "qtable"
    qtable.write_text(f"a {half}\n")  # layers are named by their output
    got, expected = run_both(tmp_path, mlir, table, "INT8", vendor, qtable=str(qtable))
    check(got, expected, "INT8")
