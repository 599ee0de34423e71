"""npz_tool.py subcommands, called in-process (and once as a console script)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from tools_helpers import one_line_error, run_main

from tpuc.tools.npz_tool import main


@pytest.fixture
def files(tmp_path):
    x = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]], dtype=np.float32)
    a = tmp_path / "a.npz"
    b = tmp_path / "b.npz"
    np.savez(a, x=x, y=x * 2, z=np.arange(4))
    np.savez(b, x=x, y=(x * 2 * (1 + 5e-5)).reshape(6), z=np.arange(4)[::-1].copy(), w=x)
    return a, b


def test_dump_stats(files, capsys):
    code, out, _ = run_main(main, ["dump", str(files[0])], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "x  [2, 3]  float32  min -6  max 5  mean 0.833333"
    assert lines[2] == "z  [4]  int64  min 0  max 3  mean 1.5"
    assert lines[-1].startswith("3 tensor(s)")
    assert "[[" not in out  # no values without -v or named keys


def test_dump_named_key_prints_values(files, capsys):
    code, out, _ = run_main(main, ["dump", str(files[0]), "z"], capsys)
    assert code == 0 and out.splitlines() == ["z  [4]  int64  min 0  max 3  mean 1.5", "[0 1 2 3]"]


def test_compare_pass_and_verbose_lines(files, capsys):
    a, b = files
    code, out, _ = run_main(main, ["compare", str(a), str(b), "--excepts", "z", "-v"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("[x") and "EQUAL" in lines[0] and "[PASSED]" in lines[0]
    assert "CLOSE" in lines[1] and "rtol 1e-04" in lines[1]
    assert "2 compared" in lines
    assert "min_similiarity = (1.0, 1.0, inf)" in lines
    assert lines[-1] == "npz compare PASSED."


def test_compare_fail_exits_nonzero(files, capsys):
    a, b = files
    code, out, _ = run_main(main, ["compare", str(a), str(b), "-vv"], capsys)
    assert code == 1
    assert "NOT_SIMILAR" in out and "largest error at flat index 0" in out
    assert out.splitlines()[-1].startswith("npz compare FAILED: first failing tensor 'z'")


def test_compare_without_common_names_fails(tmp_path, capsys):
    np.savez(tmp_path / "p.npz", a=np.zeros(2))
    np.savez(tmp_path / "q.npz", b=np.zeros(2))
    code, _, _ = run_main(
        main, ["compare", str(tmp_path / "p.npz"), str(tmp_path / "q.npz")], capsys
    )
    assert code == 1


def test_get_shape(files, capsys):
    code, out, _ = run_main(main, ["get_shape", str(files[0]), "x"], capsys)
    assert code == 0 and out.strip() == "[2, 3]"


def test_rename_writes_new_file(files, tmp_path, capsys):
    a = files[0]
    before = a.read_bytes()
    out_path = tmp_path / "renamed.npz"
    code, _, _ = run_main(main, ["rename", str(a), "x", "xx", "-o", str(out_path)], capsys)
    assert code == 0 and a.read_bytes() == before
    with np.load(out_path) as data:
        assert list(data.files) == ["xx", "y", "z"]


def test_rename_refuses_to_overwrite_input(files, capsys):
    a = files[0]
    code, _, err = run_main(main, ["rename", str(a), "x", "q", "-o", str(a)], capsys)
    assert code == 1 and "overwrite" in one_line_error(err)


def test_extract(files, tmp_path, capsys):
    out_path = tmp_path / "part.npz"
    code, _, _ = run_main(main, ["extract", str(files[0]), "z,x", "-o", str(out_path)], capsys)
    assert code == 0
    with np.load(out_path) as data:
        assert list(data.files) == ["z", "x"]
        np.testing.assert_array_equal(data["z"], np.arange(4))


def test_to_dat(files, tmp_path, capsys):
    out_path = tmp_path / "raw.dat"
    code, _, _ = run_main(main, ["to_dat", str(files[0]), "-o", str(out_path)], capsys)
    assert code == 0 and out_path.stat().st_size == 6 * 4 * 2 + 4 * 8


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["dump", "{d}/missing.npz"], "no such file"),
        (["dump", "{d}/corrupt.npz"], "not a readable npz"),
        (["dump", "{a}", "nope"], "no tensor named 'nope'"),
        (["get_shape", "{a}", "nope"], "no tensor named 'nope'"),
        (["extract", "{a}", "x,nope", "-o", "{d}/o.npz"], "no tensor named 'nope'"),
        (["compare", "{a}", "{a}", "--tolerance", "0.9"], "--tolerance"),
        (["compare", "{a}", "{a}", "--tolerance", "1.01,0.99"], "cosine similarity lies in"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_errors_are_one_line(files, tmp_path, capsys, argv, needle):
    (tmp_path / "corrupt.npz").write_bytes(b"PK\x03\x04 this is not a zip")
    argv = [s.format(a=files[0], d=tmp_path) for s in argv]
    code, _, err = run_main(main, argv, capsys)
    assert code == 1
    assert needle in one_line_error(err)
    assert not (tmp_path / "o.npz").exists()


def test_console_script(files):
    a, b = files
    proc = subprocess.run(
        ["npz_tool.py", "compare", str(a), str(b)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 1 and "npz compare FAILED" in proc.stdout


# --- inputs that once ended in tracebacks or a false EQUAL (issue 16) --------------------


def test_dump_member_that_is_not_npy(tmp_path, capsys):
    from bad_inputs import npz_with_text_member

    path = npz_with_text_member(tmp_path / "t.npz")
    code, _, err = run_main(main, ["dump", str(path)], capsys)
    assert (code, err) == (1, f"error: {path}: member 'x.txt' is not an .npy array\n")


def test_compare_strings(tmp_path, capsys):
    path = tmp_path / "s.npz"
    np.savez(path, s=np.array(["a", "b"]), x=np.zeros(2))
    code, _, err = run_main(main, ["compare", str(path), str(path)], capsys)
    assert (code, err) == (
        1,
        f"error: {path}: tensor 's' holds strings; only real numbers can be compared "
        "(leave it out with --excepts)\n",
    )
    code, out, _ = run_main(main, ["compare", str(path), str(path), "--excepts", "s"], capsys)
    assert code == 0 and "1 equal" in out


def test_compare_nan_against_nan_fails(tmp_path, capsys):
    path = tmp_path / "n.npz"
    np.savez(path, x=np.full((2, 2), np.nan, np.float32))
    code, out, _ = run_main(main, ["compare", str(path), str(path), "-v"], capsys)
    assert code == 1
    assert out.splitlines()[0] == (
        f"[{'x':<32}]  NOT_SIMILAR [FAILED]  NaN: 4 in target, 4 in reference"
    )
    assert "min_similiarity = (1.0, 1.0, inf)" in out  # NaN rows stay out of the minimum
