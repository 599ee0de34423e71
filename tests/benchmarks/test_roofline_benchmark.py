"""benchmarks/roofline.py on the tiny CNN of test_bmodel_benchmark's layout:
the estimate never beats the roofline, the traffic never undercuts the
minimum, and main prints a markdown table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from test_bmodel_benchmark import layout  # noqa: F401 - the fixture

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "roofline.py"


@pytest.fixture(scope="module")
def roofline():
    spec = importlib.util.spec_from_file_location("roofline_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("target", ["bm1684x:INT8", "cv183x:BF16"])
def test_estimate_is_above_the_roofline(roofline, layout, target):  # noqa: F811
    files = roofline.model_files("tiny", layout / "work", layout / "anchors")
    row = roofline.measure(files, roofline.BENCH.Target.parse(target), 1, 1)
    assert row.cycles >= row.bound > 0
    assert row.moved_bytes >= row.min_bytes > 0
    assert row.macs > 0 and row.limit in ("compute", "memory")
    assert 0 < row.tiu < 1 and 0 < row.gdma < 1
    assert row.sim_s > 0 and row.ort_s > 0


def test_main_prints_a_markdown_table(roofline, layout, capsys):  # noqa: F811
    argv = ["--models", "tiny", "--targets", "bm1684x:F16", "--repeat", "1", "--threads", "1"]
    argv += ["--work", str(layout / "work"), "--anchors", str(layout / "anchors")]
    assert roofline.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == roofline.HEADER.splitlines()
    assert out[2].startswith("| tiny | bm1684x:F16 |")
