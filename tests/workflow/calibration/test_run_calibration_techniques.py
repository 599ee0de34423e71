"""run_calibration.py --we --bc --adaround / --search end to end, in-process,
on the residual CNN: what each run prints (layers touched, cosine before
and after), the files it writes and that model_deploy.py takes them; bad
requests end with one line and write nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from resblock import SHAPE, resblock_model
from tools_helpers import one_line_error, run_main

from tpuc.base.cali_table import read_table
from tpuc.ir.module_io import load_module
from tpuc.ir.qtable import read_qtable
from tpuc.tools import model_deploy, model_transform
from tpuc.tools.run_calibration import main


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """m.mlir (+ m_in_f32.npz, m_top.npz) and four samples in s/."""
    work = tmp_path_factory.mktemp("techniques")
    resblock_model(work / "m.onnx", width=8)
    rng = np.random.default_rng(2)
    np.savez(work / "in.npz", x=rng.standard_normal(SHAPE).astype("f4"))
    (work / "s").mkdir()
    for i in range(4):
        np.save(work / "s" / f"s{i}.npy", rng.standard_normal(SHAPE).astype("f4"))
    argv = ["--model_name", "m", "--model_def", str(work / "m.onnx"), "--test_input",
            str(work / "in.npz"), "--test_result", str(work / "m_top.npz"),
            "--mlir", str(work / "m.mlir")]  # fmt: skip
    assert model_transform.run(argv) == 0
    return work


def calibrate(work: Path, capsys, *flags: str, table="t") -> tuple[int, str, str]:
    argv = [str(work / "m.mlir"), "--dataset", str(work / "s"), "-o", str(work / table), *flags]
    return run_main(main, argv, capsys)


def test_techniques_write_a_module_model_deploy_takes(work, capsys):
    weights_before = dict(np.load(work / "m_top_f32_all_weight.npz"))
    code, out, err = calibrate(work, capsys, "--we", "--bc", "--adaround", table="tech")
    assert code == 0, err
    assert "weight equalization: 1 layer pair(s): r1 -> c2" in out, out
    assert "bias correction: 5 layer(s)" in out and "learned rounding:" in out
    assert "output cosine before:" in out and "output cosine after:" in out
    changed = work / "m_we_bc_adaround.mlir"
    assert f"changed module -> {changed}" in out
    module, store = load_module(changed)  # its weights are beside it, and load
    assert (work / "m_we_bc_adaround_top_f32_all_weight.npz").is_file()
    assert any(not np.array_equal(store[k], v) for k, v in weights_before.items() if k in store)
    assert dict(np.load(work / "m_top_f32_all_weight.npz")).keys() == weights_before.keys()
    table = read_table(work / "tech")
    assert "# mlir: m_we_bc_adaround.mlir" in table.header
    argv = ["--mlir", str(changed), "--chip", "bm1684x", "--quantize", "INT8",
            "--calibration_table", str(work / "tech"), "--test_input", str(work / "m_in_f32.npz"),
            "--test_reference", str(work / "m_top.npz"), "--tolerance", "0.9,0.5",
            "--model", str(work / "d" / "m.bmodel")]  # fmt: skip
    code, _, err = run_main(model_deploy.main, argv, capsys)
    assert code == 0, err
    del module


def test_search_qtable_writes_a_qtable(work, capsys):
    flags = ["--search", "search_qtable", "--quantize_table", str(work / "q")]
    code, out, err = calibrate(work, capsys, *flags, "--expected_cos", "0.99999", table="tq")
    assert code == 0, err
    assert "search_qtable:" in out and "candidate layer(s)" in out
    qtable = read_qtable(work / "q", load_module(work / "m.mlir")[0])
    assert all(mode == "F32" for mode in qtable.values())
    assert not (work / "m_search_qtable.mlir").exists()  # no weights changed: no module


def test_search_threshold_reports_each_method(work, capsys):
    code, out, err = calibrate(work, capsys, "--search", "search_threshold", table="ts")
    assert code == 0, err
    for method in ("kl_tune", "kl", "max", "percentile9999", "mse"):
        assert f"{method} 0." in out
    assert "['kl', 'search_threshold']" in (work / "ts").read_text()


def test_qtable_search_needs_quantize_table(work, capsys):
    code, _, err = calibrate(work, capsys, "--search", "fast_search", table="no")
    assert code == 1
    assert "give --quantize_table" in one_line_error(err)
    assert not (work / "no").exists()


def test_output_mlir_never_overwrites_the_input(work, capsys):
    before = (work / "m.mlir").read_bytes()
    code, _, err = calibrate(work, capsys, "--we", "--output_mlir", str(work / "m.mlir"),
                             table="no2")  # fmt: skip
    assert code == 1
    assert "refusing to overwrite an input file" in one_line_error(err)
    assert (work / "m.mlir").read_bytes() == before and not (work / "no2").exists()


def test_smc_without_attention_touches_nothing(work, capsys):
    """The CNN has no Softmax read by a MatMul: --smc says so and the
    module it writes computes what the input module does."""
    code, out, _ = calibrate(work, capsys, "--smc", table="smc_t")
    assert code == 0
    assert "softmax correction: 0 Softmax -> MatMul site(s)" in out
