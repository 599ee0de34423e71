"""model_transform's check compares the framework with tpuc's own kernels,
so a misreading that the importer and the onnxruntime re-export share
(here Conv pads read as ends before begins, in both directions) fails it;
on the accelerator the two mistakes cancel and the check would pass."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tools_helpers import one_line_error, run_main

from tpuc.tools.model_transform import main

PADS = [1, 0, 0, 1]  # top, left, bottom, right: each axis keeps its total


@pytest.fixture
def work(tmp_path):
    rng = np.random.default_rng(3)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")
    node = helper.make_node("Conv", ["x", "W"], ["y"], pads=PADS, name="conv")
    graph = helper.make_graph(
        [node],
        "padded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 7, 7])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, tmp_path / "padded.onnx")
    np.savez(tmp_path / "in.npz", x=rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    return tmp_path


def transform(work, capsys):
    argv = ["--model_name", "padded", "--model_def", str(work / "padded.onnx")]
    argv += ["--test_input", str(work / "in.npz"), "--mlir", str(work / "padded.mlir")]
    return run_main(main, argv, capsys)


def ends_first(pads: list[int]) -> list[int]:
    half = len(pads) // 2
    return list(pads[half:]) + list(pads[:half])


@pytest.fixture
def planted(monkeypatch):
    """The same misreading in the importer (ONNX -> TOP) and in the export
    rule (TOP -> ONNX): each swaps begins and ends."""
    from tpuc.frontends.onnx import nn
    from tpuc.interp.ort import rules

    read, write = nn.resolve_pads, rules._conv_attrs
    monkeypatch.setattr(nn, "resolve_pads", lambda *a: ends_first(read(*a)))

    def exported(p, w):
        attrs = write(p, w)
        attrs["pads"] = ends_first(attrs["pads"])
        return attrs

    monkeypatch.setattr(rules, "_conv_attrs", exported)


def test_the_check_passes_without_the_bug(work, capsys, monkeypatch):
    monkeypatch.delenv("TPUC_NATIVE", raising=False)
    code, out, err = transform(work, capsys)
    assert code == 0, err
    assert "TOP matches onnxruntime" in out


def test_a_bug_shared_by_importer_and_reexport_fails_the_check(work, capsys, planted, monkeypatch):
    monkeypatch.delenv("TPUC_NATIVE", raising=False)
    code, _, err = transform(work, capsys)
    assert code == 1
    assert "diverge first at tensor 'y'" in one_line_error(err)


def test_on_the_accelerator_the_shared_bug_would_cancel(work, capsys, planted, monkeypatch):
    """Why the check runs the kernels: TPUC_NATIVE=1 (timing only) is fooled."""
    monkeypatch.setenv("TPUC_NATIVE", "1")
    code, out, err = transform(work, capsys)
    assert code == 0, err
    assert "TOP matches onnxruntime" in out
