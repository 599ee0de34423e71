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


def _conv(folder, dtype="float32"):
    import numpy as np
    from mlir_texts import CONV

    np.savez(folder / "c_weight.npz", w=np.ones((16, 16, 3, 3), dtype))
    (folder / "c.mlir").write_text(CONV)
    return folder / "c.mlir", folder / "c_weight.npz"


@pytest.mark.parametrize("which, flag", [("module", "-o"), ("weights", "--weight-output")])
def test_output_hard_linked_to_an_input_is_refused(tmp_path, capsys, which, flag):
    """-o (or --weight-output) as another name of the module or of its weight
    file: refused, and the input keeps its bytes."""
    import os

    mlir, weights = _conv(tmp_path)
    given = {"module": mlir, "weights": weights}[which]
    before = given.read_bytes()
    os.link(given, tmp_path / "out")
    argv = [str(mlir), flag, str(tmp_path / "out")]
    code, _, err = run_main(main, argv, capsys)
    refusal = f"refusing to overwrite an input file (a hard link to {given})"
    assert (code, err) == (1, f"error: {tmp_path / 'out'}: {refusal}\n")
    assert given.read_bytes() == before


def test_folder_as_input_is_one_line(tmp_path, capsys):
    (tmp_path / "d.mlir").mkdir()
    code, _, err = run_main(main, [str(tmp_path / "d.mlir")], capsys)
    assert (code, err) == (1, f"error: {tmp_path / 'd.mlir'}: is a folder, not a .mlir file\n")


def test_weight_of_another_dtype_is_one_line(tmp_path, capsys):
    mlir, weights = _conv(tmp_path, "int64")
    code, _, err = run_main(main, [str(mlir), "-o", str(tmp_path / "out.mlir")], capsys)
    assert (code, err) == (
        1,
        f"error: {weights}: weight 'w' holds int64 values, the module declares f32 "
        "(stored as float32)\n",
    )
    assert not (tmp_path / "out.mlir").exists()
