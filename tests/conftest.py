"""Shared fixtures: where the model files live.

tests/ mirrors the package: tests/<package path>/test_<module>.py, the
device simulator's in tests/target/runtime/, helper modules shared by several
folders in tests/support/.

Tests that need real models are marked `models` and take their paths from
the `anchors` fixture, which reads `$TPUC_ANCHORS` (a folder built by
`shared/anchors/make_anchor_models.py --out DIR`). Without it they are
skipped with that reason, never because a tpuc module failed to import:

    TPUC_ANCHORS=DIR python -m pytest -m models
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ANCHORS_VARIABLE = "TPUC_ANCHORS"
TESTS = Path(__file__).resolve().parent
# Test helper modules (tests/support) and the regression scripts' model zoo
# are imported by name from tests anywhere in the tree.
sys.path[:0] = [str(TESTS / "support"), str(TESTS.parent / "regression")]
# the `prepared` fixture (model_deploy, simulator tests), `vendor` (tests/native)
pytest_plugins = ["tiny_cnn", "native_models"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"models: needs the anchor models (${ANCHORS_VARIABLE}) or model wheels"
    )


def anchors_dir() -> Path | None:
    """The anchor folder, or None when the variable is not set."""
    value = os.environ.get(ANCHORS_VARIABLE)
    return Path(value) if value else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if anchors_dir() is not None:
        return
    skip = pytest.mark.skip(reason=f"needs ${ANCHORS_VARIABLE} (make_anchor_models.py --out DIR)")
    for item in items:
        if "models" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def anchors() -> Path:
    """The anchor models' folder; a wrong path is an error, not a skip."""
    folder = anchors_dir()
    assert folder is not None, f"${ANCHORS_VARIABLE} is not set"
    assert folder.is_dir(), f"${ANCHORS_VARIABLE}={folder} is not a folder"
    return folder


@pytest.fixture(scope="session")
def zoo(anchors: Path) -> dict:
    """regression/model_zoo.py's models by name (fetched lazily), rooted at `anchors`."""
    from model_zoo import all_models

    return all_models(anchors)
