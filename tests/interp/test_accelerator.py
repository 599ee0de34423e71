"""The accelerator (runs of TOP ops as onnxruntime sessions) against tpuc's
own kernels, which define TOP's float semantics: every tensor within
float32 rounding on the per-op suite and on the anchors' architectures;
and the one table that says which callers take it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import native_coverage
import numpy as np
import onnx
import pytest
from model_zoo import ANCHOR_NAMES, materialize_light
from native_coverage import MIN_COS, differences, transformed
from op_suite import CASES, build_model

from tpuc.base.errors import TpucError
from tpuc.interp.accelerator import ACCELERATED, NATIVE_ENV, accelerated
from tpuc.interp.top_interpreter import TopInterpreter

CHECKS = ["model_transform", "model_deploy", "model_runner"]
BULK = ["model_eval", "visual"]


def agree(module, store, inputs) -> set[str]:
    """Assert both paths give every tensor alike; the ops the accelerator ran."""
    want = TopInterpreter(module, native=False).run(store, inputs, dump_all=True)
    interp = TopInterpreter(module, native=True)
    got = interp.run(store, inputs, dump_all=True)
    assert not interp._native.failures
    problems = differences(got, want, MIN_COS)
    assert not problems, "; ".join(problems[:5])
    return {interp.steps[i].op.name for i in interp._native.covered}


# --- the policy -------------------------------------------------------------------------


def test_checks_run_the_kernels_and_bulk_runs_the_accelerator(monkeypatch):
    monkeypatch.delenv(NATIVE_ENV, raising=False)
    assert not any(accelerated(c) for c in CHECKS)
    assert all(accelerated(c) for c in BULK)
    assert set(CHECKS + BULK) <= set(ACCELERATED)


@pytest.mark.parametrize("value", ["0", "1"])
def test_tpuc_native_overrides_every_caller(monkeypatch, value):
    monkeypatch.setenv(NATIVE_ENV, value)
    assert {accelerated(c) for c in ACCELERATED} == {value == "1"}


def test_bad_override_and_unknown_caller_are_named(monkeypatch):
    monkeypatch.setenv(NATIVE_ENV, "yes")
    with pytest.raises(TpucError, match="TPUC_NATIVE must be 0 or 1, not 'yes'"):
        accelerated("model_eval")
    with pytest.raises(TpucError, match="no accelerator policy for 'nobody'"):
        accelerated("nobody")


# --- agreement --------------------------------------------------------------------------


@pytest.fixture
def deep(monkeypatch):
    """Whole networks: each op within float32 rounding (the op suite) still
    drifts through ~50 layers of sums taken in another order (resnet50:
    1.5e-4 at values near 1, cosine 1.0000000), so elementwise 1e-3
    relative, the cosine bound unchanged."""
    monkeypatch.setattr(native_coverage, "RTOL", 1e-3)
    monkeypatch.setattr(native_coverage, "ATOL", 1e-4)


def op_case(case, folder) -> SimpleNamespace:
    path = folder / "case.onnx"
    shapes = build_model(case, path)
    rng = np.random.default_rng(0)
    inputs = {k: rng.uniform(case.low, case.high, s).astype(np.float32) for k, s in shapes.items()}
    return SimpleNamespace(name=case.name, model=onnx.load(path), inputs=inputs)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_accelerator_agrees_with_the_kernels_on_the_op_suite(case, tmp_path):
    model = op_case(case, tmp_path)
    module, store = transformed(model, tmp_path)
    agree(module, store, model.inputs)


def test_the_op_suite_exercises_the_accelerator(tmp_path):
    conv = next(c for c in CASES if c.op == "Conv")
    model = op_case(conv, tmp_path)
    module, store = transformed(model, tmp_path)
    assert "top.Conv" in agree(module, store, model.inputs)


LIGHT = ["squeezenet", "shufflenet", "inception_v1", "resnet50"]
"""Anchors whose architecture onnx ships (seeded weights): CI's anchors."""


@pytest.mark.parametrize("name", LIGHT)
def test_accelerator_agrees_with_the_kernels_on_anchor_architectures(name, tmp_path, deep):
    model = onnx.load(materialize_light(name, seed=1))
    dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(1).standard_normal(dims).astype(np.float32)
    case = SimpleNamespace(name=name, model=model, inputs={model.graph.input[0].name: x})
    module, store = transformed(case, tmp_path)
    assert "top.Conv" in agree(module, store, case.inputs)


@pytest.mark.models
@pytest.mark.parametrize("name", ANCHOR_NAMES)
def test_accelerator_agrees_with_the_kernels_on_the_anchors(name, anchors, tmp_path, deep):
    folder = anchors / name
    meta = json.loads((folder / "meta.json").read_text())
    inputs = dict(np.load(folder / "test_input.npz"))
    case = SimpleNamespace(name=name, model=onnx.load(folder / meta["onnx"]), inputs=inputs)
    module, store = transformed(case, tmp_path)
    agree(module, store, inputs)
