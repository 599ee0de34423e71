"""model_runner.py on .onnx (onnxruntime) and .mlir (TOP interpreter)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from tools_helpers import conv_model, one_line_error, run_main

from tpuc.tools import model_runner, model_transform


@pytest.fixture
def work(tmp_path):
    conv_model(tmp_path / "tiny.onnx")
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    session = ort.InferenceSession(str(tmp_path / "tiny.onnx"), providers=["CPUExecutionProvider"])
    return tmp_path, session.run(["y"], {"x": x})[0]


def test_onnx_outputs_and_all_tensors(work, capsys):
    d, ref = work
    out = d / "out.npz"
    argv = ["--input", str(d / "in.npz"), "--model", str(d / "tiny.onnx"), "--output", str(out)]
    assert run_main(model_runner.main, argv, capsys)[0] == 0
    with np.load(out) as data:
        assert list(data.files) == ["y"]
        np.testing.assert_array_equal(data["y"], ref)
    assert run_main(model_runner.main, argv + ["--dump_all_tensors"], capsys)[0] == 0
    with np.load(out) as data:
        assert set(data.files) == {"c", "r", "p", "y"}
        np.testing.assert_array_equal(data["r"], np.maximum(data["c"], 0))


def test_mlir_matches_onnxruntime(work, capsys):
    d, ref = work
    argv = [
        "--model_name",
        "tiny",
        "--model_def",
        str(d / "tiny.onnx"),
        "--mlir",
        str(d / "t.mlir"),
    ]
    assert run_main(model_transform.main, argv, capsys)[0] == 0
    out = d / "top.npz"
    argv = ["--input", str(d / "in.npz"), "--model", str(d / "t.mlir"), "--output", str(out)]
    assert run_main(model_runner.main, argv, capsys)[0] == 0
    with np.load(out) as data:
        np.testing.assert_allclose(data["y"], ref, rtol=1e-5, atol=1e-6)
    assert run_main(model_runner.main, argv + ["--dump_all_tensors"], capsys)[0] == 0
    with np.load(out) as data:
        assert {"x", "r", "p", "y"} <= set(data.files)


@pytest.mark.parametrize(
    "model, inputs, needle",
    [
        ("m.bmodel", "in.npz", "unsupported model type (supported: .mlir, .onnx)"),
        ("tiny.onnx", "wrong.npz", "no data for input 'x'"),
        ("missing.onnx", "in.npz", "no such file"),
        ("tiny.onnx", "missing.npz", "no such file"),
    ],
)
def test_errors(work, capsys, model, inputs, needle):
    d, _ = work
    (d / "m.bmodel").write_bytes(b"")
    np.savez(d / "wrong.npz", input=np.zeros(3))
    argv = ["--input", str(d / inputs), "--model", str(d / model), "--output", str(d / "o.npz")]
    code, _, err = run_main(model_runner.main, argv, capsys)
    assert code == 1 and needle in one_line_error(err)
    assert not (d / "o.npz").exists()
