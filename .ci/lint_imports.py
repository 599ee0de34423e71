"""Run `lint-imports` on the whole `tpuc` package, as Python imports it.

pyproject maps the top-level folders dialects/, passes/ and frontends/ into
the `tpuc` namespace (setuptools `package-dir`). import-linter's graph
builder (grimp) walks only the folder of the root package, so it would not
see `tpuc.dialects`, `tpuc.passes` or `tpuc.frontends`. This script builds a
throwaway tree of symbolic links in which every mapped folder sits where its
module name says, and runs `lint-imports` there with the repository's
pyproject.toml. Extra arguments go to `lint-imports`.
"""

import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def link_tree(stage: Path) -> None:
    """Lay out `tpuc` under `stage` with each package-dir folder linked in."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    package_dir: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    (stage / "tpuc").mkdir()
    for entry in (ROOT / package_dir["tpuc"]).iterdir():
        (stage / "tpuc" / entry.name).symlink_to(entry)
    for name, folder in package_dir.items():
        if name == "tpuc":
            continue
        (stage / name.replace(".", "/")).symlink_to(ROOT / folder)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tpuc-lint-") as tmp:
        stage = Path(tmp)
        link_tree(stage)
        config = str(ROOT / "pyproject.toml")
        command = ["lint-imports", "--config", config, "--no-cache", *sys.argv[1:]]
        # lint-imports puts its working directory first on sys.path: run it in the
        # link tree so that `tpuc` resolves there, not to the editable install.
        return subprocess.call(command, cwd=stage)


if __name__ == "__main__":
    sys.exit(main())
