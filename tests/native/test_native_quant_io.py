"""--quant_input/--quant_output on the native target: the chip's own bmodel
keeps int8 edges with TPU-MLIR's scales (an input stores 1/S), the vendor
runtime fed the int8 input (npz_tool.py quant_input) returns the int8 tensor
the flag-less deployment has before its final cast, and the flag-less native
bmodel's float output is that tensor dequantized.

Fails, not skips, without the vendor cache (native_models' `vendor` fixture).
"""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.tools import model_deploy, model_runner, npz_tool


def deploy(prepared, folder, *extra) -> None:
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "INT8"]
    argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
    argv += ["--test_input", str(prepared / "cnn_in_f32.npz"), "--codegen", "native"]
    assert model_deploy.run([*argv, "--model", str(folder / "cnn.bmodel"), *extra]) == 0


@pytest.fixture(scope="module")
def native_pair(prepared, vendor, tmp_path_factory):
    plain, quant = tmp_path_factory.mktemp("nplain"), tmp_path_factory.mktemp("nquant")
    deploy(prepared, plain)
    deploy(prepared, quant, "--quant_input", "--quant_output")
    return plain, quant


def test_native_int8_edges_match_the_plain_pre_cast_tensor(prepared, vendor, native_pair, tmp_path):
    from tpuc.dialects import tpu
    from tpuc.ir.core import element_of
    from tpuc.ir.module_io import load_module
    from tpuc.target.bmodel.native import read_native_io

    plain, quant = native_pair
    tpu_mlir = plain / "cnn_bm1684x_int8_sym_tpu.mlir"
    module, _ = load_module(tpu_mlir)
    casts = [op for op in module.walk() if isinstance(op, tpu.CastOp)]
    s_in, s_out = element_of(casts[0].results[0]), element_of(casts[-1].operands[0])
    out_name = casts[-1].operands[0].owner.names[0]
    io = read_native_io((quant / "cnn.bmodel").read_bytes(), vendor.bmodel_fbs, "cnn.bmodel")
    (x,), (y,) = io.inputs, io.outputs
    assert (x.dtype, x.scale) == ("i8", np.float32(1.0 / s_in.scale))
    assert (y.name, y.dtype, y.scale) == (out_name, "i8", np.float32(s_out.scale))

    f32_in = prepared / "cnn_in_f32.npz"
    ref, q_in, q_out = tmp_path / "ref.npz", tmp_path / "q_in.npz", tmp_path / "q_out.npz"
    argv = ["--input", str(f32_in), "--model", str(tpu_mlir), "--output", str(ref)]
    assert model_runner.run([*argv, "--dump_all_tensors", "--out_fixed"]) == 0
    assert (
        npz_tool.run(["quant_input", str(f32_in), str(quant / "cnn.bmodel"), "-o", str(q_in)]) == 0
    )
    argv = ["--input", str(q_in), "--model", str(quant / "cnn.bmodel"), "--out_fixed"]
    assert model_runner.run([*argv, "--output", str(q_out)]) == 0
    plain_out = tmp_path / "plain_out.npz"
    argv = ["--input", str(f32_in), "--model", str(plain / "cnn.bmodel")]
    assert model_runner.run([*argv, "--output", str(plain_out)]) == 0
    with np.load(ref) as want, np.load(q_in) as fed, np.load(q_out) as got:
        assert fed["x"].dtype == np.int8 and np.array_equal(fed["x"], want["x_i8"])
        assert got[out_name].dtype == np.int8
        assert np.array_equal(got[out_name], want[out_name].astype(np.int8))
        q = got[out_name].astype(np.float32)
    with np.load(plain_out) as flagless:  # the chip's own dequantizing cast, in the plain bmodel
        (name,) = flagless.files
        assert np.array_equal(flagless[name], q * np.float32(s_out.scale))
