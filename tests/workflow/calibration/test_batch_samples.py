"""Batch-1 samples calibrate a module transformed at batch N (issue 16, item 7):
every N consecutive samples are stacked into one batch, as TPU-MLIR does,
and the table equals the batch-1 module's table over the same samples."""

from __future__ import annotations

import numpy as np
import pytest
from tools_helpers import conv_model, run_main

from tpuc.base.cali_table import read_table
from tpuc.tools import model_transform, run_calibration


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """tiny_b1.mlir and tiny_b4.mlir from one ONNX model with a dynamic batch,
    and eight batch-1 samples."""
    work = tmp_path_factory.mktemp("batch")
    conv_model(work / "tiny.onnx", batch="n")
    for batch in (1, 4):
        argv = ["--model_name", f"tiny_b{batch}", "--model_def", str(work / "tiny.onnx")]
        argv += ["--input_shapes", f"[[{batch},3,8,8]]", "--mlir", str(work / f"b{batch}.mlir")]
        assert model_transform.run(argv) == 0
    rng = np.random.default_rng(5)
    (work / "samples").mkdir()
    for i in range(8):
        sample = rng.standard_normal((1, 3, 8, 8)).astype(np.float32) * (1 + i)
        np.save(work / "samples" / f"s{i}.npy", sample)
    return work


def table(work, mlir, method, capsys, extra=()):
    out = work / f"{mlir}_{method}_table"
    argv = [str(work / mlir), "--dataset", str(work / "samples"), "-o", str(out)]
    code, _, err = run_main(run_calibration.main, [*argv, "--cali_method", method, *extra], capsys)
    assert code == 0, err
    return read_table(out).entries


@pytest.mark.parametrize("method", ["kl", "max", "percentile9999", "mse", "aciq_gauss"])
def test_batch_one_samples_give_the_batch_one_table(models, capsys, method):
    one = table(models, "b1.mlir", method, capsys, ["--tune_num", "0"])
    four = table(models, "b4.mlir", method, capsys, ["--tune_num", "0"])
    assert one.keys() == four.keys()
    assert four == one  # thresholds, min and max, bit for bit


def test_remainder_is_left_out_with_a_warning(models, tmp_path, capsys):
    argv = [str(models / "b4.mlir"), "--dataset", str(models / "samples"), "--input_num", "6"]
    code, _, err = run_main(run_calibration.main, [*argv, "-o", str(tmp_path / "t")], capsys)
    assert code == 0
    assert "warning: the last 2 sample(s) do not fill a batch of 4 and are not used" in err


def test_fewer_samples_than_one_batch(models, tmp_path, capsys):
    argv = [str(models / "b4.mlir"), "--dataset", str(models / "samples"), "--input_num", "3"]
    code, _, err = run_main(run_calibration.main, [*argv, "-o", str(tmp_path / "t")], capsys)
    assert (code, err) == (
        1,
        "error: 3 batch-1 sample(s) cannot fill one batch of 4 (the module's inputs have "
        "batch 4)\n",
    )
    assert not (tmp_path / "t").exists()
