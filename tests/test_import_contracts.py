"""The import contracts cover the top-level folders setuptools maps into tpuc.

`tpuc/dialects`, `tpuc/passes` and `tpuc/frontends` are links to the
top-level folders, so plain `lint-imports` walks them; an upward import
planted in a module of each mapped folder must break a contract.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
COPIED = ("tpuc", "dialects", "passes", "frontends")


def lint(root: Path) -> subprocess.CompletedProcess:
    """`lint-imports` with `root`'s tpuc first on the path."""
    beside = Path(sys.executable).with_name("lint-imports")
    linter = str(beside) if beside.exists() else shutil.which("lint-imports") or "lint-imports"
    env = dict(os.environ, PYTHONPATH=str(root))
    command = [linter, "--config", str(root / "pyproject.toml"), "--no-cache"]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)


def copy_repo(into: Path) -> Path:
    ignored = shutil.ignore_patterns("__pycache__")
    for name in COPIED:
        shutil.copytree(REPO / name, into / name, symlinks=True, ignore=ignored)
    shutil.copy(REPO / "pyproject.toml", into / "pyproject.toml")
    return into


def test_the_mapped_folders_are_linked_into_tpuc():
    for name in COPIED[1:]:
        link = REPO / "tpuc" / name
        assert link.is_symlink() and os.readlink(link) == f"../{name}"


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
