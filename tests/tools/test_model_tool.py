"""model_tool.py: --info/--weight/--chip/--print, --combine run stage by stage
bit for bit like the separate bmodels (tpuc's simulator and the vendor
runtime), --extract, --kernel_dump/--kernel_remove/--kernel_update, --dump,
and its bad inputs as one line with nothing written.

The tiny CNN (global pooling, so any H x W) is deployed at 8x8 and 12x12;
the native tests need the vendor component (they fail without it).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from tiny_cnn import cnn_model

from tpuc.base.errors import TpucError
from tpuc.target.bmodel import HEADER_SIZE, load_bmodel_file
from tpuc.target.bmodel.container import _HEADER
from tpuc.tools import model_deploy, model_runner, model_tool, model_transform

SIZES = (8, 12)


def _deploy(work, size: int, codegen: str, name: str = "cnn", extra=(), tag: str = "") -> str:
    mlir = work / f"{tag or name}{size}.mlir"
    if not mlir.exists():
        argv = ["--model_name", name, "--model_def", str(work / "cnn.onnx")]
        argv += ["--input_shapes", f"[[1,3,{size},{size}]]", "--mlir", str(mlir), *extra]
        assert model_transform.run(argv) == 0
    bmodel = work / f"{tag or name}{size}_{codegen}.bmodel"
    argv = ["--mlir", str(mlir), "--chip", "bm1684x", "--quantize", "F32"]
    assert model_deploy.run([*argv, "--codegen", codegen, "--model", str(bmodel)]) == 0
    return str(bmodel)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """cnn.onnx, inputs x8.npz / x12.npz, and the tpuc bmodels at both sizes."""
    work = tmp_path_factory.mktemp("model_tool")
    cnn_model(work / "cnn.onnx")
    rng = np.random.default_rng(3)
    for size in SIZES:
        x = rng.standard_normal((1, 3, size, size)).astype(np.float32)
        np.savez(work / f"x{size}.npz", x=x)
        _deploy(work, size, "tpuc")
    return work


@pytest.fixture(scope="module")
def native(work, vendor):
    """The native bmodels at both sizes (the vendor component is required)."""
    return [_deploy(work, size, "native") for size in SIZES]


def tool(*argv) -> int:
    return model_tool.run([str(a) for a in argv])


def run_model(work, bmodel, size: int, out) -> np.ndarray:
    argv = ["--input", work / f"x{size}.npz", "--model", bmodel, "--output", out]
    assert model_runner.run([str(a) for a in argv]) == 0
    return np.load(out)["logits"]


def test_info_of_a_tpuc_bmodel(work, capsys):
    """TPU-MLIR's layout, the instruction set named, the sizes of the file."""
    path = work / "cnn8_tpuc.bmodel"
    assert tool("--info", path) == 0
    text = capsys.readouterr().out
    model = load_bmodel_file(path)
    param = model.nets[0].parameters[0]
    commands = sum(len(g.bdc) + len(g.gdma) for s in param.subnets for g in s.cmd_groups)
    assert text.startswith(f"bmodel version: tpuc.{model.version}\nchip: BM1684X\n")
    assert "instruction set: tpuc (tpuc's own ISA" in text
    assert "no kernel_module\n" in text
    assert "net 0: [cnn]  static\n------------\nstage 0, core num: 1\n" in text
    assert "input: x, [1, 3, 8, 8], float32, scale: 1, zero_point: 0\n" in text
    assert "output: logits, [1, 5], float32, scale: 1, zero_point: 0\n" in text
    weight, runtime = len(param.coeff), param.ctx_size
    assert (
        f"device mem size: {weight + commands + runtime} (weight: {weight}, instruct: "
        f"{commands}, runtime: {runtime})\n"
    ) in text
    assert text.endswith("bmodel is not 4k aligned\n")


