"""Fetch SOPHGO's vendor libraries from the tpu-mlir wheel into a local cache.

The native target links against SOPHGO's backend, chip model (cmodel) and
runtime, which SOPHGO publishes only inside the `tpu-mlir` wheel on PyPI
(312 MB, every chip's libraries plus a bundled glibc). tpuc pins one version,
downloads the wheel once with pip, checks its sha256 and unpacks just the
BM1684X libraries and the headers that describe their parameter records —
never `tpu_mlir/lib/third_party`, whose glibc must not shadow the host's.

The cache is written into a temporary folder next to its final place and
renamed into place with `manifest.json` (every file's size and sha256) last,
so a failed or interrupted fetch leaves nothing that `locate` would accept.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tpuc.base.errors import TpucError

VENDOR_VERSION = "1.30.2"
WHEEL_NAME = f"tpu_mlir-{VENDOR_VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "542807361c9eeb0777a7bd35e501d8c71cce767e4bce021a3cb3a7c25c35f909"
WHEEL_SIZE_MB = 312
MANIFEST = "manifest.json"
FIX = "run `tpuc-vendor fetch`"

_LIB = "tpu_mlir/lib/"
_INCLUDE = "tpu_mlir/include/"
_NEVER = "tpu_mlir/lib/third_party/"  # a bundled glibc: loading it breaks the host process

# The wheel members tpuc needs: the BM1684X backend, its chip model, the
# runtime and its device library, the kernel module, and the headers of the
# parameter records and of the bmodel schema.
REQUIRED_MEMBERS = (
    _LIB + "libbackend_bm1684x.so",
    _LIB + "libcmodel_bm1684x.so",
    _LIB + "libcmodel.so",
    _LIB + "libbmlib.so.0",
    _LIB + "libbmlib_bm1684x.so.0",
    _LIB + "libbmrt.so",
    _LIB + "libbmrt.so.1.0",
    _LIB + "libbm1684x_kernel_module.so",
    _INCLUDE + "tpu_mlir/Backend/BM168x/Param.h",
    _INCLUDE + "tpu_mlir/Backend/BM168x/BM168x.h",
    _INCLUDE + "tpu_mlir/Backend/BM168x/BM1684X.h",
    _INCLUDE + "tpu_mlir/Interfaces/LocalGenInterface.h",
    _INCLUDE + "tpu_mlir/Builder/BM168x/bmodel.fbs",
)
# Unpacked when the wheel has them (the unversioned name some loaders ask for).
OPTIONAL_MEMBERS = (_LIB + "libbmlib.so",)

_CHUNK = 1 << 20


def cache_path(member: str) -> str:
    """Where a wheel member lands in the cache: `lib/<basename>`, `include/<rest>`."""
    if member.startswith(_NEVER):
        raise ValueError(f"{member}: never unpacked")
    if member.startswith(_LIB):
        return "lib/" + member.rsplit("/", 1)[1]
    if member.startswith(_INCLUDE):
        return "include/" + member[len(_INCLUDE) :]
    raise ValueError(f"{member}: not a library or header of the wheel")


@dataclass(frozen=True)
class VendorPaths:
    """A checked vendor cache: its folders and the files the native target uses."""

    root: Path
    lib: Path
    include: Path

    @classmethod
    def at(cls, root: Path) -> VendorPaths:
        return cls(root=root, lib=root / "lib", include=root / "include")

    @property
    def backend(self) -> Path:
        """The BM1684X backend: the per-op code generators the native target calls."""
        return self.lib / "libbackend_bm1684x.so"

    @property
    def cmodel(self) -> Path:
        """The BM1684X chip model (the cache also has it as libcmodel.so, the name bmlib loads)."""
        return self.lib / "libcmodel_bm1684x.so"

    @property
    def bmrt(self) -> Path:
        """The runtime that loads and runs bmodels."""
        return self.lib / "libbmrt.so"

    @property
    def bmlib(self) -> Path:
        """The device library under the runtime (its soname)."""
        return self.lib / "libbmlib.so.0"

    @property
    def kernel_module(self) -> Path:
        """The BM1684X kernel module the runtime loads onto the device."""
        return self.lib / "libbm1684x_kernel_module.so"

    @property
    def param_h(self) -> Path:
        """The backend's parameter records, as C structs."""
        return self.include / "tpu_mlir" / "Backend" / "BM168x" / "Param.h"

    @property
    def bmodel_fbs(self) -> Path:
        """The bmodel flatbuffers schema this runtime reads."""
        return self.include / "tpu_mlir" / "Builder" / "BM168x" / "bmodel.fbs"


