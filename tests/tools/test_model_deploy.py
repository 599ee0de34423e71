"""model_deploy.py on a tiny CNN: every mode on bm1684x and cv183x, the
files it writes (the bmodel, bit-identical to the TPU interpreter in the
device simulator), mixed precision, the first-divergent-layer
message, reproducibility, and every bad request ending with one line, exit
status 1 and no file written."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from tools_helpers import one_line_error, run_main

from tpuc.tools.model_deploy import main

LAYERS = ["r1", "r2", "s", "p", "f", "logits"]
"""TOP tensors of the CNN below, in graph order (Relu fused into Conv)."""


def deploy(prepared, out, capsys, mode, *extra, chip="bm1684x", validate=True):
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", chip, "--quantize", mode]
    argv += ["--model", str(out / "cnn.bmodel")]
    if mode.upper() == "INT8":
        argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
    if validate:
        argv += ["--test_input", str(prepared / "cnn_in_f32.npz")]
        argv += ["--test_reference", str(prepared / "cnn_top_outputs.npz")]
    return run_main(main, argv + [s.format(d=prepared, o=out) for s in extra], capsys)


def files_in(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()} if directory.exists() else set()


def load(path: Path):
    from tpuc.ir.module_io import load_module

    return load_module(path)


@pytest.mark.parametrize(
    "chip, mode, extra, prefix",
    [
        ("bm1684x", "F32", [], "cnn_bm1684x_f32"),
        ("bm1684x", "f16", [], "cnn_bm1684x_f16"),
        ("bm1684x", "BF16", [], "cnn_bm1684x_bf16"),
        ("bm1684x", "INT8", [], "cnn_bm1684x_int8_sym"),
        ("bm1684x", "INT8", ["--asymmetric"], "cnn_bm1684x_int8_asym"),
        ("cv183x", "INT8", [], "cnn_cv183x_int8_sym"),
        ("cv183x", "BF16", [], "cnn_cv183x_bf16"),
    ],
)
def test_modes_pass_and_write_their_files(prepared, tmp_path, capsys, chip, mode, extra, prefix):
    code, out, err = deploy(prepared, tmp_path, capsys, mode, *extra, chip=chip)
    assert code == 0, err
    expected = {f"{prefix}_tpu.mlir", f"{prefix}_tpu_weight.npz", f"{prefix}_tpu_outputs.npz"}
    expected |= {f"{prefix}_final.mlir", f"{prefix}_final_weight.npz", "cnn.bmodel"}
    expected |= {f"{prefix}_tensor_location.json", f"{prefix}_model_outputs.npz"}
    assert files_in(tmp_path) == expected
    assert "TPU module matches the reference" in out
    assert "bmodel matches the TPU interpreter bit for bit (1 output(s))" in out
    final = (tmp_path / f"{prefix}_final.mlir").read_text()
    assert 'module.state = "TPU_ADDRESSED"' in final and "module.neuron_size" in final
    outputs = tmp_path / f"{prefix}_model_outputs.npz", tmp_path / f"{prefix}_tpu_outputs.npz"
    with np.load(outputs[0]) as bm, np.load(outputs[1]) as tpu:
        assert np.array_equal(bm["logits"], tpu["logits"])
    assert "min_similiarity = " in out
    module, store = load(tmp_path / f"{prefix}_tpu.mlir")
    text = (tmp_path / f"{prefix}_tpu.mlir").read_text()
    assert 'module.state = "TPU_LOWERED"' in text
    assert f'module.chip = "{chip}"' in text
    assert f'module.weight_file = "{prefix}_tpu_weight.npz"' in text
    assert "top.Conv" not in text and "tpu.Conv2D" in text
    weight_ops = {op.names[0] for op in module.walk() if op.name == "top.Weight"}
    assert set(store) == weight_ops  # only live weights
    if mode.upper() == "INT8":
        zero_points = re.findall(r"quant\.uniform<[iu]8:f32, [-+.e0-9]+(?::(-?\d+))?>", text)
        assert zero_points and any(int(z or 0) != 0 for z in zero_points) == ("asym" in prefix)
        assert any(a.dtype == np.int8 for a in store.values())
    with np.load(tmp_path / f"{prefix}_tpu_outputs.npz") as data:
        assert set(data.files) == {"logits"}
        assert data["logits"].dtype == np.float32


def test_f32_matches_top(prepared, tmp_path, capsys):
    """F32 runs the numpy kernels, the TOP reference onnxruntime's: equal to
    float32 rounding."""
    code, _, err = deploy(prepared, tmp_path, capsys, "F32", "--compare_all")
    assert code == 0, err
    with (
        np.load(tmp_path / "cnn_bm1684x_f32_tpu_outputs.npz") as tpu,
        np.load(prepared / "cnn_top_outputs.npz") as top,
    ):
        assert set(LAYERS) <= set(tpu.files)
        for name in LAYERS:
            np.testing.assert_allclose(tpu[name], top[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_compare_all_and_debug_keep_intermediates(prepared, tmp_path, capsys):
    code, out, err = deploy(prepared, tmp_path, capsys, "INT8", "--compare_all", "--debug")
    assert code == 0, err
    assert "cnn_bm1684x_int8_sym_top_calibrated.mlir" in files_in(tmp_path)
    for name in LAYERS:
        assert f"[{name} " in out  # one line per tensor with --debug
    with np.load(tmp_path / "cnn_bm1684x_int8_sym_tpu_outputs.npz") as tpu:
        assert set(LAYERS) <= set(tpu.files)
    calibrated, _ = load(tmp_path / "cnn_bm1684x_int8_sym_top_calibrated.mlir")
    assert calibrated.attributes["module.state"].data == "TOP_CALIBRATED"


def test_without_test_input_compiles_without_checking(prepared, tmp_path, capsys):
    code, out, err = deploy(prepared, tmp_path, capsys, "F16", validate=False)
    assert code == 0, err
    prefix = "cnn_bm1684x_f16"
    assert files_in(tmp_path) == {
        f"{prefix}_tpu.mlir",
        f"{prefix}_tpu_weight.npz",
        f"{prefix}_final.mlir",
        f"{prefix}_final_weight.npz",
        f"{prefix}_tensor_location.json",
        "cnn.bmodel",
    }
    assert "compared" not in out and "device simulator" not in out


def test_reference_defaults_to_the_top_interpreter(prepared, tmp_path, capsys):
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1688", "--quantize", "F32"]
    argv += ["--model", str(tmp_path / "m.bmodel"), "--test_input", str(prepared / "in.npz")]
    code, out, err = run_main(main, argv, capsys)
    assert code == 0, err
    assert "comparing with the TOP interpreter" in out
    assert "0 not similar" in out


def _modes_by_layer(path: Path) -> dict[str, str]:
    module, _ = load(path)
    return {op.names[0]: str(op.results[0].type) for op in module.walk() if hasattr(op, "names")}


@pytest.mark.parametrize("mode, layer, other", [("F16", "r2", "r1"), ("INT8", "r2", "r1")])
def test_quantize_table_mixes_modes_with_casts(prepared, tmp_path, capsys, mode, layer, other):
    qtable = tmp_path / "qtable"
    qtable.write_text(f"# op_name quantize_mode\n{layer} F32\n")
    code, _, err = deploy(prepared, tmp_path, capsys, mode, "--quantize_table", str(qtable))
    assert code == 0, err
    prefix = "cnn_bm1684x_f16" if mode == "F16" else "cnn_bm1684x_int8_sym"
    text = (tmp_path / f"{prefix}_tpu.mlir").read_text()
    assert '"tpu.Cast"' in text
    types = _modes_by_layer(tmp_path / f"{prefix}_tpu.mlir")
    assert types[layer].endswith("xf32>")
    assert "f16" in types[other] if mode == "F16" else "quant.uniform" in types[other]


def test_first_layer_below_tolerance_is_named(prepared, tmp_path, capsys):
    code, out, err = deploy(
        prepared, tmp_path, capsys, "INT8", "--tolerance", "0.99999999,0.9999999"
    )
    assert code == 1
    line = one_line_error(err)
    assert line.startswith("error: INT8 result differs from TOP (cos ")
    assert "at 'logits'" in line
    assert "first layer below tolerance: 'r1' (cos " in line  # the first quantized conv
    # files are kept for inspection
    assert "cnn_bm1684x_int8_sym_tpu_outputs.npz" in files_in(tmp_path)


def test_layer_search_runs_top_when_reference_has_only_outputs(prepared, tmp_path, capsys):
    with np.load(prepared / "cnn_top_outputs.npz") as top:
        np.savez(tmp_path / "ref.npz", logits=top["logits"])
    code, _, err = deploy(
        prepared,
        tmp_path,
        capsys,
        "BF16",
        "--test_reference",
        "{o}/ref.npz",
        "--tolerance",
        "0.99999999,0.9999999",
    )
    assert code == 1
    assert "first layer below tolerance: 'r1'" in one_line_error(err)


def test_outputs_are_byte_identical_across_runs(prepared, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # the bmodel's time field
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        code, _, err = deploy(prepared, out, capsys, "INT8", "--compare_all")
        assert code == 0, err
    assert files_in(first) == files_in(second) and len(files_in(first)) == 8
    for name in files_in(first):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


@pytest.fixture(scope="module")
def lowered(prepared, tmp_path_factory):
    """A TPU_LOWERED module (the output of a first deployment)."""
    out = tmp_path_factory.mktemp("lowered")
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "F32"]
    from tpuc.tools.model_deploy import run

    assert run(argv + ["--model", str(out / "cnn.bmodel")]) == 0
    return out / "cnn_bm1684x_f32_tpu.mlir"


def _bad_files(d: Path, lowered: Path) -> None:
    (d / "ghosts.qtable").write_text("ghost1 F32\nr1 F16\nghost2 BF16\n")
    (d / "int4.qtable").write_text("r1 INT4\n")
    (d / "int8.qtable").write_text("r1 INT8\n")
    (d / "f16.qtable").write_text("r1 F16\n")
    (d / "partial_table").write_text("# op_name threshold min max\nx 1.0 -1.0 1.0\n")
    (d / "junk.npz").write_bytes(b"PK\x03\x04 not really")
    shutil.copy(lowered, d / "lowered.mlir")
    shutil.copy(lowered.with_name("cnn_bm1684x_f32_tpu_weight.npz"), d)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--mlir", "{i}/nope.mlir"], "--mlir {i}/nope.mlir: no such file"),
        (["--calibration_table", "{i}/nope_table"], "--calibration_table {i}/nope_table: no such"),
        (["--test_input", "{i}/junk.npz"], "junk.npz: not a readable npz file"),
        (["--test_input", "{d}/cnn_in_f32.npz", "--test_reference", "{i}/junk.npz"], "junk.npz"),
        (["--test_reference", "{d}/cnn_top_outputs.npz"], "--test_reference needs --test_input"),
        (["--tolerance", "0.9"], "--tolerance"),
        (["--tolerance", "1.5,0.5"], "--tolerance 1.5,0.5: a cosine similarity lies in [-1, 1]"),
        (
            ["--quantize_table", "{i}/ghosts.qtable"],
            "2 layer(s) not in the module (ghost1, ghost2)",
        ),
        (["--quantize_table", "{i}/int4.qtable"], "unknown mode 'INT4'"),
        (["--quantize", "INT8", "--calibration_table", "{i}/partial_table"], "no entry for"),
        (["--quantize", "INT8"], "--quantize INT8 need a calibration table"),
        (["--quantize_table", "{i}/int8.qtable"], "INT8 layers in the quantize table need"),
        (["--chip", "cv183x", "--quantize", "F16"], "chip cv183x does not support F16"),
        (["--chip", "cv183x", "--quantize_table", "{i}/f16.qtable"], "does not support F16"),
        (
            ["--chip", "cv182x", "--quantize", "INT8", "--asymmetric"],
            "chip cv182x does not support asymmetric",
        ),
        (["--mlir", "{i}/lowered.mlir"], "module is in state TPU_LOWERED"),
        (["--chip", "bm1234"], "invalid choice: 'bm1234'"),
        (["--quantize", "INT4"], "invalid choice: 'INT4'"),
        (["--model", "{i}"], "is a folder"),
    ],
)
def test_bad_requests_leave_nothing(prepared, lowered, tmp_path, capsys, argv, needle):
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    _bad_files(inputs, lowered)
    base = {"--mlir": str(prepared / "cnn.mlir"), "--chip": "bm1684x", "--quantize": "BF16"}
    base["--model"] = str(out / "cnn.bmodel")
    given = [a.format(d=prepared, i=inputs) for a in argv]
    for flag, value in base.items():
        if flag not in given:
            given += [flag, value]
    before = files_in(inputs)
    code, _, err = run_main(main, given, capsys)
    assert code == 1
    line = one_line_error(err)
    assert needle.format(i=inputs) in line, line
    assert files_in(out) == set()
    assert files_in(inputs) == before


def test_refuses_to_overwrite_inputs(prepared, lowered, tmp_path, capsys):
    """A test input named like an output is never overwritten."""
    victim = tmp_path / "cnn_bm1684x_bf16_tpu_outputs.npz"
    shutil.copy(prepared / "cnn_in_f32.npz", victim)
    data = victim.read_bytes()
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "BF16"]
    argv += ["--model", str(tmp_path / "cnn.bmodel"), "--test_input", str(victim)]
    code, _, err = run_main(main, argv, capsys)
    assert code == 1 and "refusing to overwrite an input file" in one_line_error(err)
    assert victim.read_bytes() == data
    assert files_in(tmp_path) == {victim.name}


def test_help_is_the_console_script():
    for script in ("model_deploy.py", "model_deploy"):
        proc = subprocess.run([script, "--help"], capture_output=True, text=True)
        assert proc.returncode == 0 and "--calibration_table" in proc.stdout


def test_library_lower_verify_and_layer_names(prepared):
    """tpuc.workflow.deploy from Python: lower in place, verify against a TOP run, and
    the TPU layers map back to TOP names in graph order."""
    from tpuc.base.compare import Tolerance
    from tpuc.workflow.deploy import layer_names, lower, verify

    module, store = load(prepared / "cnn.mlir")
    top = module.clone()
    lower(module, "bm1684x", "int8", cali_table=prepared / "cnn_cali_table")
    assert module.attributes["module.state"].data == "TPU_LOWERED"
    pairs = layer_names(module, LAYERS + ["x"])
    assert [top_name for _, top_name in pairs] == LAYERS
    for tpu_name, top_name in pairs:  # an output producer may be renamed <name>_<type>
        assert tpu_name == top_name or re.fullmatch(rf"{top_name}_(i8|u8|f16|bf16)", tpu_name)
    with np.load(prepared / "cnn_in_f32.npz") as data:
        inputs = {"x": data["x"]}
    check = verify(module, store, inputs, Tolerance(0.99, 0.9), top_module=top, compare_all=True)
    assert check.passed and check.layer is None
    assert set(LAYERS) <= set(check.values)
    strict = verify(module, store, inputs, Tolerance(0.99999999, 0.9999999), top_module=top)
    assert not strict.passed and strict.layer is not None and strict.layer.top_name == "r1"


def test_image_input_and_excepts(prepared, tmp_path, capsys):
    """An image is preprocessed as recorded on top.Input; --excepts drops tensors."""
    from PIL import Image

    pixels = np.random.default_rng(3).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(tmp_path / "cat.png")
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "F32"]
    argv += [
        "--model",
        str(tmp_path / "out" / "m.bmodel"),
        "--test_input",
        str(tmp_path / "cat.png"),
    ]
    argv += ["--compare_all", "--excepts", "logits", "--debug"]
    code, out, err = run_main(main, argv, capsys)
    assert code == 0, err
    assert "[r1 " in out and "[logits " not in out
    assert "5 compared" in out  # r1 r2 s p f; the input is never compared


def test_failed_address_assign_leaves_no_folder(tmp_path, capsys):
    """A model too big for the chip's global memory fails in address-assign,
    after outputs were staged in a new folder: the folder goes too."""
    from tools_helpers import conv_model

    from tpuc.tools import model_transform

    conv_model(tmp_path / "big.onnx", batch="n")
    argv = ["--model_name", "big", "--model_def", str(tmp_path / "big.onnx")]
    argv += ["--input_shapes", "[[4096,3,256,256]]", "--mlir", str(tmp_path / "big.mlir")]
    assert run_main(model_transform.main, argv, capsys)[0] == 0
    out = tmp_path / "new" / "sub"
    argv = ["--mlir", str(tmp_path / "big.mlir"), "--chip", "bm1684x", "--quantize", "F32"]
    code, _, err = run_main(main, [*argv, "--model", str(out / "big.bmodel")], capsys)
    assert code == 1
    assert one_line_error(err).startswith("error: address-assign: the model needs ")
    assert not (tmp_path / "new").exists()
