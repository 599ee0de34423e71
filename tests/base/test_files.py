"""tpuc.base.files: npz archives streamed into the staged file are byte-identical
to the same archive built in memory with zipfile.writestr (an independent
reference), readable by numpy, and a failed write leaves nothing behind."""

from __future__ import annotations

import io
import os
import warnings
import zipfile

import numpy as np
import pytest

from tpuc.base.errors import TpucError
from tpuc.base.files import OutputSet, load_npz, npz_bytes

EPOCH = (1980, 1, 1, 0, 0, 0)


def writestr_npz(arrays) -> bytes:
    """Reference: every member serialized in memory, then `writestr`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=EPOCH)
            info.external_attr = 0o644 << 16
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def arrays() -> dict[str, object]:
    rng = np.random.default_rng(0)
    return {
        "scalar": np.array(3.5, np.float32),
        "fortran": np.asfortranarray(rng.standard_normal((5, 7)).astype(np.float32)),
        "strided": rng.standard_normal((6, 8))[::2, ::3],
        "empty": np.zeros((0, 3), np.int64),
        "flags": np.array([True, False]),
        "half": rng.standard_normal((3, 4, 5)).astype(np.float16).transpose(2, 0, 1),
        "big": np.arange(3 * 2**20, dtype=np.float32).reshape(3, -1),  # several write chunks
        "listed": [1, 2, 3],
    }


def test_streamed_npz_matches_writestr_reference(tmp_path):
    data = arrays()
    expected = writestr_npz(data)
    assert npz_bytes(data) == expected
    with OutputSet() as out:
        out.save_npz(tmp_path / "a.npz", data)
    assert (tmp_path / "a.npz").read_bytes() == expected
    loaded = load_npz(tmp_path / "a.npz")
    assert list(loaded) == list(data)
    for name, value in data.items():
        np.testing.assert_array_equal(loaded[name], np.asarray(value))
    assert loaded["fortran"].flags.f_contiguous


def test_huge_header_uses_npy_format_2():
    data = {"wide": np.zeros(1, dtype=[("x" * 70000, "<f4")])}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy warns when it falls back to format 2.0
        assert npz_bytes(data) == writestr_npz(data)


@pytest.mark.parametrize("size", [100, 206, 207, 300])  # 128-byte npy header: 207 -> zip64
def test_zip64_headers_chosen_like_writestr(monkeypatch, size):
    """zipfile switches to zip64 local headers above ZIP64_LIMIT / 1.05 of
    the announced size: the streamed writer announces the exact npy size."""
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 1000)
    data = {"a": np.arange(size, dtype=np.float32)}
    expected = writestr_npz(data)
    assert npz_bytes(data) == expected
    assert (len(expected) - 4 * size > 300) == (size >= 207)  # zip64 extras present


def test_failed_npz_leaves_no_file(tmp_path):
    with pytest.raises(ValueError), OutputSet() as out:
        out.save_npz(tmp_path / "ok.npz", {"a": np.zeros(3)})
        out.save_npz(tmp_path / "bad.npz", {"a": np.zeros(3), "o": np.array([object()])})
    assert list(tmp_path.iterdir()) == []


def test_protected_input_is_refused(tmp_path):
    given = tmp_path / "in.npz"
    given.write_bytes(b"input")
    with pytest.raises(TpucError, match="refusing to overwrite"), OutputSet((given,)) as out:
        out.save_npz(given, {"a": np.zeros(3)})
    assert given.read_bytes() == b"input"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npz"]


def test_hard_link_to_an_input_is_refused(tmp_path):
    """A hard link is the input under another name: writing it in place would
    change the input, so it is refused like the input's own path."""
    given = tmp_path / "in.npz"
    given.write_bytes(b"input")
    os.link(given, tmp_path / "out.npz")
    with pytest.raises(TpucError) as info, OutputSet((given,)) as out:
        out.save_npz(tmp_path / "out.npz", {"a": np.zeros(3)})
    assert str(info.value) == (
        f"{tmp_path / 'out.npz'}: refusing to overwrite an input file (a hard link to {given})"
    )
    assert given.read_bytes() == b"input" and (tmp_path / "out.npz").read_bytes() == b"input"


