"""model_deploy.py --quant_input/--quant_output (TPU-MLIR's flags) on the tiny
CNN: the bmodel's edges keep the stored int8 values, carry TPU-MLIR's scales
(an input's Tensor.scale is 1/S), and fed the int8 input derived from the
float one (npz_tool.py quant_input, checked against a hand-written
round-half-away-from-zero of x·f32(1/S)) give the int8 tensor the
flag-less deployment has before its final cast; model_runner.py quantizes a
float input itself and dequantizes (or, --out_fixed, keeps) the outputs; the
bad requests end with one line."""

from __future__ import annotations

import numpy as np
import pytest
from tools_helpers import one_line_error, run_main

from tpuc.tools import model_deploy, model_runner, npz_tool


def deploy(prepared, out, capsys, *extra, mode="INT8"):
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", mode]
    if mode == "INT8":
        argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
    argv += ["--test_input", str(prepared / "cnn_in_f32.npz"), "--model", str(out / "cnn.bmodel")]
    return run_main(model_deploy.main, argv + list(extra), capsys)


def run(main, argv, capsys):
    code, out, err = run_main(main, [str(a) for a in argv], capsys)
    assert code == 0, err
    return out


@pytest.fixture(scope="module")
def plain_and_quant(prepared, tmp_path_factory):
    """The INT8 deployment without and with --quant_input --quant_output
    (each folder's log.txt holds what model_deploy printed)."""
    import contextlib
    import io

    plain, quant = tmp_path_factory.mktemp("plain"), tmp_path_factory.mktemp("quant")
    for folder, extra in ((plain, []), (quant, ["--quant_input", "--quant_output"])):
        argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "INT8"]
        argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
        argv += ["--test_input", str(prepared / "cnn_in_f32.npz")]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert model_deploy.run([*argv, "--model", str(folder / "cnn.bmodel"), *extra]) == 0
        (folder / "log.txt").write_text(printed.getvalue())
    return plain, quant


def _scales(tpu_mlir):
    """S of the input Cast and of the output's pre-cast tensor in the plain TPU module."""
    from tpuc.dialects import tpu
    from tpuc.ir.core import element_of
    from tpuc.ir.module_io import load_module

    module, _ = load_module(tpu_mlir)
    casts = [op for op in module.walk() if isinstance(op, tpu.CastOp)]
    first, last = casts[0], casts[-1]
    return element_of(first.results[0]), element_of(last.operands[0]), last.operands[0]


def test_bmodel_edges_carry_tpu_mlirs_scales(plain_and_quant):
    from tpuc.target.bmodel import load_bmodel_file

    plain, quant = plain_and_quant
    log = (quant / "log.txt").read_text()
    assert "strip-io-quant: the bmodel keeps input 'x' (int8" in log
    assert "bmodel matches the TPU interpreter bit for bit (1 output(s))" in log
    in_type, out_type, out_value = _scales(plain / "cnn_bm1684x_int8_sym_tpu.mlir")
    param = load_bmodel_file(quant / "cnn.bmodel").nets[0].parameters[0]
    (x,), (y,) = param.inputs, param.outputs
    assert (x.name, x.dtype, x.zero_point) == ("x", "i8", 0)
    assert x.scale == np.float32(1.0 / in_type.scale)  # TPU-MLIR: 1/S for an input
    assert (y.name, y.dtype) == (out_value.owner.names[0], "i8")
    assert y.scale == np.float32(out_type.scale) and y.zero_point == out_type.zero_point
    final = (quant / "cnn_bm1684x_int8_sym_final.mlir").read_text()
    assert "tpu.Cast" not in final  # the TPU module keeps its casts, the final one not
    assert "tpu.Cast" in (quant / "cnn_bm1684x_int8_sym_tpu.mlir").read_text()


def test_int8_input_gives_the_plain_models_pre_cast_int8(
    prepared, plain_and_quant, tmp_path, capsys
):
    plain, quant = plain_and_quant
    in_type, out_type, out_value = _scales(plain / "cnn_bm1684x_int8_sym_tpu.mlir")
    out_name = out_value.owner.names[0]
    ref = tmp_path / "ref.npz"
    tpu_mlir = plain / "cnn_bm1684x_int8_sym_tpu.mlir"
    argv = ["--input", prepared / "cnn_in_f32.npz", "--model", tpu_mlir, "--output", ref]
    run(model_runner.main, [*argv, "--dump_all_tensors", "--out_fixed"], capsys)
    # the int8 input: npz_tool, against a hand-written quantization
    q_in = tmp_path / "in_i8.npz"
    run(
        npz_tool.main,
        ["quant_input", prepared / "cnn_in_f32.npz", quant / "cnn.bmodel", "-o", q_in],
        capsys,
    )
    x = np.load(prepared / "cnn_in_f32.npz")["x"]
    scaled = x * np.float32(1.0 / in_type.scale)
    hand = np.clip(np.sign(scaled) * np.floor(np.abs(scaled) + 0.5), -128, 127).astype(np.int8)
    with np.load(q_in) as got, np.load(ref) as want:
        assert got["x"].dtype == np.int8 and np.array_equal(got["x"], hand)
        assert np.array_equal(got["x"], want["x_i8"])  # the plain module's own Cast
        expected = want[out_name]
    # the bmodel on the int8 input: its int8 outputs, bit for bit
    fixed, real = tmp_path / "fixed.npz", tmp_path / "real.npz"
    bm = ["--model", quant / "cnn.bmodel"]
    run(model_runner.main, ["--input", q_in, *bm, "--out_fixed", "--output", fixed], capsys)
    run(model_runner.main, ["--input", prepared / "cnn_in_f32.npz", *bm, "--output", real], capsys)
    with np.load(fixed) as got, np.load(real) as deq:
        assert got[out_name].dtype == np.int8
        assert np.array_equal(got[out_name], expected.astype(np.int8))
        # a float input is quantized by model_runner; outputs dequantized S·(q − Z)
        want = (expected.astype(np.float32) - out_type.zero_point) * np.float32(out_type.scale)
        assert deq[out_name].dtype == np.float32 and np.array_equal(deq[out_name], want)
    with (
        np.load(quant / "cnn_bm1684x_int8_sym_model_outputs.npz") as bm_out,
        np.load(quant / "cnn_bm1684x_int8_sym_tpu_outputs.npz") as tpu_out,
    ):
        assert np.array_equal(bm_out[out_name], tpu_out[out_name])


