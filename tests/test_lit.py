"""Runs the lit/filecheck pass tests under tests/lit from pytest, so CI shows
one pytest summary: lit runs once per session and each .mlir file becomes
one pytest test that fails with lit's output for that file."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

LIT_DIR = Path(__file__).parent / "lit"
NOT_TESTS = {"Inputs", "Output"}

_RUN_LIT = "import sys; from lit.main import main; sys.argv[0] = 'lit'; main()"


def lit_files() -> list[str]:
    """Test files as lit names them: paths relative to tests/lit."""
    return sorted(
        str(p.relative_to(LIT_DIR))
        for p in LIT_DIR.rglob("*.mlir")
        if not NOT_TESTS & set(p.relative_to(LIT_DIR).parts)
    )


class LitRun:
    def __init__(self, xml: Path, proc: subprocess.CompletedProcess[str]):
        self.log = proc.stdout + proc.stderr
        self.results: dict[str, str | None] = {}
        if not xml.is_file():
            return
        for case in ET.parse(xml).getroot().iter("testcase"):
            suite_dir = case.get("classname", "").partition(".")[2].replace(".", "/")
            name = f"{suite_dir}/{case.get('name')}" if suite_dir else str(case.get("name"))
            failure = case.find("failure")
            self.results[name] = None if failure is None else (failure.text or "failed")


@pytest.fixture(scope="session")
def lit_run(tmp_path_factory: pytest.TempPathFactory) -> LitRun:
    xml = tmp_path_factory.mktemp("lit") / "results.xml"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUN_LIT,
            "-sv",
            "-j",
            "2",
            f"--xunit-xml-output={xml}",
            str(LIT_DIR),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    return LitRun(xml, proc)


@pytest.mark.parametrize("test_file", lit_files())
def test_lit(lit_run: LitRun, test_file: str) -> None:
    if not lit_run.results:
        pytest.fail(f"lit did not run:\n{lit_run.log}")
    if test_file not in lit_run.results:
        pytest.skip("not a lit test (excluded by its lit config)")
    failure = lit_run.results[test_file]
    if failure is not None:
        pytest.fail(f"lit test {test_file} failed:\n{failure}", pytrace=False)
