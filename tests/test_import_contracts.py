"""The import contracts cover the top-level folders setuptools maps into tpuc.

`.ci/lint_imports.py` lints the package in its installed form; an upward
import planted in a module of each mapped folder must break a contract.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / ".ci" / "lint_imports.py"
COPIED = ("tpuc", "dialects", "passes", "frontends")


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def copy_repo(into: Path) -> Path:
    for name in COPIED:
        shutil.copytree(REPO / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", into / "pyproject.toml")
    return into


def test_the_repository_keeps_its_contracts():
    result = lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "upward"),
    [
        ("dialects/base.py", "tpuc.tools.model_deploy"),  # dialects -> tools
        ("passes/registry.py", "tpuc.workflow.deploy"),  # passes -> workflow
        ("frontends/builder.py", "tpuc.interp.top_interpreter"),  # frontends -> interp
    ],
)
def test_an_upward_import_in_a_mapped_folder_fails(tmp_path, module, upward):
    root = copy_repo(tmp_path)
    planted = root / module
    planted.write_text(planted.read_text() + f"\nimport {upward}  # planted\n")
    result = lint(root)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert upward in result.stdout