def test_combine_tpuc_runs_each_stage_bit_identical(work, tmp_path, capsys):
    separate = [work / f"cnn{size}_tpuc.bmodel" for size in SIZES]
    combined = tmp_path / "c.bmodel"
    assert tool("--combine", *separate, "-o", combined) == 0
    assert f"Success: combined to [{combined}]." in capsys.readouterr().out
    model = load_bmodel_file(combined)
    assert [p.inputs[0].shape for p in model.nets[0].parameters] == [(1, 3, 12, 12), (1, 3, 8, 8)]
    assert model.neuron_size == max(p.ctx_size for p in model.nets[0].parameters)
    for size, bmodel in zip(SIZES, separate, strict=True):
        want = run_model(work, bmodel, size, tmp_path / f"s{size}.npz")
        got = run_model(work, combined, size, tmp_path / f"c{size}.npz")
        assert np.array_equal(got, want)
    assert tool("--info", combined) == 0
    text = capsys.readouterr().out
    assert "stage 0, core num: 1\ninput: x, [1, 3, 12, 12]" in text
    assert "stage 1, core num: 1\ninput: x, [1, 3, 8, 8]" in text


def test_shape_of_no_stage_is_one_line(work, tmp_path):
    combined = tmp_path / "c.bmodel"
    assert tool("--combine", *(work / f"cnn{s}_tpuc.bmodel" for s in SIZES), "-o", combined) == 0
    np.savez(tmp_path / "x.npz", x=np.zeros((1, 3, 10, 10), np.float32))
    argv = ["--input", tmp_path / "x.npz", "--model", combined, "--output", tmp_path / "o.npz"]
    with pytest.raises(TpucError, match=r"no stage takes inputs of these shapes \(x \[1, 3, 10"):
        model_runner.run([str(a) for a in argv])
    assert not (tmp_path / "o.npz").exists()


def test_extract_gives_back_each_stage(work, tmp_path, capsys):
    combined = tmp_path / "c.bmodel"
    assert tool("--combine", *(work / f"cnn{s}_tpuc.bmodel" for s in SIZES), "-o", combined) == 0
    out = tmp_path / "parts"
    assert tool("--extract", combined, "-o", out) == 0
    assert "Success: all files have been generated!" in capsys.readouterr().out
    for stage, size in enumerate(reversed(SIZES)):  # the largest stage first
        part = load_bmodel_file(out / f"bm_net0_stage{stage}.bmodel")
        original = load_bmodel_file(work / f"cnn{size}_tpuc.bmodel")
        assert part.nets[0].parameters == original.nets[0].parameters


def test_two_nets_and_weights(work, tmp_path, capsys):
    other = _deploy(work, 8, "tpuc", name="other")
    combined = tmp_path / "two.bmodel"
    assert tool("--combine", work / "cnn8_tpuc.bmodel", other, "-o", combined) == 0
    assert [n.name for n in load_bmodel_file(combined).nets] == ["cnn", "other"]
    capsys.readouterr()
    assert tool("--weight", combined) == 0
    text = capsys.readouterr().out
    assert 'net 0 : "cnn", stage:0\n' in text and 'net 1 : "other", stage:0\n' in text
    assert tool("--chip", combined) == 0
    assert capsys.readouterr().out == "BM1684X\n"


def test_dump_cuts_the_blob(work, tmp_path, capsys):
    path = work / "cnn8_tpuc.bmodel"
    data = path.read_bytes()
    _, _, fb_size, _ = _HEADER.unpack_from(data)
    assert tool("--dump", path, "0x10", "32", tmp_path / "d.bin") == 0
    blob = HEADER_SIZE + fb_size
    assert (tmp_path / "d.bin").read_bytes() == data[blob + 16 : blob + 48]
    with pytest.raises(TpucError, match="lies outside its"):
        tool("--dump", path, "0", str(len(data)), tmp_path / "e.bin")
    assert not (tmp_path / "e.bin").exists()


# --- native bmodels ----------------------------------------------------------------


