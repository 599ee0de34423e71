"""Pre-quantized INT8 TFLite models (float I/O, QUANTIZE/DEQUANTIZE at the
edges, int8 activations and per-axis int8 weights): the model's own scales
and zero points become the calibration table model_transform writes, and
model_deploy --quantize INT8 needs no --calibration_table. The deployed
INT8 outputs are compared with LiteRT's in units of the output scale."""

from __future__ import annotations

import numpy as np
import pytest
from tflite_builder import INT8, INT32, Op, T, build

pytest.importorskip("ai_edge_litert")

from tpuc.frontends.tflite.reference import run_tflite  # noqa: E402
from tpuc.tools import model_deploy, model_transform  # noqa: E402

RNG = np.random.default_rng(23)
S_IN, ZP_IN = 4.0 / 127, -5
S_OUT, ZP_OUT = 0.05, -128


def int8_conv_model(act: int = 1) -> bytes:
    """x (float) -> QUANTIZE -> CONV_2D 3x3 SAME (per-axis int8 weights,
    int32 bias, fused activation) -> DEQUANTIZE -> y (float)."""
    w = RNG.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.3
    s_w = np.abs(w).reshape(6, -1).max(axis=1) / 127
    qw = np.round(w / s_w[:, None, None, None]).astype(np.int8)
    b = RNG.standard_normal(6).astype(np.float32)
    qb = np.round(b / (S_IN * s_w)).astype(np.int32)
    tensors = [
        T("x", [1, 8, 8, 3]),
        T("xq", [1, 8, 8, 3], type=INT8, scale=[S_IN], zero_point=[ZP_IN]),
        T("w", [6, 3, 3, 3], qw, scale=list(s_w), zero_point=[0] * 6),
        T("b", [6], qb, type=INT32, scale=list(S_IN * s_w), zero_point=[0] * 6),
        T("yq", [1, 8, 8, 6], type=INT8, scale=[S_OUT], zero_point=[ZP_OUT]),
        T("y", [1, 8, 8, 6]),
    ]
    opts = ("Conv2DOptions", {"Padding": 0, "StrideW": 1, "StrideH": 1,
                              "FusedActivationFunction": act, "DilationWFactor": 1,
                              "DilationHFactor": 1})  # fmt: skip
    ops = [Op("QUANTIZE", [0], [1]), Op("CONV_2D", [1, 2, 3], [4], opts),
           Op("DEQUANTIZE", [4], [5])]  # fmt: skip
    return build(tensors, ops, [0], [5])


def test_prequantized_conv_deploys_with_its_own_scales(tmp_path):
    path = tmp_path / "q.tflite"
    path.write_bytes(int8_conv_model())
    x = RNG.standard_normal((1, 8, 8, 3)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    argv = ["--model_name", "q", "--model_def", str(path), "--test_input",
            str(tmp_path / "in.npz"), "--mlir", str(tmp_path / "q.mlir"),
            "--tolerance", "0.99,0.9"]  # fmt: skip
    assert model_transform.run(argv) == 0  # TOP float against LiteRT's dequantized int8
    table = (tmp_path / "q_cali_table").read_text()
    assert 'module.cali_table = "q_cali_table"' in (tmp_path / "q.mlir").read_text()
    lo, hi = (-128 - ZP_IN) * S_IN, (127 - ZP_IN) * S_IN
    assert f"{lo:.7f}" in table and f"{hi:.7f}" in table
    argv = ["--mlir", str(tmp_path / "q.mlir"), "--chip", "bm1684x", "--quantize", "INT8",
            "--test_input", str(tmp_path / "q_in_f32.npz"), "--tolerance", "0.99,0.9",
            "--model", str(tmp_path / "q.bmodel")]  # fmt: skip
    assert model_deploy.run(argv) == 0  # no --calibration_table; bmodel bit-exact
    tpu = np.load(next(tmp_path.glob("q_bm1684x_int8_asym_tpu_outputs.npz")))["y"]
    ref = run_tflite(str(path), {"x": x})["y"]
    lsb = np.abs(np.round((tpu - ref) / S_OUT))
    within_one = float(np.mean(lsb <= 1))
    assert within_one >= 0.99, (within_one, float(np.mean(lsb == 0)))
