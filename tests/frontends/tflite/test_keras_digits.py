"""Keras-converted TFLite models end to end: a CNN (Conv2D, MaxPool, Flatten,
Dense, softmax) with a dynamic batch, trained on scikit-learn's digits and
converted with TFLiteConverter (tests/data/make_keras_digits.py made the
files; TensorFlow is not needed here). Its Flatten leaves a SHAPE ->
STRIDED_SLICE -> PACK -> RESHAPE subgraph, folded with the batch given by
--input_shapes: the whole test split (the 898 digits with an odd index) runs
as one batch.

- float: TOP against LiteRT, cosine >= 0.99999, the same accuracy;
- full integer (int8 I/O, and float I/O with QUANTIZE/DEQUANTIZE): deployed
  INT8 for bm1684x with no calibration table (the model's own scales), the
  bmodel bit-exact against the TPU interpreter, then run by model_runner in
  tpuc's simulator: accuracy equal to LiteRT's, >= 99% of the outputs within
  1 LSB of LiteRT's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.support.digits import SCALE, digits_arrays  # noqa: E402
from tpuc.frontends.tflite.model import load_tflite  # noqa: E402
from tpuc.frontends.tflite.reference import run_tflite  # noqa: E402
from tpuc.tools import model_deploy, model_runner, model_transform  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data"
INPUT = "serving_default_image:0"
OUTPUT = "StatefulPartitionedCall_1:0"


@pytest.fixture(scope="module")
def test_split(tmp_path_factory) -> tuple[Path, np.ndarray, np.ndarray]:
    """The odd-index digits as the model was trained on them: NHWC, pixel/255."""
    images, labels = digits_arrays()
    x = (images[1::2].astype(np.float32) * np.float32(SCALE))[..., None]
    path = tmp_path_factory.mktemp("digits") / "test.npz"
    np.savez(path, **{INPUT: x})
    return path, x, labels[1::2]


def transform(model: Path, work: Path, feed: Path, batch: int, tolerance: str) -> Path:
    mlir = work / "m.mlir"
    argv = ["--model_name", "m", "--model_def", str(model), "--input_shapes",
            f"[[{batch},8,8,1]]", "--test_input", str(feed), "--mlir", str(mlir),
            "--tolerance", tolerance]  # fmt: skip
    assert model_transform.run(argv) == 0
    return mlir


def output_scale(path: Path) -> float:
    """The int8 output's scale (behind the DEQUANTIZE of a float output)."""
    model = load_tflite(str(path))
    out = model.tensor(model.outputs[0])
    if not out.quantized:
        out = model.tensor(
            next(op.inputs[0] for op in model.operators if op.outputs == [out.index])
        )
    return float(out.scales[0])


def accuracy(scores: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(scores.argmax(-1) == labels))


def test_float_keras_cnn_matches_litert(test_split, tmp_path):
    feed, x, labels = test_split
    model = DATA / "keras_digits_float.tflite"
    transform(model, tmp_path, feed, len(x), "0.99999,0.999")  # every tensor against LiteRT
    top = np.load(tmp_path / "m_top_outputs.npz")[OUTPUT]
    ref = run_tflite(str(model), {INPUT: x})[OUTPUT]
    top, ref = top.astype(np.float64), ref.astype(np.float64)
    cosine = float(np.sum(top * ref) / np.linalg.norm(top) / np.linalg.norm(ref))
    print(f"float: cosine {cosine:.7f}, accuracy TOP {accuracy(top, labels):.4f} "
          f"LiteRT {accuracy(ref, labels):.4f}")  # fmt: skip
    assert cosine >= 0.99999
    assert accuracy(top, labels) == accuracy(ref, labels) > 0.95


@pytest.mark.parametrize("name", ["keras_digits_int8", "keras_digits_int8_float_io"])
def test_full_integer_keras_cnn_deploys_with_its_own_scales(name, test_split, tmp_path):
    feed, x, labels = test_split
    model = DATA / f"{name}.tflite"
    mlir = transform(model, tmp_path, feed, len(x), "0.99,0.9")
    assert (tmp_path / "m_cali_table").exists()  # the model's own quantization
    bmodel = tmp_path / "m.bmodel"
    argv = ["--mlir", str(mlir), "--chip", "bm1684x", "--quantize", "INT8", "--test_input",
            str(tmp_path / "m_in_f32.npz"), "--tolerance", "0.99,0.9",
            "--model", str(bmodel)]  # fmt: skip
    assert model_deploy.run(argv) == 0  # no --calibration_table; bmodel bit-exact
    out = tmp_path / "out.npz"
    argv = ["--input", str(feed), "--model", str(bmodel), "--output", str(out)]
    assert model_runner.run(argv) == 0  # tpuc's simulator
    tpu = np.load(out)[OUTPUT]
    ref = run_tflite(str(model), {INPUT: x})[OUTPUT]
    lsb = np.abs(np.round((tpu - ref) / output_scale(model)))
    print(f"{name}: accuracy bmodel {accuracy(tpu, labels):.4f} LiteRT "
          f"{accuracy(ref, labels):.4f}; outputs equal {np.mean(lsb == 0):.4f}, "
          f"within 1 LSB {np.mean(lsb <= 1):.4f}, largest {lsb.max():.0f} LSB")  # fmt: skip
    assert accuracy(tpu, labels) == accuracy(ref, labels) > 0.95
    assert np.mean(lsb <= 1) >= 0.99


def test_native_target_refuses_tflite_rounding_in_one_line(test_split, tmp_path, capsys, vendor):
    """The vendor kernels have no TFLite double-rounding requant: every op
    needing it is named in one line (it was a KeyError traceback)."""
    feed, x, _ = test_split
    mlir = transform(DATA / "keras_digits_int8.tflite", tmp_path, feed, len(x), "0.99,0.9")
    argv = ["--mlir", str(mlir), "--chip", "bm1684x", "--quantize", "INT8", "--codegen",
            "native", "--model", str(tmp_path / "m.bmodel")]  # fmt: skip
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        model_deploy.main(argv)
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert "cannot express 3 op(s)" in err and "round_mode DoubleRound" in err, err
    assert not (tmp_path / "m.bmodel").exists()
