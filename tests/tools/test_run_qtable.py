"""run_qtable.py on a CNN with one tensor INT8 cannot hold (tests/tools/
outlier_model.py): the loss table names the layer reading it first, its
qtable fixes the model with one float layer, the predicted cosine is what
model_deploy.py then measures (bm1684x and cv183x), downstream-only re-runs
equal whole-network ones, and bad requests end with one line."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from outlier_model import READER, SHAPE, outlier_model
from tools_helpers import conv_model, one_line_error, run_main

from tpuc.tools import model_deploy, model_transform, run_calibration
from tpuc.tools.run_qtable import main


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """m.mlir, m_in_f32.npz, m_top.npz, six samples in s/, m_cali."""
    work = tmp_path_factory.mktemp("qtable")
    outlier_model(work / "m.onnx")
    rng = np.random.default_rng(1)
    np.savez(work / "in.npz", x=rng.standard_normal(SHAPE).astype("f4"))
    (work / "s").mkdir()
    for i in range(6):
        np.save(work / "s" / f"s{i}.npy", rng.standard_normal(SHAPE).astype("f4"))
    argv = ["--model_name", "m", "--model_def", str(work / "m.onnx"), "--test_input",
            str(work / "in.npz"), "--test_result", str(work / "m_top.npz"),
            "--mlir", str(work / "m.mlir")]  # fmt: skip
    assert model_transform.run(argv) == 0
    argv = [str(work / "m.mlir"), "--dataset", str(work / "s"), "-o", str(work / "m_cali")]
    assert run_calibration.run(argv) == 0
    return work


def qtable(work: Path, capsys, *extra: str, chip="bm1684x", tag="q") -> tuple[str, Path, Path]:
    out, loss = work / f"{tag}_qtable", work / f"{tag}_loss.txt"
    argv = [str(work / "m.mlir"), "--calibration_table", str(work / "m_cali"), "--chip", chip,
            "-o", str(out), "--loss_table", str(loss), *extra]  # fmt: skip
    if "--data_list" not in extra:
        argv += ["--dataset", str(work / "s")]
    code, stdout, err = run_main(main, argv, capsys)
    assert code == 0, err
    return stdout, out, loss


def deploy_cos(
    work: Path, capsys, table: Path | None, chip="bm1684x", auto_mix: list | None = None
) -> float:
    """The deployed INT8 output's cosine; with `auto_mix` (a list that gets
    model_deploy's stdout) the automatic mixed precision runs, else it is off."""
    tag = "auto" if auto_mix is not None else "int8"
    out = work / f"deploy_{chip}_{table.name if table else tag}"
    argv = ["--mlir", str(work / "m.mlir"), "--chip", chip, "--quantize", "INT8",
            "--calibration_table", str(work / "m_cali"), "--test_input",
            str(work / "m_in_f32.npz"), "--test_reference", str(work / "m_top.npz"),
            "--tolerance=-1,-1", "--model", str(out / "m.bmodel")]  # fmt: skip
    if table is not None:
        argv += ["--quantize_table", str(table)]
    argv += ["--disable_auto_mix"] if auto_mix is None else []
    code, stdout, err = run_main(model_deploy.main, argv, capsys)
    if auto_mix is not None:
        auto_mix.append(stdout)
    assert code == 0, err
    got = np.load(next(out.glob("*_tpu_outputs.npz")))["y"].astype(np.float64).ravel()
    want = np.load(work / "m_top.npz")["y"].astype(np.float64).ravel()
    return float(got @ want / np.linalg.norm(got) / np.linalg.norm(want))


def layers(loss_table: Path) -> list[tuple[str, float]]:
    rows = re.findall(r"^No\.\d+\s*: Layer: (\S+)\s+Loss: (\S+)$", loss_table.read_text(), re.M)
    return [(name, float(loss)) for name, loss in rows]


def test_names_the_outlier_reader_first_and_its_qtable_fixes_the_model(work, capsys):
    assert deploy_cos(work, capsys, None) < 0.95  # all INT8
    stdout, out, loss = qtable(work, capsys)
    rows = layers(loss)
    assert rows[0][0] == READER
    assert [loss for _, loss in rows] == sorted(loss for _, loss in rows)
    text = loss.read_text()
    assert "# sample number: 6" in text and "# chip: bm1684x  mix_mode: F32" in text
    chosen = [line.split() for line in out.read_text().splitlines() if not line.startswith("#")]
    assert chosen == [[READER, "F32"]]
    assert deploy_cos(work, capsys, out) >= 0.99
    assert "1 float layers" in stdout and "reaches --expected_cos" in stdout


def test_model_deploy_keeps_the_lossy_tensor_in_float_by_default(work, capsys):
    """Calibration measured 'ca' (sparse outliers 1000x the bulk) as lossy;
    model_deploy keeps its producer and its reader in F16 on its own."""
    assert "# int8_lossy ca " in (work / "m_cali").read_text()
    stdout: list[str] = []
    assert deploy_cos(work, capsys, None, auto_mix=stdout) >= 0.99
    assert "kept 2 layers in F16: ca (" in stdout[0] and f", {READER} (" in stdout[0]
    auto = next((work / "deploy_bm1684x_auto").glob("*_auto_qtable")).read_text()
    assert [line.split() for line in auto.splitlines() if not line.startswith("#")] == [
        ["ca", "F16"],
        [READER, "F16"],
    ]
    # cv183x has no F16: its float fallback, BF16
    stdout = []
    deploy_cos(work, capsys, None, chip="cv183x", auto_mix=stdout)
    assert "kept 2 layers in BF16" in stdout[0]


