"""pyproject's explicit package list covers every package folder, so a
non-editable `pip install .` (the README's quick start) ships all of tpuc."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    # without a package-dir mapping each package is its own folder under the root
    for name, folder in config.get("package-dir", {"tpuc": "tpuc"}).items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *parts)))
    assert found - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - found == set(), "listed packages without a folder"
