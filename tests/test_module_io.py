"""tpuc.module_io loaders: every broken .mlir is one TpucError that keeps
xDSL's reason, and no input reaches the interpreters half-checked."""

from __future__ import annotations

import pytest
from mlir_texts import GOOD, MESSAGES, broken_files

from tpuc.errors import TpucError
from tpuc.module_io import load_module, parse_module


@pytest.mark.parametrize("key", sorted(MESSAGES))
def test_broken_module_is_one_error(tmp_path, key):
    path = broken_files(tmp_path)[key]
    with pytest.raises(TpucError) as info:
        load_module(path)
    assert str(info.value) == f"{path}: {MESSAGES[key]}"


def test_good_module_loads():
    module = parse_module(GOOD, "m.mlir")
    assert module.ops.first is not None


def test_unreadable_module(tmp_path, monkeypatch):
    path = tmp_path / "m.mlir"
    path.write_text(GOOD)
    monkeypatch.setattr(type(path), "read_bytes", _denied)  # chmod 0 does not stop root
    with pytest.raises(TpucError) as info:
        load_module(path)
    assert str(info.value) == f"{path}: permission denied"


def test_folder_is_not_a_module(tmp_path):
    with pytest.raises(TpucError) as info:
        load_module(tmp_path)
    assert str(info.value) == f"{tmp_path}: is a folder, not a .mlir file"


def _denied(path):
    raise PermissionError(13, "Permission denied", str(path))