@pytest.mark.parametrize(("chip", "mode"), [("bm1684x", "F32"), ("cv183x", "BF16")])
def test_predicted_cosine_is_what_model_deploy_measures(work, capsys, chip, mode):
    listing = work / "list.txt"
    listing.write_text(str(work / "m_in_f32.npz") + "\n")
    stdout, out, _ = qtable(work, capsys, "--data_list", str(listing), chip=chip, tag=chip)
    predicted = float(re.search(r"predicted output cosine (\S+)", stdout).group(1))
    if chip == "bm1684x":  # cv18xx has no float epilogue: the reader alone gains nothing
        assert f"{READER} {mode}" in out.read_text()
    assert f"mix_mode: {mode}" in out.read_text()
    assert deploy_cos(work, capsys, out, chip) == pytest.approx(predicted, abs=1e-6)


def test_downstream_only_runs_equal_whole_network_runs(work):
    from tpuc.ir.module_io import load_module
    from tpuc.target.chips import get_chip
    from tpuc.workflow.mixed_precision import MixedPrecisionSearch

    module, store = load_module(work / "m.mlir")
    samples = [{"x": np.load(p)} for p in sorted((work / "s").glob("*.npy"))[:3]]
    chip = get_chip("bm1684x")
    fast, full = (MixedPrecisionSearch(module, store, work / "m_cali", chip, samples, downstream)
                  for downstream in (True, False))  # fmt: skip
    for name in fast.layers():
        assert fast.evaluate({name: "F32"}) == full.evaluate({name: "F32"})
    assert fast.stats.ops_reused > 0 and full.stats.ops_reused == 0
    assert fast.stats.ops_run < full.stats.ops_run


def test_a_candidate_leaves_the_weights_of_unchanged_ops_unread(work, monkeypatch):
    """The last conv in float: the convs before its reader (whose epilogue
    turns float) are the all-INT8 run's, so their weights are not even
    decoded; the cosine is the whole-network one."""
    from tpuc.interp.tpu_interpreter import TpuInterpreter
    from tpuc.ir.module_io import load_module
    from tpuc.target.chips import get_chip
    from tpuc.workflow.mixed_precision import MixedPrecisionSearch

    module, store = load_module(work / "m.mlir")
    samples = [{"x": np.load(p)} for p in sorted((work / "s").glob("*.npy"))[:2]]
    chip = get_chip("bm1684x")
    fast, full = (MixedPrecisionSearch(module, store, work / "m_cali", chip, samples, downstream)
                  for downstream in (True, False))  # fmt: skip
    decode = TpuInterpreter._weight
    decoded: list[str] = []

    def recording(op, expected, weights):
        decoded.append(op.names[0])
        return decode(op, expected, weights)

    monkeypatch.setattr(TpuInterpreter, "_weight", staticmethod(recording))
    cos = fast.evaluate({"y": "F32"})
    fast_reads = set(decoded)
    assert cos == full.evaluate({"y": "F32"})
    upstream = {"r1_filter_i8", "r1_bias_i32", "ca_filter_i8"}
    assert "WY" in fast_reads and not fast_reads & upstream
    assert upstream <= set(decoded)


def test_bad_requests_end_with_one_line(work, tmp_path, capsys):
    base = [str(work / "m.mlir"), "--dataset", str(work / "s"), "--input_num", "6", "-o",
            str(tmp_path / "q")]  # fmt: skip
    conv_model(tmp_path / "other.onnx")
    other = tmp_path / "other.mlir"
    assert model_transform.run(["--model_name", "o", "--model_def", str(tmp_path / "other.onnx"),
                                "--mlir", str(other)]) == 0  # fmt: skip
    other_table = tmp_path / "other_cali"
    np.save(tmp_path / "o.npy", np.ones((1, 3, 8, 8), "f4"))
    capsys.readouterr()
    assert run_calibration.run([str(other), "--data_list", str(_list(tmp_path)), "-o",
                                str(other_table)]) == 0  # fmt: skip
    cases = {
        "no such file": [*base, "--calibration_table", str(tmp_path / "missing"), "--chip",
                         "bm1684x"],
        "table from another model": [*base, "--calibration_table", str(other_table), "--chip",
                                "bm1684x"],
        "does not support F32": [*base, "--calibration_table", str(work / "m_cali"), "--chip",
                                 "cv183x", "--fp_type", "F32"],
        "between -1 and 1": [*base, "--calibration_table", str(work / "m_cali"), "--chip",
                             "bm1684x", "--expected_cos", "2"],
        "refusing to overwrite": [*base[:5], "--calibration_table", str(work / "m_cali"),
                                  "--chip", "bm1684x", "-o", str(work / "m_cali")],
    }  # fmt: skip
    for expected, argv in cases.items():
        code, _, err = run_main(main, argv, capsys)
        assert code == 1
        assert expected in one_line_error(err), (expected, err)
    assert not (tmp_path / "q").exists()


def _list(tmp_path: Path) -> Path:
    listing = tmp_path / "o_list.txt"
    listing.write_text(str(tmp_path / "o.npy") + "\n")
    return listing
