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
    # tpuc/ is the package; package-dir maps the design card's top-level folders into it
    mapping = {"tpuc": "tpuc", **config.get("package-dir", {})}
    for name, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *parts)))
    assert found - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - found == set(), "listed packages without a folder"


def test_the_design_cards_top_level():
    """dialects/, passes/ and frontends/ are top-level folders (ARCHITECTURE.md §2),
    installed as tpuc.dialects, tpuc.passes and tpuc.frontends."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {
        "tpuc.dialects": "dialects",
        "tpuc.passes": "passes",
        "tpuc.frontends": "frontends",
    }
    for folder in ("dialects", "passes", "frontends"):
        assert (ROOT / folder / "__init__.py").is_file()
        # tpuc/<folder> is only a link to it (import-linter walks tpuc/), never a copy
        assert (ROOT / "tpuc" / folder).is_symlink()
