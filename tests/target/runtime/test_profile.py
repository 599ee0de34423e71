"""The run-time estimate of a real bmodel (tpuc.target.runtime.profile) and where
users see it: model_deploy's latency line, model_runner --profile."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tools_helpers import one_line_error, run_main

from tpuc.target.bmodel import load_bmodel_file
from tpuc.target.cost import ENGINE_GDMA, ENGINE_TIU
from tpuc.target.runtime.profile import estimate, layer_costs
from tpuc.tools import model_deploy, model_runner


@pytest.fixture(scope="module")
def deployed(prepared, tmp_path_factory):  # noqa: F811
    """The tiny CNN for bm1684x INT8, every op global, and what model_deploy printed."""
    out = tmp_path_factory.mktemp("profiled")
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "INT8"]
    argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
    argv += ["--test_input", str(prepared / "cnn_in_f32.npz"), "--model", str(out / "cnn.bmodel")]
    argv += ["--disable_layer_group"]
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert model_deploy.run(argv) == 0
    return out, buffer.getvalue()


def test_model_deploy_prints_the_estimate(deployed):
    out, printed = deployed
    profile = estimate(load_bmodel_file(out / "cnn.bmodel"))
    line = next(x for x in printed.splitlines() if "estimated latency" in x)
    assert f"{profile.cycles:,} cycles at 1000 MHz" in line and "TIU busy" in line


def test_timeline_is_consistent(deployed):
    model = load_bmodel_file(deployed[0] / "cnn.bmodel")
    profile = estimate(model)
    group = model.nets[0].parameters[0].subnets[0].cmd_groups[0]
    assert {s.tag.index for s in profile.timeline.spans if s.stream == ENGINE_TIU} == set(
        range(group.bdc_num)
    )
    for engine in (ENGINE_TIU, ENGINE_GDMA):  # an engine runs one phase at a time
        spans = sorted((s.start, s.end) for s in profile.timeline.spans if s.engine == engine)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    # global layers, serialized by codegen: the layers follow each other
    costs = layer_costs(profile)
    assert sum(c.cycles for c in costs) == profile.cycles
    assert profile.macs == (8 * 8 * 4 * 3 * 9) + (8 * 8 * 4 * 4 * 9) + 4 * 5


def test_a_layer_group_overlaps_the_engines(prepared, deployed, tmp_path):  # noqa: F811
    """With layer groups (the default) the TIU computes while the GDMA moves
    slices: some TIU and GDMA spans overlap and the estimate drops."""
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "INT8"]
    argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
    assert model_deploy.run([*argv, "--model", str(tmp_path / "g.bmodel")]) == 0
    grouped = estimate(load_bmodel_file(tmp_path / "g.bmodel"))
    whole = estimate(load_bmodel_file(deployed[0] / "cnn.bmodel"))
    assert grouped.cycles < whole.cycles
    tiu = [(s.start, s.end) for s in grouped.timeline.spans if s.engine == ENGINE_TIU]
    gdma = [(s.start, s.end) for s in grouped.timeline.spans if s.engine == ENGINE_GDMA]
    assert any(a < d and c < b for a, b in tiu for c, d in gdma)
    assert sum(c.cycles for c in layer_costs(grouped)) > grouped.cycles


def test_model_runner_profile(prepared, deployed, tmp_path, capsys):  # noqa: F811
    out, _ = deployed
    argv = ["--input", str(prepared / "cnn_in_f32.npz"), "--model", str(out / "cnn.bmodel")]
    argv += ["--output", str(tmp_path / "o.npz"), "--profile", str(tmp_path / "p.json")]
    code, printed, err = run_main(model_runner.main, argv, capsys)
    assert code == 0, err
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["cycles"] == estimate(load_bmodel_file(out / "cnn.bmodel")).cycles
    row = next(r for r in doc["timeline"] if r["op"] == "TIU_CONV" and r["phase"] == "compute")
    assert row["engine"] == "TIU" and row["macs"] == 8 * 8 * 4 * 3 * 9 and row["end"] > row["start"]
    assert {r["name"] for r in doc["layers"]} >= {"r1", "logits"}  # tensor_location names
    assert "estimated latency" in printed and "TIU_CONV" in printed  # the engine-level opcode
    with (
        np.load(tmp_path / "o.npz") as got,
        np.load(out / "cnn_bm1684x_int8_sym_model_outputs.npz") as ref,
    ):
        assert np.array_equal(got["logits"], ref["logits"])


def test_profile_needs_a_bmodel(prepared, tmp_path, capsys):  # noqa: F811
    argv = ["--input", str(prepared / "cnn_in_f32.npz"), "--model", str(prepared / "cnn.mlir")]
    argv += ["--output", str(tmp_path / "o.npz"), "--profile", str(tmp_path / "p.json")]
    code, _, err = run_main(model_runner.main, argv, capsys)
    assert code == 1 and "--profile applies to a .bmodel only" in one_line_error(err)
    assert not (tmp_path / "p.json").exists()
