"""model_deploy.py --codegen native end to end, and the native target's
guards: the vendor runtime against tpuc's TPU interpreter, each kind of
bmodel refused by the other runner, a vendor crash as one line, every op the
target cannot express listed at once, drifted structs caught.

The vendor component must be in the cache (`tpuc-vendor fetch`; .ci/run
fetches it): these tests fail, not skip, without it (native_models' `vendor`
fixture).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tpuc.base.errors import TpucError
from tpuc.tools import model_deploy, model_runner


def deploy(work, mode: str, codegen: str = "native", extra=()) -> int:
    argv = ["--mlir", str(work / "cnn.mlir"), "--chip", "bm1684x", "--quantize", mode]
    argv += ["--calibration_table", str(work / "cnn_cali_table")]
    argv += ["--test_input", str(work / "cnn_in_f32.npz")]
    argv += ["--test_reference", str(work / "cnn_top_outputs.npz"), "--tolerance", "0.9,0.5"]
    argv += ["--codegen", codegen, "--model", str(work / f"cnn_{mode}_{codegen}.bmodel")]
    return model_deploy.run([*argv, *extra])


@pytest.mark.parametrize("mode", ["F32", "F16", "BF16", "INT8"])
def test_deploy_native_matches_interpreter(prepared, vendor, mode, capsys):
    """The chip's own bmodel, run by the vendor runtime, matches the TPU
    interpreter (model_deploy checks it: INT8 bit for bit, float cosine)."""
    assert deploy(prepared, mode) == 0
    said = capsys.readouterr().out
    assert "the chip's own command streams" in said
    assert "the vendor library's estimate" in said
    assert "bmodel matches the TPU interpreter" in said
    prefix = f"cnn_bm1684x_{mode.lower()}" + ("_sym" if mode == "INT8" else "")
    assert (prepared / f"{prefix}_compiler_profile.txt").read_text().count("TCYC") >= 1
    native = np.load(prepared / f"{prefix}_model_outputs.npz")
    interp = np.load(prepared / f"{prefix}_tpu_outputs.npz")
    if mode == "INT8":
        assert np.array_equal(native["logits"], interp["logits"])


def test_model_runner_runs_native_bmodel(prepared, vendor, tmp_path):
    bmodel = prepared / "cnn_F32_native.bmodel"
    if not bmodel.exists():
        assert deploy(prepared, "F32") == 0
    out = tmp_path / "out.npz"
    argv = ["--input", str(prepared / "cnn_in_f32.npz"), "--model", str(bmodel)]
    assert model_runner.run([*argv, "--output", str(out)]) == 0
    got = np.load(out)["logits"]
    want = np.load(prepared / "cnn_bm1684x_f32_tpu_outputs.npz")["logits"]
    cos = float(got.ravel() @ want.ravel() / np.linalg.norm(got) / np.linalg.norm(want))
    assert cos >= 0.99999


def test_each_runner_refuses_the_other_kind(prepared, vendor):
    """tpuc's simulator refuses a native bmodel, and the vendor runtime
    refuses a bmodel of tpuc's instruction set."""
    from tpuc.target.vendor.worker import Worker

    native = prepared / "cnn_F32_native.bmodel"
    if not native.exists():
        assert deploy(prepared, "F32") == 0
    own = prepared / "cnn_F32_tpuc.bmodel"
    assert deploy(prepared, "F32", codegen="tpuc") == 0
    from tpuc.target.runtime import load_bmodel

    with pytest.raises(TpucError, match="native bmodel.*vendor runtime"):
        load_bmodel(str(native))
    x = np.zeros((1, 3, 8, 8), np.float32)
    with (
        Worker("runtime", vendor.lib, "vendor runtime") as worker,
        pytest.raises(TpucError, match="refused the bmodel"),
    ):
        worker.call("running", "run", str(own), "cnn", [(0, x)], [(0, (1, 5), "float32")])