def test_combine_native_runs_each_stage_bit_identical(work, native, tmp_path, capsys):
    """The vendor runtime runs both stages of the combined file exactly as
    the separate files; coefficients and kernel module are stored once."""
    combined = tmp_path / "n.bmodel"
    assert tool("--combine", *native, "-o", combined) == 0
    for size, bmodel in zip(SIZES, native, strict=True):
        want = run_model(work, bmodel, size, tmp_path / f"s{size}.npz")
        got = run_model(work, combined, size, tmp_path / f"c{size}.npz")
        assert np.array_equal(got, want)
    capsys.readouterr()
    assert tool("--info", combined) == 0
    text = capsys.readouterr().out
    assert "instruction set: BM1684X native command streams" in text
    assert "kernel_module name: libbm1684x_kernel_module.so\n" in text
    assert text.count("------------\nstage ") == 2
    assert text.endswith("bmodel is 4k aligned\n")
    sizes = [os.path.getsize(p) for p in native]
    assert os.path.getsize(combined) < sum(sizes) - 5_000_000  # one kernel module


def test_kernel_dump_remove_update(native, vendor, tmp_path, capsys):
    path = native[0]
    assert tool("--kernel_dump", path, "-o", tmp_path / "k.so") == 0
    assert (tmp_path / "k.so").read_bytes() == vendor.kernel_module.read_bytes()
    before = Path(path).read_bytes()
    stripped = tmp_path / "stripped.bmodel"
    assert tool("--kernel_remove", path, "-o", stripped) == 0
    assert Path(path).read_bytes() == before  # -o: the input is left alone
    capsys.readouterr()
    assert tool("--info", stripped) == 0
    assert "no kernel_module\n" in capsys.readouterr().out
    with pytest.raises(TpucError, match="no kernel module embedded"):
        tool("--kernel_dump", stripped, "-o", tmp_path / "none.so")
    assert tool("--kernel_update", stripped, tmp_path / "k.so") == 0  # in place
    assert tool("--kernel_dump", stripped, "-o", tmp_path / "k2.so") == 0
    assert (tmp_path / "k2.so").read_bytes() == (tmp_path / "k.so").read_bytes()


# --- bad input ----------------------------------------------------------------------


def test_bad_inputs_are_one_line_and_write_nothing(work, native, tmp_path):
    own = work / "cnn8_tpuc.bmodel"
    text = tmp_path / "notes.bmodel"
    text.write_text("not a model\n" * 10)
    out = tmp_path / "out.bmodel"
    cases = [
        (("--info", text), "not a bmodel"),
        (("--info", tmp_path / "missing.bmodel"), "no such file"),
        (("--combine", own, own, "-o", out), "both take inputs of shape"),
        (("--combine", own, native[1], "-o", out), "one instruction set per bmodel"),
        (("--combine", own, "-o", out), "at least two"),
        (("--combine", own, work / "cnn12_tpuc.bmodel", "-o", own), "is the input"),
        (("--kernel_dump", own), "no kernel module embedded"),
        (("--kernel_update", own, text), "tpuc's device simulator loads no kernel module"),
        (("--dump", own, "zero", "4", out), "not a decimal or 0x hex number"),
        (("--info", own, "-o", out), "-o applies to"),
    ]
    for argv, message in cases:
        with pytest.raises(TpucError, match=message) as info:
            tool(*argv)
        assert "\n" not in str(info.value)
        assert not out.exists()


def test_cut_outputs_of_the_same_net_are_refused(work, tmp_path):
    """Same net name, other outputs: not a stage of the same net."""
    cut = _deploy(work, 12, "tpuc", name="cnn", extra=("--output_names", "r1"), tag="cut")
    with pytest.raises(TpucError, match="their outputs differ"):
        tool("--combine", work / "cnn8_tpuc.bmodel", cut, "-o", tmp_path / "c.bmodel")
    assert not (tmp_path / "c.bmodel").exists()


def test_output_hard_linked_to_an_input_is_refused(work, tmp_path):
    own = work / "cnn8_tpuc.bmodel"
    link = tmp_path / "link.bmodel"
    os.link(own, link)
    before = own.read_bytes()
    with pytest.raises(TpucError, match="is a link to the input"):
        tool("--combine", own, work / "cnn12_tpuc.bmodel", "-o", link)
    assert own.read_bytes() == before


def test_damaged_bmodel_is_one_line(work, tmp_path):
    data = bytearray((work / "cnn8_tpuc.bmodel").read_bytes())
    cut = tmp_path / "cut.bmodel"
    cut.write_bytes(bytes(data[:-100]))
    with pytest.raises(TpucError, match="damaged bmodel: its header says"):
        tool("--info", cut)
