"""tpuc-demo end to end on the bundled tinycnn: the four stages, the
similarity it prints at each (checked against onnxruntime and numpy here),
a bit-identical bmodel, and one-line errors."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from tools_helpers import one_line_error, run_main

from tpuc.tools import demo
from tpuc.tools.demo import main

PREFIX = "tinycnn_bm1684x_int8_sym"
LINE = re.compile(r"^ {6}(?P<what>.+?) +'(?P<name>\w+)': cosine (?P<cos>[0-9.]+)(?P<rest>.*)$")


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """(workdir, stdout) of one demo run."""
    workdir = tmp_path_factory.mktemp("demo") / "out"  # created by the demo
    out = io.StringIO()  # capsys is per test; this fixture runs once per module
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as info:
        main(["--workdir", str(workdir)])
    assert (info.value.code or 0) == 0, out.getvalue()
    return workdir, out.getvalue()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def similarities(out: str) -> dict[str, tuple[float, str]]:
    found = {}
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            found[m["what"]] = (float(m["cos"]), m["rest"])
    return found


def test_stages_in_order_and_files_written(ran):
    workdir, out = ran
    stages = [line for line in out.splitlines() if line.startswith("[")]
    assert [s[:5] for s in stages] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    for tool, line in zip(
        ["model_transform.py", "run_calibration.py", "model_deploy.py", "model_runner.py"],
        stages,
        strict=True,
    ):
        assert tool in line
    files = ["tinycnn.mlir", "tinycnn_cali_table", f"{PREFIX}_tpu.mlir", f"{PREFIX}.bmodel"]
    files += ["tinycnn_bmodel_outputs.npz", "tinycnn_onnx_outputs.npz", "tpuc_demo.log"]
    for name in files:
        assert (workdir / name).is_file(), name
    assert len(list((workdir / "cali").glob("*.png"))) >= 5
    assert "[model_deploy.py]" in (workdir / "tpuc_demo.log").read_text()  # tools' output
    assert "[model_deploy.py]" not in out


def test_printed_similarities_match_an_independent_computation(ran):
    workdir, out = ran
    found = similarities(out)
    assert set(found) == {
        "TOP interpreter vs onnxruntime",
        "TPU INT8 interpreter vs TOP",
        "bmodel vs TPU interpreter",
        "bmodel vs onnxruntime (end to end)",
    }
    # onnxruntime run here, on the demo's preprocessed input
    session = ort.InferenceSession(str(demo.example_file("tinycnn.onnx")))
    x = dict(np.load(workdir / "tinycnn_in_f32.npz"))
    (reference,) = session.run(["prob"], x)
    top = np.load(workdir / "tinycnn_top_outputs.npz")["prob"]
    tpu = np.load(workdir / f"{PREFIX}_tpu_outputs.npz")["prob"]
    bmodel = np.load(workdir / "tinycnn_bmodel_outputs.npz")["prob"]
    expected = {
        "TOP interpreter vs onnxruntime": cosine(top, reference),
        "TPU INT8 interpreter vs TOP": cosine(tpu, top),
        "bmodel vs TPU interpreter": cosine(bmodel, tpu),
        "bmodel vs onnxruntime (end to end)": cosine(bmodel, reference),
    }
    for what, value in expected.items():
        assert found[what][0] == pytest.approx(value, abs=2e-6), what
    assert found["TOP interpreter vs onnxruntime"][0] > 0.9999
    assert found["bmodel vs onnxruntime (end to end)"][0] > 0.99
    # the bmodel in the simulator is the TPU interpreter, bit for bit
    assert np.array_equal(bmodel.view(np.uint32), tpu.view(np.uint32))
    assert found["bmodel vs TPU interpreter"][1] == ", bit-identical"
    assert out.strip().splitlines()[-1].startswith("tpuc-demo: done")


def test_workdir_that_is_a_file_is_one_line_error(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    code, _, err = run_main(main, ["--workdir", str(tmp_path / "f")], capsys)
    assert code == 1
    assert "--workdir" in one_line_error(err)


def test_a_failing_tool_is_named_with_its_log(tmp_path, capsys, monkeypatch):
    bad = lambda workdir: ["--no_such_flag"]  # noqa: E731
    monkeypatch.setattr(demo, "transform_argv", bad)
    code, _, err = run_main(main, ["--workdir", str(tmp_path)], capsys)
    assert code == 1
    line = one_line_error(err)
    assert "model_transform.py failed" in line and str(Path(tmp_path, "tpuc_demo.log")) in line
    assert "--no_such_flag" in (tmp_path / "tpuc_demo.log").read_text()
