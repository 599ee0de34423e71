"""run_calibration.py end to end, in-process, on a tiny conv model (model_transform.py
with --mean/--scale, so images are preprocessed): the table against onnxruntime's
tensors, every method, tuning, reproducibility, and every bad request ending with one
`error:` line, exit status 1 and no table written."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from PIL import Image
from tools_helpers import conv_model, one_line_error, run_main  # noqa: E402

from tpuc.base.cali_table import read_table  # noqa: E402
from tpuc.tools import model_transform  # noqa: E402
from tpuc.tools.run_calibration import METHOD_NAMES, main  # noqa: E402

MEAN = np.array([120.0, 110.0, 100.0], np.float32)
SCALE = np.float32(0.02)
SAMPLES = ["img0.png", "img1.png", "img2.png", "s3.npy", "s4.npz"]  # sorted, as listed


# --- fixtures: one model and one dataset for the whole file ----------------------


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """tiny.mlir (+ weights) next to tiny.onnx; x is an RGB image input."""
    folder = tmp_path_factory.mktemp("model")
    conv_model(folder / "tiny.onnx")
    argv = ["--model_name", "tiny", "--model_def", str(folder / "tiny.onnx")]
    argv += ["--mlir", str(folder / "tiny.mlir"), "--pixel_format", "rgb"]
    argv += ["--mean", ",".join(map(str, MEAN)), "--scale", f"{SCALE},{SCALE},{SCALE}"]
    with pytest.raises(SystemExit) as info:
        model_transform.main(argv)
    assert info.value.code in (0, None)
    return folder / "tiny.mlir"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """Three 12x10 RGB PNGs (resized to 8x8 by preprocessing), one .npy, one .npz."""
    folder = tmp_path_factory.mktemp("dataset")
    rng = np.random.default_rng(7)
    for i in range(3):
        pixels = rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"img{i}.png")
    np.save(folder / "s3.npy", 2 * rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    np.savez(folder / "s4.npz", x=1.5 * rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    return folder


def calibrate(capsys, *argv) -> tuple[int, str, str]:
    return run_main(main, [str(a) for a in argv], capsys)


def table_of(capsys, model, *argv, out: Path):
    code, _, err = calibrate(capsys, model, *argv, "-o", out)
    assert code == 0, err
    return read_table(out)


def copy_dataset(dataset: Path, where: Path) -> Path:
    return Path(shutil.copytree(dataset, where))


# --- the independent reference: onnxruntime on the ONNX model --------------------


def reference_input(path: Path) -> np.ndarray:
    """The x tensor of one sample: PNGs preprocessed as model_transform recorded
    (RGB, bilinear resize to 8x8, (x - mean) * scale, NCHW)."""
    if path.suffix == ".npy":
        return np.load(path)
    if path.suffix == ".npz":
        return np.load(path)["x"]
    with Image.open(path) as image:
        rgb = image.convert("RGB").resize((8, 8), Image.Resampling.BILINEAR)
    pixels = (np.asarray(rgb, np.float32) - MEAN) * SCALE
    return pixels.transpose(2, 0, 1)[None]


def reference_tensors(onnx_path: Path, samples: list[Path]) -> dict[str, np.ndarray]:
    """Every tensor of the ONNX model over `samples` (flattened and concatenated)."""
    model = onnx.load(onnx_path)
    known = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name not in known:
                model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    values: dict[str, list[np.ndarray]] = {"x": []}
    for path in samples:
        x = reference_input(path)
        values["x"].append(x.reshape(-1))
        for name, array in zip(names, session.run(names, {"x": x}), strict=True):
            values.setdefault(name, []).append(array.reshape(-1))
    return {name: np.concatenate(arrays) for name, arrays in values.items()}


def module_tensor_names(mlir: Path) -> list[str]:
    """Every tensor calibration must cover: op results but weights and None, in order."""
    from tpuc.dialects import top
    from tpuc.dialects.base import TensorOp
    from tpuc.ir.module_io import load_module

    module, _ = load_module(mlir)
    names = []
    for op in module.walk():
        if isinstance(op, TensorOp) and not isinstance(op, top.WeightOp | top.NoneOp):
            names.extend(op.names)
    return names


def assert_close(got: float, want: float, what: str) -> None:
    assert got == pytest.approx(want, rel=1e-5, abs=1e-6), what


# --- the table --------------------------------------------------------------------


def test_table_covers_every_tensor_with_onnxruntime_ranges(model, dataset, tmp_path, capsys):
    code, out, err = calibrate(capsys, model, "--dataset", dataset, "-o", tmp_path / "t")
    assert code == 0, err
    assert err == ""
    assert "[run_calibration.py] 5 samples, method kl" in out
    assert sorted(p.name for p in dataset.iterdir()) == SAMPLES
    table = read_table(tmp_path / "t")
    names = module_tensor_names(model)
    assert set(names) >= {"x", "y"}
    assert list(table.entries) == names  # every tensor, network order
    ref = reference_tensors(model.parent / "tiny.onnx", [dataset / s for s in SAMPLES])
    for name, entry in table.entries.items():
        assert_close(entry.min, float(ref[name].min()), f"{name} min")
        assert_close(entry.max, float(ref[name].max()), f"{name} max")
        absmax = max(-entry.min, entry.max)
        assert 0 < entry.threshold <= absmax, name
    assert "# sample number: 5" in table.header
    assert "# quantization threshold calculation method: ['kl']" in table.header
    assert "# tune number: 5" in table.header  # the default, 5


def test_max_threshold_is_absmax(model, dataset, tmp_path, capsys):
    out = tmp_path / "t"
    table = table_of(capsys, model, "--dataset", dataset, "--cali_method", "max", out=out)
    ref = reference_tensors(model.parent / "tiny.onnx", [dataset / s for s in SAMPLES])
    # x (Input) and p (AvgPool) have no range rule; r (Conv+ReLU) and y (Reshape)
    # have one, and keep the absmax too
    for name, entry in table.entries.items():
        assert entry.threshold == max(-entry.min, entry.max), name
        assert_close(entry.threshold, float(np.abs(ref[name]).max()), name)


def test_aciq_gauss_matches_moments(model, dataset, tmp_path, capsys):
    """|mean| + 3.92 std (3.61 for a non-negative tensor), capped at absmax."""
    argv = ["--dataset", dataset, "--cali_method", "aciq_gauss", "--tune_num", "0"]
    table = table_of(capsys, model, *argv, out=tmp_path / "t")
    ref = reference_tensors(model.parent / "tiny.onnx", [dataset / s for s in SAMPLES])
    for name, entry in table.entries.items():
        values = ref[name].astype(np.float64)
        k = 3.61 if values.min() >= 0 else 3.92
        want = min(abs(values.mean()) + k * values.std(), np.abs(values).max())
        assert_close(entry.threshold, want, name)
    assert table.entries["r"].threshold < table.entries["r"].max  # really clipped


@pytest.mark.parametrize("method", METHOD_NAMES)
def test_every_method(method, model, dataset, tmp_path, capsys):
    table = table_of(
        capsys, model, "--dataset", dataset, "--cali_method", method, out=tmp_path / "t"
    )
    ranges = table_of(
        capsys, model, "--dataset", dataset, "--cali_method", "max", out=tmp_path / "m"
    )
    assert f"# quantization threshold calculation method: ['{method}']" in table.header
    assert list(table.entries) == list(ranges.entries)
    for name, entry in table.entries.items():
        assert (entry.min, entry.max) == (ranges.entries[name].min, ranges.entries[name].max)
        assert 0 < entry.threshold <= ranges.entries[name].threshold, name


def test_two_runs_are_byte_identical(model, dataset, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    table_of(capsys, model, "--dataset", dataset, out=tmp_path / "a")
    table_of(capsys, model, "--dataset", dataset, out=tmp_path / "b")
    text = (tmp_path / "a").read_bytes()
    assert text == (tmp_path / "b").read_bytes()
    assert b"genetated" not in text
    lines = text.decode().splitlines()
    assert lines[0].startswith("# mlir version: tpuc ")
    assert lines[1] == "# mlir: tiny.mlir"
    assert lines[8] == "# op_name    threshold    min    max"
    for line in lines[9:]:  # name and three numbers with 7 decimals
        _, *numbers = line.split()
        assert [len(n.split(".")[1]) for n in numbers] == [7, 7, 7], line


def test_source_date_epoch_adds_the_time(model, dataset, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    table_of(capsys, model, "--dataset", dataset, out=tmp_path / "plain")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    table_of(capsys, model, "--dataset", dataset, out=tmp_path / "dated")
    plain = (tmp_path / "plain").read_text().splitlines()
    dated = (tmp_path / "dated").read_text().splitlines()
    assert dated[2] == "# genetated time: 2023-11-14 22:13:20"  # sic, TPU-MLIR's spelling
    assert dated[:2] + dated[3:] == plain


def test_bad_source_date_epoch(model, dataset, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    code, _, err = calibrate(capsys, model, "--dataset", dataset, "-o", tmp_path / "t")
    assert code == 1
    assert "SOURCE_DATE_EPOCH" in one_line_error(err)
    assert not (tmp_path / "t").exists()


def test_tune_num(model, dataset, tmp_path, capsys):
    untuned = table_of(capsys, model, "--dataset", dataset, "--tune_num", "0", out=tmp_path / "0")
    tuned = table_of(capsys, model, "--dataset", dataset, out=tmp_path / "10")
    two = table_of(capsys, model, "--dataset", dataset, "--tune_num", "2", out=tmp_path / "2")
    assert "# tune number: 0" in untuned.header
    assert "# tune number: 5" in tuned.header
    assert "# tune number: 2" in two.header
    assert list(untuned.entries) == list(tuned.entries)
    for name, entry in untuned.entries.items():
        after = tuned.entries[name]
        assert (after.min, after.max) == (entry.min, entry.max)
        # candidates run from the method's threshold up to absmax
        assert entry.threshold <= after.threshold <= max(-entry.min, entry.max), name


def test_data_list_gives_the_dataset_table(model, dataset, tmp_path, capsys):
    copy_dataset(dataset, tmp_path / "d")
    listing = tmp_path / "list.txt"  # paths relative to the list file, a blank line
    listing.write_text(
        "\n".join(f"d/{s}" for s in SAMPLES[:3])
        + "\n\n"
        + "\n".join(str(tmp_path / "d" / s) for s in SAMPLES[3:])
    )
    table_of(capsys, model, "--dataset", dataset, out=tmp_path / "a")
    table_of(capsys, model, "--data_list", listing, out=tmp_path / "b")
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


def test_input_num_takes_the_first_samples(model, dataset, tmp_path, capsys):
    table = table_of(capsys, model, "--dataset", dataset, "--input_num", "2", out=tmp_path / "t")
    assert "# sample number: 2" in table.header
    ref = reference_tensors(model.parent / "tiny.onnx", [dataset / s for s in SAMPLES[:2]])
    for name, entry in table.entries.items():
        assert_close(entry.min, float(ref[name].min()), name)
        assert_close(entry.max, float(ref[name].max()), name)


def test_tune_list(model, dataset, tmp_path, capsys):
    listing = tmp_path / "tune.txt"
    listing.write_text(f"{dataset / 's3.npy'}\n{dataset / 'img1.png'}\n")
    argv = ["--dataset", dataset, "--input_num", "3", "--tune_list", listing]
    code, _, err = calibrate(capsys, model, *argv, "-o", tmp_path / "t")
    assert code == 0, err
    assert err == ""  # fewer listed than --tune_num 10 is not worth a warning
    header = read_table(tmp_path / "t").header
    assert "# tune number: 2" in header
    assert "# sample number: 3" in header


def test_input_num_larger_than_dataset_warns(model, dataset, tmp_path, capsys):
    code, _, err = calibrate(
        capsys, model, "--dataset", dataset, "--input_num", "50", "-o", tmp_path / "t"
    )
    assert code == 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: "), err
    assert "--input_num 50" in lines[0] and "5" in lines[0]
    assert "# sample number: 5" in read_table(tmp_path / "t").header


# --- failures leave files alone -----------------------------------------------------


def add_bad_npy(folder: Path) -> Path:
    bad = folder / "s3b.npy"  # sorts after the good ones: fails mid-run
    np.save(bad, np.zeros((1, 3, 4, 4), np.float32))
    return bad


def test_failed_run_writes_no_table(model, dataset, tmp_path, capsys):
    data = copy_dataset(dataset, tmp_path / "d")
    add_bad_npy(data)
    out = tmp_path / "out" / "t"
    code, _, err = calibrate(capsys, model, "--dataset", data, "-o", out)
    assert code == 1
    assert "s3b.npy" in one_line_error(err)
    assert not out.exists()
    assert not out.parent.exists() or not list(out.parent.iterdir())  # no temp files


def test_failed_run_keeps_an_existing_table(model, dataset, tmp_path, capsys):
    data = copy_dataset(dataset, tmp_path / "d")
    add_bad_npy(data)
    out = tmp_path / "t"
    out.write_text("old table\n")
    code, _, err = calibrate(capsys, model, "--dataset", data, "-o", out)
    assert code == 1
    one_line_error(err)
    assert out.read_text() == "old table\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "t"]


def copy_model(model: Path, where: Path) -> Path:
    where.mkdir()
    for name in ("tiny.mlir", "tiny_top_f32_all_weight.npz"):
        shutil.copy(model.parent / name, where / name)
    return where / "tiny.mlir"


def test_output_on_the_mlir_is_refused(model, dataset, tmp_path, capsys):
    mlir = copy_model(model, tmp_path / "m")
    before = mlir.read_bytes()
    code, _, err = calibrate(capsys, mlir, "--dataset", dataset, "-o", mlir)
    assert code == 1
    assert "tiny.mlir" in one_line_error(err)
    assert mlir.read_bytes() == before


def test_output_on_a_folder_is_refused(model, dataset, tmp_path, capsys):
    code, _, err = calibrate(capsys, model, "--dataset", dataset, "-o", tmp_path)
    assert code == 1
    assert str(tmp_path) in one_line_error(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("victim", ["sample", "weights"])
def test_output_on_other_inputs_is_refused(victim, model, dataset, tmp_path, capsys):
    mlir = copy_model(model, tmp_path / "m")
    data = copy_dataset(dataset, tmp_path / "d")
    weights = mlir.parent / "tiny_top_f32_all_weight.npz"
    target = data / "img1.png" if victim == "sample" else weights
    before = target.read_bytes()
    code, _, err = calibrate(capsys, mlir, "--dataset", data, "-o", target)
    assert target.read_bytes() == before
    assert code == 1
    assert target.name in one_line_error(err)


# --- bad requests: one line, exit status 1, nothing written --------------------------


def bad_dataset(kind: str, dataset: Path, tmp: Path) -> tuple[list, str]:
    """A dataset with one bad sample among good ones: (argv, what the error names)."""
    data = copy_dataset(dataset, tmp / "d")
    if kind == "empty":
        shutil.rmtree(data)
        data.mkdir()
        (data / "notes.txt").write_text("not a sample\n")
        return ["--dataset", data], str(data)
    if kind == "shape":
        return ["--dataset", data], add_bad_npy(data).name
    if kind == "npz_name":
        np.savez(data / "s4b.npz", z=np.zeros((1, 3, 8, 8), np.float32))
        return ["--dataset", data], "s4b.npz"
    (data / "img1b.png").write_text("this is text, not a PNG\n")
    return ["--dataset", data], "img1b.png"


@pytest.mark.parametrize("kind", ["empty", "shape", "npz_name", "not_image"])
def test_bad_sample(kind, model, dataset, tmp_path, capsys):
    argv, named = bad_dataset(kind, dataset, tmp_path)
    out = tmp_path / "t"
    code, _, err = calibrate(capsys, model, *argv, "-o", out)
    assert code == 1
    assert "Traceback" not in err
    assert named in one_line_error(err)
    assert not out.exists()


def state_module(model: Path, tmp: Path, state: str) -> Path:
    mlir = copy_model(model, tmp / state)
    text = mlir.read_text()
    assert 'module.state = "TOP_F32"' in text
    mlir.write_text(text.replace('module.state = "TOP_F32"', f'module.state = "{state}"'))
    return mlir


BAD_FLAGS = {
    "both_sources": (["--dataset", "{d}", "--data_list", "{l}"], "--data_list"),
    "no_source": ([], "--dataset"),
    "negative_input_num": (["--dataset", "{d}", "--input_num", "-1"], "--input_num"),
    "few_bins": (["--dataset", "{d}", "--histogram_bin_num", "10"], "--histogram_bin_num"),
    "negative_tune_num": (["--dataset", "{d}", "--tune_num", "-2"], "--tune_num"),
    "missing_tune_list": (["--dataset", "{d}", "--tune_list", "{t}/none.txt"], "none.txt"),
    "missing_dataset": (["--dataset", "{t}/nothing"], "nothing"),
    "list_missing_file": (["--data_list", "{l}"], "list.txt:2"),
    "unknown_method": (["--dataset", "{d}", "--cali_method", "best"], "--cali_method"),
}


@pytest.mark.parametrize("case", sorted(BAD_FLAGS))
def test_bad_flags(case, model, dataset, tmp_path, capsys):
    listing = tmp_path / "list.txt"
    listing.write_text(f"{dataset / 'img0.png'}\n{tmp_path / 'gone.png'}\n")
    extra, named = BAD_FLAGS[case]
    argv = [a.format(d=dataset, l=listing, t=tmp_path) for a in extra]
    code, _, err = calibrate(capsys, model, *argv, "-o", tmp_path / "t")
    assert code == 1
    assert "Traceback" not in err
    assert named in one_line_error(err)
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("state", ["TOP_CALIBRATED", "TPU_LOWERED"])
def test_module_not_top_f32(state, model, dataset, tmp_path, capsys):
    mlir = state_module(model, tmp_path, state)
    code, _, err = calibrate(capsys, mlir, "--dataset", dataset, "-o", tmp_path / "t")
    assert code == 1
    line = one_line_error(err)
    assert str(mlir) in line and state in line and "TOP_F32" in line
    assert not (tmp_path / "t").exists()


def test_missing_mlir(dataset, tmp_path, capsys):
    code, _, err = calibrate(
        capsys, tmp_path / "missing.mlir", "--dataset", dataset, "-o", tmp_path / "t"
    )
    assert code == 1
    assert "missing.mlir" in one_line_error(err)


def test_all_nan_dataset_is_refused(model, tmp_path, capsys):
    """Every tensor without a finite value: no ±1e-5 table with exit 0."""
    data = tmp_path / "nan"
    data.mkdir()
    for i in range(2):
        np.save(data / f"s{i}.npy", np.full((1, 3, 8, 8), np.nan, np.float32))
    table = tmp_path / "table"
    code, _, err = run_main(main, [str(model), "--dataset", str(data), "-o", str(table)], capsys)
    assert (code, err) == (
        1,
        "error: 4 tensor(s) have no finite value over 2 sample(s) (x, r, p, …): "
        "no usable table; check the calibration data for NaN/Inf\n",
    )
    assert not table.exists()
