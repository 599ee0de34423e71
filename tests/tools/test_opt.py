"""tpuc-opt: broken .mlir text ends with one `error:` line and exit status 1
(no hang on an unclosed string literal, no exit 0 on a use before def)."""

from __future__ import annotations

import pytest
from mlir_texts import MESSAGES, broken_files
from tools_helpers import run_main

from tpuc.tools.opt import main


@pytest.mark.parametrize("key", sorted(MESSAGES))
def test_broken_module(tmp_path, capsys, key):
    path = broken_files(tmp_path)[key]
    code, out, err = run_main(main, [str(path), "-o", str(tmp_path / "out.mlir")], capsys)
    assert (code, err) == (1, f"error: {path}: {MESSAGES[key]}\n")
    assert not (tmp_path / "out.mlir").exists()
