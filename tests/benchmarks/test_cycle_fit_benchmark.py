"""benchmarks/cycle_fit.py: the stored vendor figures cover the suite, and
tpuc's fitted model meets the calibration target on every op class
(docs/cost.md "Calibration"): median absolute error <= 15%, none above 50%.
The vendor figures are the chip data in tpuc/target/chips/bm1684x_cycle_suite.json,
measured with the vendor library (benchmarks/cycle_fit.py without --stored)."""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cycle_fit.py"
CLASSES = ("conv", "dwconv", "matmul", "add", "mul", "pool", "act", "softmax", "cast", "move")


@pytest.fixture(scope="module")
def cycle_fit():
    spec = importlib.util.spec_from_file_location("cycle_fit_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_stored_figures_cover_the_suite(cycle_fit):
    stored = cycle_fit.stored()
    for case in cycle_fit.suite():
        for mode in cycle_fit.MODES:
            assert stored.get((case.name, mode), 0) > 0, f"{case.name} {mode}"


def test_every_class_is_checked(cycle_fit):
    assert {c.cls for c in cycle_fit.suite()} == set(CLASSES)


@pytest.mark.parametrize("cls", CLASSES)
def test_error_within_target(cycle_fit, cls):
    stored = cycle_fit.stored()
    errors = {}
    for case in (c for c in cycle_fit.suite() if c.cls == cls):
        for mode in cycle_fit.MODES:
            own, chip = cycle_fit.measure(case, mode, stored)
            errors[case.name, mode] = cycle_fit.error(own, chip)
    assert statistics.median(errors.values()) <= 0.15, f"{cls}: {errors}"
    worst = max(errors, key=errors.get)
    assert errors[worst] <= 0.50, f"{cls}: {worst} off by {errors[worst]:.0%}"
