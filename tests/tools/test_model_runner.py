"""model_runner.py on .onnx (onnxruntime), .mlir (TOP interpreter) and bad input
(bmodels: tests/target/runtime/test_bmodel_runtime.py)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from tools_helpers import conv_model, one_line_error, run_main

from tpuc.frontends.onnx import reference
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
        (
            "m.pt",
            "in.npz",
            "unsupported model type (supported: .bmodel, .mlir, .onnx, .prototxt, .tflite)",
        ),
        ("m.tflite", "in.npz", "LiteRT cannot load the model"),
        ("m.bmodel", "in.npz", "truncated bmodel"),
        ("tiny.onnx", "wrong.npz", "no data for input 'x'"),
        ("missing.onnx", "in.npz", "no such file"),
        ("tiny.onnx", "missing.npz", "no such file"),
    ],
)
def test_errors(work, capsys, model, inputs, needle):
    d, _ = work
    (d / "m.bmodel").write_bytes(b"")
    (d / "m.tflite").write_bytes(b"")
    (d / "m.pt").write_bytes(b"")
    np.savez(d / "wrong.npz", input=np.zeros(3))
    argv = ["--input", str(d / inputs), "--model", str(d / model), "--output", str(d / "o.npz")]
    code, _, err = run_main(model_runner.main, argv, capsys)
    assert code == 1 and needle in one_line_error(err)
    assert not (d / "o.npz").exists()


def test_output_hard_linked_to_the_input_is_refused(work, capsys):
    """--output as another name of --input: refused, the input keeps its bytes."""
    import os

    d, _ = work
    before = (d / "in.npz").read_bytes()
    os.link(d / "in.npz", d / "o.npz")
    argv = ["--input", str(d / "in.npz"), "--model", str(d / "tiny.onnx")]
    argv += ["--output", str(d / "o.npz")]
    code, _, err = run_main(model_runner.main, argv, capsys)
    assert code == 1
    assert one_line_error(err) == (
        f"error: {d / 'o.npz'}: refusing to overwrite an input file (a hard link to {d / 'in.npz'})"
    )
    assert (d / "in.npz").read_bytes() == before


def test_output_that_is_a_folder(work, capsys):
    d, _ = work
    (d / "o.npz").mkdir()
    argv = ["--input", str(d / "in.npz"), "--model", str(d / "tiny.onnx")]
    code, _, err = run_main(model_runner.main, argv + ["--output", str(d / "o.npz")], capsys)
    assert code == 1
    assert one_line_error(err) == (
        f"error: {d / 'o.npz'}: is a folder; an output must be a file name"
    )
    assert not list((d / "o.npz").iterdir()) and not list(d.glob(".o.npz*"))


def test_int64_weights_are_refused(work, capsys):
    """A weight file whose filter is int64 (a hand-made npz) would run through
    the f32 kernels unnoticed: one line names the weight and its dtype."""
    from tpuc.base.files import load_npz

    d, _ = work
    argv = ["--model_name", "tiny", "--model_def", str(d / "tiny.onnx")]
    argv += ["--mlir", str(d / "t.mlir")]
    assert run_main(model_transform.main, argv, capsys)[0] == 0
    weight_file = d / "tiny_top_f32_all_weight.npz"  # t.mlir's module.weight_file
    weights = load_npz(weight_file)
    name = next(n for n, w in weights.items() if w.ndim == 4)
    weights[name] = weights[name].round().astype(np.int64)
    np.savez(weight_file, **weights)
    argv = ["--input", str(d / "in.npz"), "--model", str(d / "t.mlir")]
    argv += ["--output", str(d / "o.npz")]
    code, _, err = run_main(model_runner.main, argv, capsys)
    assert code == 1
    assert f"weight '{name}' holds int64 values, the module declares f32" in one_line_error(err)
    assert not (d / "o.npz").exists()


# --- onnxruntime sessions: extra outputs, IR version, external data ----------------------


def ort_all_tensors(path, x) -> dict[str, np.ndarray]:
    """Reference: the model re-saved with every node output as a graph output."""
    import onnx

    model = onnx.load(str(path))
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in ("c", "r", "p"))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, {"x": x}), strict=True))


def test_extra_tensors_from_given_names_without_parsing(work, monkeypatch):
    import onnx

    d, _ = work
    path = d / "tiny.onnx"
    before = path.read_bytes()
    names = reference.OnnxNames.read(str(path))
    assert names.outputs == ("y",)
    assert names.produced == (
        ("c", "Conv"),
        ("r", "Relu"),
        ("p", "GlobalAveragePool"),
        ("y", "Flatten"),
    )

    def no_parse(*args, **kwargs):
        raise AssertionError("the model was parsed again")

    x = np.load(d / "in.npz")["x"]
    ref = ort_all_tensors(path, x)
    monkeypatch.setattr(onnx, "load", no_parse)
    monkeypatch.setattr(onnx, "load_model", no_parse)
    got = reference.run_onnx(str(path), {"x": x}, tensors={"r": "r_Relu"}, names=names)
    assert set(got) == {"y", "r_Relu"}
    np.testing.assert_array_equal(got["r_Relu"], ref["r"])
    np.testing.assert_array_equal(got["y"], ref["y"])
    assert path.read_bytes() == before


def test_ir_version_newer_than_onnxruntime_is_lowered_in_memory(work):
    import onnx

    d, _ = work
    model = onnx.load(str(d / "tiny.onnx"))
    model.ir_version = 99
    onnx.save(model, str(d / "new.onnx"))
    before = (d / "new.onnx").read_bytes()
    notes: list[str] = []
    x = np.load(d / "in.npz")["x"]
    got = reference.run_onnx(str(d / "new.onnx"), {"x": x}, dump_all=True, notes=notes.append)
    assert notes and "running with IR version" in notes[0] and "model has 99" in notes[0]
    ref = ort_all_tensors(d / "tiny.onnx", x)
    assert set(got) == set(ref)
    for name, value in ref.items():
        np.testing.assert_array_equal(got[name], value)
    assert (d / "new.onnx").read_bytes() == before


def test_external_data_found_next_to_the_model(work, monkeypatch, tmp_path_factory):
    import onnx

    d, _ = work
    sub = d / "sub"
    sub.mkdir()
    model = onnx.load(str(d / "tiny.onnx"))
    onnx.save(model, str(sub / "ext.onnx"), save_as_external_data=True, location="ext.bin",
              size_threshold=0)  # fmt: skip
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    x = np.load(d / "in.npz")["x"]
    got = reference.run_onnx(str(sub / "ext.onnx"), {"x": x}, dump_all=True)
    ref = ort_all_tensors(d / "tiny.onnx", x)
    assert set(got) == set(ref)
    for name, value in ref.items():
        np.testing.assert_array_equal(got[name], value)


# --- a hand-edited tensor_location.json (issue 16) ---------------------------------------


@pytest.fixture(scope="module")
def f32_bmodel(prepared, tmp_path_factory):
    from tpuc.tools import model_deploy

    out = tmp_path_factory.mktemp("f32")
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "F32"]
    assert model_deploy.run([*argv, "--model", str(out / "cnn.bmodel")]) == 0
    return out


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("address", "0x1000", "'address' must be an integer, not a string"),
        ("shape", [1, "x"], "'shape' must be a list of non-negative integers"),
        ("dtype", 5, "'dtype' must be a string, not an integer"),
        ("dtype", "f64", "unknown dtype 'f64'"),
        ("scale", None, "'scale' must be an integer or a number, not null"),
        ("layer_id", True, "'layer_id' must be an integer, not a boolean"),
    ],
)
def test_tensor_location_with_wrong_field_types(
    prepared, f32_bmodel, tmp_path, capsys, key, value, message
):
    import json
    import shutil

    shutil.copy(f32_bmodel / "cnn.bmodel", tmp_path / "cnn.bmodel")
    location = tmp_path / "cnn_bm1684x_f32_tensor_location.json"
    rows = json.loads((f32_bmodel / location.name).read_text())
    rows["tensors"][1][key] = value
    location.write_text(json.dumps(rows))
    argv = ["--input", str(prepared / "cnn_in_f32.npz"), "--model", str(tmp_path / "cnn.bmodel")]
    argv += ["--dump_all_tensors", "--output", str(tmp_path / "o.npz")]
    code, _, err = run_main(model_runner.main, argv, capsys)
    assert (code, err) == (1, f"error: {location}: tensors[1]: {message}\n")
    assert not (tmp_path / "o.npz").exists()