def test_existing_output_is_replaced_not_rewritten(tmp_path):
    """An output that shares its inode with some other file (not an input)
    becomes a new file: the other name keeps its bytes."""
    other, target = tmp_path / "other.bin", tmp_path / "out.bin"
    other.write_bytes(b"other")
    os.link(other, target)
    with OutputSet() as out:
        out.write_bytes(target, b"new")
    assert target.read_bytes() == b"new" and other.read_bytes() == b"other"
    assert not os.path.samefile(other, target)


def test_folder_as_an_output_is_one_line(tmp_path):
    """A folder where an output file should go was a traceback from the final
    rename (after the whole run), leaving the staged temporary file behind."""
    (tmp_path / "out.npz").mkdir()
    with pytest.raises(TpucError) as info, OutputSet() as out:
        out.write_bytes(tmp_path / "ok.bin", b"fine")
        out.save_npz(tmp_path / "out.npz", {"a": np.zeros(3)})
    assert str(info.value) == f"{tmp_path / 'out.npz'}: is a folder; an output must be a file name"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npz"]


def test_failed_rename_is_one_line_and_leaves_no_temporary(tmp_path, monkeypatch):
    def refuse(src, dst):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(TpucError) as info, OutputSet() as out:
        out.write_bytes(tmp_path / "a.bin", b"a")
    assert str(info.value) == f"{tmp_path / 'a.bin'}: cannot write it (Read-only file system)"
    assert list(tmp_path.iterdir()) == []


def test_nul_in_an_output_name_is_one_line(tmp_path):
    """A damaged module name becomes output file names (found by
    regression/fuzz_mlir.py through model_deploy)."""
    with (
        pytest.raises(TpucError, match="a file name cannot contain a NUL byte$"),
        OutputSet() as out,
    ):
        out.write_text(tmp_path / "m\0_tpu.mlir", "x")
    assert list(tmp_path.iterdir()) == []


# --- unreadable inputs say why (issue 16) ------------------------------------------------


def test_npz_member_that_is_not_npy(tmp_path):
    from bad_inputs import npz_with_text_member

    path = npz_with_text_member(tmp_path / "t.npz")
    with pytest.raises(TpucError) as info:
        load_npz(path)
    assert str(info.value) == f"{path}: member 'x.txt' is not an .npy array"


def test_npz_without_read_permission(tmp_path, monkeypatch):
    path = tmp_path / "a.npz"
    np.savez(path, a=np.zeros(2))

    def denied(*args, **kwargs):  # chmod 0 does not stop root
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(np, "load", denied)
    with pytest.raises(TpucError) as info:
        load_npz(path)
    assert str(info.value) == f"{path}: permission denied"


def test_npz_that_is_a_folder(tmp_path):
    with pytest.raises(TpucError) as info:
        load_npz(tmp_path)
    assert str(info.value) == f"{tmp_path}: is a folder, not an npz file"


def test_npz_with_pickled_objects(tmp_path):
    path = tmp_path / "o.npz"
    np.savez(path, a=np.array([{"x": 1}], dtype=object))
    with pytest.raises(TpucError) as info:
        load_npz(path)
    assert str(info.value) == f"{path}: holds Python objects (pickled), not numeric arrays"


def test_failed_run_removes_the_folders_it_made(tmp_path):
    (tmp_path / "kept").mkdir()
    with pytest.raises(RuntimeError), OutputSet() as out:
        out.write_text(tmp_path / "a" / "b" / "x.txt", "x")
        out.write_text(tmp_path / "kept" / "y.txt", "y")
        raise RuntimeError("a later step failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
    assert not any((tmp_path / "kept").iterdir())


def test_staged_content_is_readable_before_the_commit(tmp_path):
    """A later step of one run (model_deploy lowering with its automatic
    qtable) reads what an earlier one wrote, before anything is committed."""
    target = tmp_path / "out" / "q"
    with OutputSet() as out:
        out.write_text(target, "a F16\n")
        staged = out.staged(target)
        assert staged.read_text() == "a F16\n" and not target.exists()
        with pytest.raises(KeyError):
            out.staged(tmp_path / "other")
    assert target.read_text() == "a F16\n" and not staged.exists()
