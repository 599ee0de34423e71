"""Caffe models through the command lines: model_transform.py with the
OpenCV check, model_runner.py on a .prototxt, and a deploy whose bmodel
runs bit-exact against the TPU interpreter with engine commands only."""

from __future__ import annotations

import numpy as np
import pytest
from caffe_layers import build_case

from tpuc.target.runtime import load_bmodel
from tpuc.target.runtime.engine import CopyStep, EngineStep
from tpuc.tools import model_deploy, model_runner, model_transform, run_calibration


@pytest.fixture(scope="module")
def transformed(tmp_path_factory):
    """The V1-format network (conv, relu, pool, LRN, fc, softmax) transformed."""
    work = tmp_path_factory.mktemp("caffe_v1")
    prototxt, caffemodel, feed = build_case("v1_format", work)
    np.savez(work / "in.npz", **feed)
    argv = ["--model_name", "v1", "--model_def", str(prototxt), "--model_data", str(caffemodel),
            "--test_input", str(work / "in.npz"), "--tolerance", "0.99999,0.999",
            "--mlir", str(work / "v1.mlir")]  # fmt: skip
    assert model_transform.run(argv) == 0  # raises when TOP and OpenCV diverge
    return work, prototxt, caffemodel


def test_transform_writes_a_caffe_module(transformed):
    work, _, _ = transformed
    text = (work / "v1.mlir").read_text()
    assert 'module.platform = "CAFFE"' in text
    assert set(np.load(work / "v1_top_outputs.npz")) >= {"conv1", "pool1", "norm1", "fc", "prob"}


def test_model_runner_runs_opencv(transformed, tmp_path):
    work, prototxt, caffemodel = transformed
    out = tmp_path / "out.npz"
    argv = ["--input", str(work / "in.npz"), "--model", str(prototxt), "--model_data",
            str(caffemodel), "--output", str(out), "--dump_all_tensors"]  # fmt: skip
    assert model_runner.run(argv) == 0
    got = dict(np.load(out))
    top = np.load(work / "v1_top_outputs.npz")
    assert {"conv1", "pool1", "fc", "prob"} <= set(got)
    np.testing.assert_allclose(got["prob"], top["prob"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("chip", "mode"), [("bm1684x", "INT8"), ("cv183x", "INT8"), ("bm1684x", "F16")]
)
def test_deploy_is_bit_exact_with_engine_commands(transformed, tmp_path, chip, mode):
    work, _, _ = transformed
    table = work / "v1_cali_table"
    if not table.exists():
        cali = work / "cali"
        cali.mkdir()
        rng = np.random.default_rng(3)
        for i in range(4):
            np.save(cali / f"{i}.npy", rng.standard_normal((1, 3, 10, 10)).astype(np.float32))
        assert run_calibration.run([str(work / "v1.mlir"), "--dataset", str(cali),
                                    "-o", str(table)]) == 0  # fmt: skip
    bmodel = tmp_path / "v1.bmodel"
    argv = ["--mlir", str(work / "v1.mlir"), "--chip", chip, "--quantize", mode,
            "--calibration_table", str(table), "--test_input", str(work / "v1_in_f32.npz"),
            "--test_reference", str(work / "v1_top_outputs.npz"),
            "--model", str(bmodel)]  # fmt: skip
    assert model_deploy.run(argv) == 0  # fails unless bmodel == TPU interpreter bit for bit
    program = load_bmodel(bmodel)
    for _, steps in program.subnets:
        for step in steps:
            assert isinstance(step, EngineStep | CopyStep), step.what  # nothing transitional
