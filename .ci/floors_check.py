"""Check that an environment holds every direct dependency at its floor.

pyproject.toml's `>=` floors (and the `==` pin of xDSL) are promises: a user
may install exactly those versions. `.ci/floors` installs them with uv's
lowest-direct resolution and runs the tests there; this script, run with that
environment's Python, fails unless each installed version equals its floor
(so a floor that is not a released version, which the resolver silently
rounds up, is caught too) and prints the table.
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.version import Version

REQUIREMENT = re.compile(r"^([A-Za-z0-9_.\-]+)\s*(==|>=)\s*([^,;\s]+)")


def floors(pyproject: Path) -> dict[str, str]:
    """Package -> its lowest allowed version, from the runtime, test and
    tflite requirements (tpuc's own extras are skipped)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    extras = project["optional-dependencies"]
    found = {}
    for requirement in [*project["dependencies"], *extras["test"], *extras["tflite"]]:
        match = REQUIREMENT.match(requirement)
        if match is None:
            if not requirement.startswith("tpuc["):
                sys.exit(f"error: pyproject.toml: requirement without a floor: {requirement!r}")
            continue
        found[match.group(1)] = match.group(3)
    return found


def main() -> int:
    wrong = []
    for name, floor in floors(Path(__file__).resolve().parents[1] / "pyproject.toml").items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            installed = "missing"
        same = installed != "missing" and Version(installed) == Version(floor)
        print(f"  {name:24} floor {floor:14} installed {installed}")
        if not same:
            wrong.append(f"{name} {installed} (floor {floor})")
    if wrong:
        print(f"error: not at the floor: {'; '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
