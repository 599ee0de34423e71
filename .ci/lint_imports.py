#!/usr/bin/env python3
"""Check the import contracts of pyproject.toml on every module of tpuc.

`dialects/`, `passes/` and `frontends/` are top-level folders that setuptools
maps into the `tpuc` package, and import-linter only walks the folder the
installed `tpuc` lives in. So this assembles the package as it installs —
`tpuc/` with the three folders copied in — in a temporary folder, and runs
`lint-imports` on that copy with the repository's configuration.

usage: python .ci/lint_imports.py [--root REPO]   (exit status: lint-imports')
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

MAPPED = ("dialects", "passes", "frontends")  # pyproject.toml's package-dir
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")


def stage(root: Path, into: Path) -> Path:
    """The installed form of the `tpuc` package under `into`."""
    package = into / "tpuc"
    shutil.copytree(root / "tpuc", package, ignore=IGNORED)
    for name in MAPPED:
        shutil.copytree(root / name, package / name, ignore=IGNORED)
    return package


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    root = args.root.resolve()
    beside = Path(sys.executable).with_name("lint-imports")  # this Python's own, else PATH's
    linter = str(beside) if beside.exists() else shutil.which("lint-imports") or "lint-imports"
    with tempfile.TemporaryDirectory(prefix="tpuc-layers-") as tmp:
        stage(root, Path(tmp))
        env = dict(os.environ, PYTHONPATH=tmp)
        command = [linter, "--config", str(root / "pyproject.toml"), "--no-cache"]
        return subprocess.run(command, cwd=tmp, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