def test_vendor_crash_is_one_line_naming_the_op(vendor):
    """A call the library dies on ends the worker, not tpuc."""
    from tpuc.target.vendor.worker import Worker

    with Worker("backend", vendor.lib, "vendor backend") as worker:
        worker.call("starting", "begin", False)
        with pytest.raises(TpucError) as info:
            args = ("bad", "backend_api_bcbinary_global", b"\0", [], [], [])
            worker.call("tpu.Add 'bad'", "call_global", *args)
    message = str(info.value)
    assert "\n" not in message
    assert "crashed on tpu.Add 'bad'" in message


def test_unexpressible_ops_listed_at_once(prepared, vendor, monkeypatch, capsys):
    """Every op without a native rule is named (op, name, types) before
    anything is written."""
    from tpuc.dialects import tpu
    from tpuc.passes.native import rules

    registry = rules.load_rules()
    entries = dict(registry._entries)
    entries.pop(tpu.Conv2DOp)
    monkeypatch.setattr(registry, "_entries", entries)
    work = prepared
    target = work / "refused.bmodel"
    argv = ["--mlir", str(work / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "F32"]
    with pytest.raises(TpucError) as info:
        model_deploy.run([*argv, "--codegen", "native", "--model", str(target)])
    message = str(info.value)
    assert "cannot express 2 op(s)" in message
    assert "tpu.Conv2D 'c1'" in message or "tpu.Conv2D" in message
    assert message.count("tpu.Conv2D") == 2
    assert not target.exists()


def test_struct_drift_is_caught(vendor, monkeypatch):
    """A declaration 4 bytes short of the header fails the driver's start."""
    from tpuc.target.vendor import params

    short = type(
        "bcbinary_global_param_t",
        (params.Param,),
        {
            "_fields_": [
                ("spec", params.DECLARED["bcbinary_common_spec_t"]),
                ("A_is_coeff", ctypes.c_int32),
            ],  # fmt: skip
            "typedef": "bcbinary_global_param_t",
        },
    )
    monkeypatch.setitem(params.DECLARED, "bcbinary_global_param_t", short)
    with pytest.raises(TpucError, match="bcbinary_global_param_t \\(52 bytes, header 56\\)"):
        params.check_params(vendor.param_h)
    params.check_params(vendor.param_h, ["conv_global_spec_t", "tensor_spec_t"])


def test_native_needs_bm1684x(prepared, vendor):
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1688", "--quantize", "F32"]
    with pytest.raises(TpucError, match="writes bm1684x bmodels"):
        model_deploy.run([*argv, "--codegen", "native", "--model", str(prepared / "x.bmodel")])


def test_missing_vendor_cache_is_one_line(prepared, tmp_path, monkeypatch):
    """Without the vendor component, --codegen native stops before any work,
    saying what to run, and writes nothing."""
    monkeypatch.setenv("TPUC_CACHE", str(tmp_path / "empty-cache"))
    target = tmp_path / "out" / "x.bmodel"
    argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "F32"]
    with pytest.raises(TpucError, match="tpuc-vendor fetch") as info:
        model_deploy.run([*argv, "--codegen", "native", "--model", str(target)])
    assert "\n" not in str(info.value)
    assert not target.parent.exists()


def test_native_bmodel_is_reproducible(prepared, vendor, tmp_path, monkeypatch):
    """Same module, same SOURCE_DATE_EPOCH: byte-identical native bmodels
    (the vendor library's commands, the coefficients and the container)."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    made = []
    for run in ("a", "b"):
        target = tmp_path / run / "cnn.bmodel"
        argv = ["--mlir", str(prepared / "cnn.mlir"), "--chip", "bm1684x", "--quantize", "INT8"]
        argv += ["--calibration_table", str(prepared / "cnn_cali_table")]
        assert model_deploy.run([*argv, "--codegen", "native", "--model", str(target)]) == 0
        made.append(target.read_bytes())
    assert made[0] == made[1]