def cache_dir() -> Path:
    """The cache folder: $TPUC_CACHE/vendor/..., else under $XDG_CACHE_HOME or ~/.cache."""
    base = os.environ.get("TPUC_CACHE")
    if base:
        top = Path(base)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        top = (Path(xdg) if xdg else Path.home() / ".cache") / "tpuc"
    return top / "vendor" / f"tpu-mlir-{VENDOR_VERSION}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# --- checking a cache -----------------------------------------------------------


def _read_manifest(root: Path) -> dict:
    """The manifest of the cache at `root`, or a TpucError saying what to run."""
    manifest = root / MANIFEST
    if not manifest.is_file():
        if root.exists():
            raise TpucError(f"vendor cache at {root} is incomplete (no {MANIFEST}): {FIX}")
        raise TpucError(f"no vendor cache at {root} (tpu-mlir {VENDOR_VERSION}): {FIX}")
    try:
        data = json.loads(manifest.read_text())
        version, files = data["version"], data["files"]
        if not isinstance(files, dict):
            raise TypeError("files is not a mapping")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TpucError(f"vendor cache at {root}: unreadable {MANIFEST} ({exc}): {FIX}") from None
    if version != VENDOR_VERSION:
        raise TpucError(
            f"vendor cache at {root} holds tpu-mlir {version}, tpuc needs {VENDOR_VERSION}: {FIX}"
        )
    if data.get("wheel_sha256") != WHEEL_SHA256:
        raise TpucError(f"vendor cache at {root} was unpacked from another wheel: {FIX}")
    return data


def _check_files(root: Path, files: dict, verify: bool) -> None:
    """Every required file listed, present at its size and, with `verify`, its sha256."""
    unlisted = [p for p in map(cache_path, REQUIRED_MEMBERS) if p not in files]
    if unlisted:
        raise TpucError(f"vendor cache at {root}: {MANIFEST} lacks {unlisted[0]}: {FIX}")
    for rel, entry in sorted(files.items()):
        path = root / rel
        if not path.is_file():
            raise TpucError(f"vendor cache at {root}: {rel} is missing: {FIX}")
        size = path.stat().st_size
        if size != entry["size"]:
            raise TpucError(
                f"vendor cache at {root}: {rel} has {size} bytes, expected {entry['size']}: {FIX}"
            )
        if verify and (digest := sha256_of(path)) != entry["sha256"]:
            raise TpucError(
                f"vendor cache at {root}: {rel} is corrupt "
                f"(sha256 {digest}, expected {entry['sha256']}): {FIX}"
            )


def locate(verify: bool = False) -> VendorPaths:
    """The vendor cache, checked: sizes always, every file's sha256 with `verify`.

    Any problem is a one-line TpucError that says to run `tpuc-vendor fetch`.
    """
    root = cache_dir()
    try:
        _check_files(root, _read_manifest(root)["files"], verify)
    except (KeyError, TypeError) as exc:  # a manifest entry without size or sha256
        raise TpucError(f"vendor cache at {root}: unreadable {MANIFEST} ({exc!r}): {FIX}") from None
    return VendorPaths.at(root)


# --- fetching -------------------------------------------------------------------