def test_stripped_tpu_module_takes_int8_in_the_interpreter(plain_and_quant, tmp_path, capsys):
    """tpuc-opt's pass on a _tpu.mlir: the TPU interpreter takes int8 arrays as stored values."""
    from tpuc.tools import opt

    plain, _ = plain_and_quant
    stripped = plain / "stripped_tpu.mlir"
    pipeline = "strip-io-quant{quant_input=true quant_output=true}"
    run(opt.main, [plain / "cnn_bm1684x_int8_sym_tpu.mlir", "-p", pipeline, "-o", stripped], capsys)
    q = np.array([[[[-128, 0, 5, 127]]]], np.int8).repeat(3, 1).repeat(8, 2).repeat(2, 3)
    np.savez(tmp_path / "q.npz", x=q)
    np.savez(tmp_path / "f.npz", x=q.astype(np.float32))  # the same numbers as real values
    outs = []
    for name in ("q", "f"):
        argv = ["--input", tmp_path / f"{name}.npz", "--model", stripped, "--out_fixed"]
        run(model_runner.main, [*argv, "--output", tmp_path / f"{name}_out.npz"], capsys)
        outs.append(dict(np.load(tmp_path / f"{name}_out.npz")))
    (key,) = outs[0]
    assert not np.array_equal(outs[0][key], outs[1][key])  # int8 = stored, float = real


def test_f32_deployment_warns_and_keeps_float_edges(prepared, tmp_path, capsys):
    from tpuc.target.bmodel import load_bmodel_file

    code, out, err = deploy(
        prepared, tmp_path, capsys, "--quant_input", "--quant_output", mode="F32"
    )
    assert code == 0, err
    assert "warning: --quant_input: input 1 'x' stays as it is in F32: no Cast to remove" in out
    assert "warning: --quant_output: output 1" in out
    param = load_bmodel_file(tmp_path / "cnn.bmodel").nets[0].parameters[0]
    assert [d.dtype for d in param.inputs + param.outputs] == ["f32", "f32"]


def test_f16_keeps_f16_edges_as_tpu_mlir(prepared, tmp_path, capsys):
    from tpuc.target.bmodel import load_bmodel_file

    code, out, err = deploy(
        prepared, tmp_path, capsys, "--quant_input", "--quant_output", mode="F16"
    )
    assert code == 0, err
    assert "bmodel matches the TPU interpreter bit for bit" in out
    param = load_bmodel_file(tmp_path / "cnn.bmodel").nets[0].parameters[0]
    assert [d.dtype for d in param.inputs + param.outputs] == ["f16", "f16"]


def test_a_list_without_its_flag_is_ignored_with_a_warning(prepared, tmp_path, capsys):
    code, out, err = deploy(prepared, tmp_path, capsys, "--quant_output_list", "1")
    assert code == 0, err
    assert "warning: --quant_output_list is ignored without --quant_output" in out


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--quant_input", "--quant_input_list", "2"], "--quant_input_list: 2 out of range; "
         "the network has 1 input(s), numbered from 1"),
        (["--quant_output", "--quant_output_list", "1,3"], "--quant_output_list: 3 out of range"),
        (["--quant_input", "--quant_input_list", "a"], "--quant_input_list: 'a' is not an index"),
    ],
)  # fmt: skip
def test_bad_lists_leave_nothing(prepared, tmp_path, capsys, extra, needle):
    out = tmp_path / "out"
    code, _, err = deploy(prepared, out, capsys, *extra)
    assert code == 1
    assert needle in one_line_error(err)
    assert not out.exists() or not any(out.iterdir())


def test_runner_refuses_stored_values_outside_the_type(plain_and_quant, tmp_path, capsys):
    _, quant = plain_and_quant
    np.savez(tmp_path / "big.npz", x=np.full((1, 3, 8, 8), 200, np.int16))
    argv = ["--input", str(tmp_path / "big.npz"), "--model", str(quant / "cnn.bmodel")]
    code, _, err = run_main(model_runner.main, argv, capsys)
    assert code == 1
    assert "input 'x': stored values 200..200 outside i8's [-128, 127]" in one_line_error(err)
