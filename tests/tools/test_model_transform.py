"""model_transform.py end to end on a tiny ONNX conv model, and every bad
request ending with one line, exit status 1 and no file left behind."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from PIL import Image
from tools_helpers import conv_model, one_line_error, run_main, unsupported_model

from tpuc.tools.model_transform import main

EXPECTED_FILES = {
    "tiny_origin.mlir",
    "tiny_top_f32_all_origin_weight.npz",
    "tiny.mlir",
    "tiny_top_f32_all_weight.npz",
    "tiny_in_f32.npz",
    "tiny_top_outputs.npz",
}


@pytest.fixture
def work(tmp_path):
    conv_model(tmp_path / "tiny.onnx")
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "in.npz", x=rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    return tmp_path


def transform(work, capsys, *extra: str, model: str = "tiny.onnx"):
    argv = [
        "--model_name",
        "tiny",
        "--model_def",
        str(work / model),
        "--mlir",
        str(work / "tiny.mlir"),
    ]
    return run_main(main, argv + [s.format(d=work) for s in extra], capsys)


def files_in(directory) -> set[str]:
    return {p.name for p in directory.iterdir()}


def test_happy_path(work, capsys):
    onnx_bytes = (work / "tiny.onnx").read_bytes()
    code, out, err = transform(work, capsys, "--test_input", "{d}/in.npz")
    assert code == 0, err
    assert files_in(work) == EXPECTED_FILES | {"tiny.onnx", "in.npz"}
    assert (work / "tiny.onnx").read_bytes() == onnx_bytes
    assert "TOP matches onnxruntime" in out
    assert "min_similiarity = " in out
    text = (work / "tiny.mlir").read_text()
    # Conv 1x4x8x8 outputs x (2*27 MACs + bias + relu) + global pool 4 x 64; reshape 0
    assert f"module.FLOPs = {256 * 56 + 4 * 64} : i64" in text
    assert 'module.weight_file = "tiny_top_f32_all_weight.npz"' in text
    assert 'pixel_format = "bgr"' in text
    origin = (work / "tiny_origin.mlir").read_text()
    assert 'module.weight_file = "tiny_top_f32_all_origin_weight.npz"' in origin
    with np.load(work / "tiny_top_outputs.npz") as top, np.load(work / "in.npz") as given:
        assert {"x", "r", "p", "y"} <= set(top.files)
        np.testing.assert_array_equal(top["x"], given["x"])


def test_outputs_match_onnxruntime_and_are_reproducible(work, capsys, tmp_path_factory):
    import onnxruntime as ort

    code, _, _ = transform(work, capsys, "--test_input", "{d}/in.npz")
    assert code == 0
    session = ort.InferenceSession(str(work / "tiny.onnx"), providers=["CPUExecutionProvider"])
    with np.load(work / "in.npz") as given, np.load(work / "tiny_top_outputs.npz") as top:
        (ref,) = session.run(["y"], {"x": given["x"]})
        np.testing.assert_allclose(top["y"], ref, rtol=1e-5, atol=1e-6)
    again = tmp_path_factory.mktemp("again")
    for name in ("tiny.onnx", "in.npz"):
        (again / name).write_bytes((work / name).read_bytes())
    assert transform(again, capsys, "--test_input", "{d}/in.npz")[0] == 0
    for name in EXPECTED_FILES:
        assert (again / name).read_bytes() == (work / name).read_bytes(), name


def test_image_input_and_debug_files(work, capsys):
    pixels = np.random.default_rng(2).integers(0, 256, (10, 12, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(work / "cat.png")
    code, out, err = transform(
        work, capsys, "--test_input", "{d}/cat.png", "--mean", "1,2,3", "--scale", "0.5", "--debug"
    )
    assert code == 0, err
    assert "tiny_ref_outputs.npz" in files_in(work)
    assert "[r" in out  # per-tensor lines with --debug
    with np.load(work / "tiny_in_f32.npz") as data:
        assert data["x"].shape == (1, 3, 8, 8)


def test_without_test_input(work, capsys):
    code, _, err = transform(work, capsys)
    assert code == 0, err
    assert files_in(work) == {"tiny.onnx", "in.npz", "tiny_origin.mlir", "tiny.mlir"} | {
        "tiny_top_f32_all_weight.npz",
        "tiny_top_f32_all_origin_weight.npz",
    }


def test_model_is_parsed_once(work, capsys, monkeypatch):
    """The frontend and the onnxruntime reference share one parse of the file."""
    import onnx

    real = onnx.load_model
    calls: list[str] = []

    def counting(f, *args, **kwargs):
        calls.append(str(f))
        return real(f, *args, **kwargs)

    monkeypatch.setattr(onnx, "load", counting)
    monkeypatch.setattr(onnx, "load_model", counting)
    code, out, err = transform(work, capsys, "--test_input", "{d}/in.npz", "--debug")
    assert code == 0, err
    assert calls == [str(work / "tiny.onnx")]
    with np.load(work / "tiny_ref_outputs.npz") as ref:
        assert set(ref.files) == {"r", "p", "y"}  # intermediates exposed to onnxruntime


def test_divergence_names_first_tensor_in_network_order(work, capsys, monkeypatch):
    import tpuc.frontends.onnx.reference as runner

    real = runner.run_onnx

    def skewed(*args, **kwargs):
        outputs = real(*args, **kwargs)
        return {k: (-v if k in ("r", "y") else v) for k, v in outputs.items()}

    monkeypatch.setattr(runner, "run_onnx", skewed)
    code, _, err = transform(work, capsys, "--test_input", "{d}/in.npz")
    assert code == 1
    assert "diverge first at tensor 'r'" in one_line_error(err)


@pytest.mark.parametrize(
    "setup, extra, needle",
    [
        ("truncated", [], "tiny.onnx: not a valid ONNX model"),
        ("unsupported", [], "FrobnicateA"),
        ("dynamic", [], "'x'"),
        ("plain", ["--test_input", "{d}/wrong_key.npz"], "no array named 'x'"),
        ("plain", ["--test_input", "{d}/wrong_shape.npz"], "expects [1, 3, 8, 8]"),
        ("plain", ["--output_names", "nope"], "nope"),
        ("plain", ["--test_input", "{d}/junk.jpg"], "junk.jpg: cannot read it as an image"),
        ("plain", ["--test_input", "{d}/none.npz"], "no such file"),
        ("plain", ["--input_shapes", "[[1,3,x]]"], "--input_shapes"),
        ("plain", ["--tolerance", "0.9"], "--tolerance"),
        ("plain", ["--tolerance", "0.99,2"], "euclidean similarity is at most 1"),
        ("plain", ["--scale", "1,nan,1"], "--scale: expected comma-separated finite numbers"),
        ("plain", ["--mean", "inf"], "--mean: expected comma-separated finite numbers"),
        ("plain", ["--mlir", "{d}/folder"], "folder: is a folder; an output must be a file name"),
        ("plain", ["--mean", "1,2"], "--mean has 2 values"),
    ],
)
def test_bad_requests_leave_nothing(work, capsys, setup, extra, needle):
    if setup == "truncated":
        data = (work / "tiny.onnx").read_bytes()
        (work / "tiny.onnx").write_bytes(data[: len(data) // 2])
    elif setup == "unsupported":
        unsupported_model(work / "tiny.onnx")
    elif setup == "dynamic":
        conv_model(work / "tiny.onnx", batch="N")
    np.savez(work / "wrong_key.npz", input=np.zeros((1, 3, 8, 8), np.float32))
    np.savez(work / "wrong_shape.npz", x=np.zeros((1, 3, 4, 4), np.float32))
    (work / "junk.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    (work / "folder").mkdir()
    before = files_in(work)
    code, _, err = transform(work, capsys, *extra)
    assert code == 1
    line = one_line_error(err)
    assert needle in line, line
    if setup == "unsupported":
        assert "FrobnicateB" in line
    assert files_in(work) == before


def test_unsupported_format_and_collisions(work, capsys):
    (work / "m.caffemodel").write_bytes(b"")
    code, _, err = transform(work, capsys, model="m.caffemodel")
    assert code == 1 and "pass it as --model_data" in one_line_error(err)
    code, _, err = transform(work, capsys, "--test_result", "{d}/tiny.mlir")
    assert code == 1 and "used both as" in one_line_error(err)
    onnx_bytes = (work / "tiny.onnx").read_bytes()
    code, _, err = transform(work, capsys, "--mlir", "{d}/tiny.onnx")
    assert code == 1 and "refusing to overwrite an input file" in one_line_error(err)
    assert (work / "tiny.onnx").read_bytes() == onnx_bytes
    code, _, err = transform(
        work, capsys, "--test_input", "{d}/in.npz", "--test_result", "{d}/in.npz"
    )
    assert code == 1 and "refusing to overwrite an input file" in one_line_error(err)
    assert files_in(work) == {"tiny.onnx", "in.npz", "m.caffemodel"}


def test_help_is_the_console_script():
    proc = subprocess.run(["model_transform.py", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--keep_ratio_mode" in proc.stdout


# --- test inputs that once ended in tracebacks or silent casts (issue 16) ---------------


def _bad_inputs(d):
    from bad_inputs import gif_bomb

    np.savez(d / "strings.npz", x=np.full((1, 3, 8, 8), "a"))
    np.savez(d / "complex.npz", x=np.ones((1, 3, 8, 8), np.complex64) * (1 + 1j))
    gif_bomb(d / "cat.jpg")


@pytest.mark.parametrize(
    "name, message",
    [
        ("strings.npz", "input 'x' holds strings; the model takes real numbers"),
        ("complex.npz", "input 'x' holds complex numbers; the model takes real numbers"),
        (
            "cat.jpg",
            "cannot read it as an image (Image size (4294836225 pixels) exceeds limit of "
            "178956970 pixels, could be decompression bomb DOS attack.)",
        ),
    ],
)
def test_unusable_test_input(work, capsys, name, message):
    _bad_inputs(work)
    argv = ["--model_name", "tiny", "--model_def", str(work / "tiny.onnx")]
    argv += ["--test_input", str(work / name), "--mlir", str(work / "tiny.mlir")]
    code, _, err = run_main(main, argv, capsys)
    assert (code, err) == (1, f"error: {work / name}: {message}\n")
    assert not (work / "tiny.mlir").exists()