def _download(folder: Path, progress: Callable[[str], None]) -> Path:
    """pip download the pinned wheel into `folder` (no dependencies, any host Python)."""
    progress(f"downloading tpu-mlir=={VENDOR_VERSION} from PyPI with pip (~{WHEEL_SIZE_MB} MB)")
    command = [
        sys.executable, "-m", "pip", "download", f"tpu-mlir=={VENDOR_VERSION}",
        "--no-deps", "--python-version", "3.10", "--only-binary=:all:",
        "--disable-pip-version-check", "-d", str(folder),
    ]  # fmt: skip
    # pip's progress bar goes to stdout (shown); stderr is kept for the error.
    result = subprocess.run(command, stderr=subprocess.PIPE, text=True, check=False)
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {result.returncode}"
        raise TpucError(f"pip could not download tpu-mlir=={VENDOR_VERSION}: {last}")
    wheel = folder / WHEEL_NAME
    if not wheel.is_file():
        raise TpucError(f"pip download of tpu-mlir=={VENDOR_VERSION} left no {WHEEL_NAME}")
    return wheel


def _check_wheel(wheel: Path, expected: str) -> None:
    """The wheel is the pinned one, byte for byte."""
    if not wheel.is_file():
        raise TpucError(f"{wheel}: no such file")
    digest = sha256_of(wheel)
    if digest != expected:
        raise TpucError(
            f"{wheel}: sha256 {digest} is not tpu-mlir {VENDOR_VERSION}'s {expected} "
            "(corrupt or another wheel)"
        )


def _copy_member(archive: zipfile.ZipFile, member: str, target: Path) -> dict:
    """Stream one member to `target`; its size and sha256 for the manifest."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with archive.open(member) as src, target.open("wb") as dst:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            dst.write(chunk)
    return {"sha256": digest.hexdigest(), "size": size}


def _unpack(wheel: Path, dest: Path, wheel_sha256: str) -> int:
    """Unpack the chosen members flat into `dest` and write the manifest last."""
    try:
        archive = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError) as exc:
        raise TpucError(f"{wheel}: not a readable wheel ({exc})") from None
    with archive:
        names = set(archive.namelist())
        missing = [m for m in REQUIRED_MEMBERS if m not in names]
        if missing:
            raise TpucError(f"{wheel}: no {missing[0]} in the wheel ({len(missing)} missing)")
        members = [*REQUIRED_MEMBERS, *(m for m in OPTIONAL_MEMBERS if m in names)]
        files = {cache_path(m): _copy_member(archive, m, dest / cache_path(m)) for m in members}
    manifest = {
        "version": VENDOR_VERSION,
        "wheel": WHEEL_NAME,
        "wheel_sha256": wheel_sha256,
        "files": files,
    }
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return len(files)


def _install(staged: Path, root: Path) -> None:
    """Rename the staged cache into place, replacing an invalid one."""
    old = None
    if root.exists():
        old = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}.old-"))
        root.rename(old / root.name)
    try:
        staged.rename(root)
    except OSError:
        if not root.exists():  # not another fetch winning the race: a real failure
            raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _valid(verify: bool) -> VendorPaths | None:
    try:
        return locate(verify=verify)
    except TpucError:
        return None


def fetch(wheel: Path | None = None, progress: Callable[[str], None] = print) -> VendorPaths:
    """Make the vendor cache valid: download (or take `wheel`), check, unpack.

    A cache that already passes `locate(verify=True)` is returned as is, so
    `fetch` is cheap to call again and also repairs a corrupt cache.
    """
    root = cache_dir()
    if paths := _valid(verify=True):
        progress(f"tpu-mlir {VENDOR_VERSION} is already at {root} (verified)")
        return paths
    root.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}.tmp-"))
    try:
        if wheel is None:
            wheel = _download(staged / "download", progress)
        wheel = Path(wheel)
        progress(f"checking the sha256 of {wheel}")
        _check_wheel(wheel, WHEEL_SHA256)
        unpacked = staged / root.name
        count = _unpack(wheel, unpacked, WHEEL_SHA256)
        _install(unpacked, root)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    paths = locate(verify=False)
    progress(f"unpacked {count} files of tpu-mlir {VENDOR_VERSION} into {root}")
    return paths


__all__ = [
    "OPTIONAL_MEMBERS",
    "REQUIRED_MEMBERS",
    "VENDOR_VERSION",
    "VendorPaths",
    "cache_dir",
    "cache_path",
    "fetch",
    "locate",
]
