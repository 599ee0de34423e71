"""Atomic, reproducible output files.

Every tool stages its outputs in an `OutputSet`: files are written under a
temporary name next to their destination and renamed only when the whole
step succeeded, so a failed run leaves nothing half-written. npz files are
written with fixed zip timestamps so the same arrays give the same bytes,
streamed member by member into the staged file (big weight archives are
never held in memory twice).
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np

from tpuc.base.errors import TpucError

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def write_npz(handle: BinaryIO, arrays: Mapping[str, np.ndarray]) -> None:
    """Write an uncompressed .npz archive to a seekable binary file, each
    member streamed from its array (no in-memory copy of the archive);
    byte-identical for identical arrays."""
    with zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            array = np.asanyarray(value)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            # zipfile picks the zip64 local header from the announced size;
            # the header is rewritten with the real size and CRC on close
            info.file_size = _npy_size(array)
            with archive.open(info, "w") as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def _npy_size(array: np.ndarray) -> int:
    """Bytes `np.lib.format.write_array` writes for `array`."""
    header = io.BytesIO()
    fields = np.lib.format.header_data_from_array_1_0(array)
    try:
        np.lib.format.write_array_header_1_0(header, fields)
    except ValueError:  # header too long for format 1.0
        header = io.BytesIO()
        np.lib.format.write_array_header_2_0(header, fields)
    return len(header.getvalue()) + array.nbytes


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """The bytes `write_npz` writes, for small archives held in memory."""
    buffer = io.BytesIO()
    write_npz(buffer, arrays)
    return buffer.getvalue()


def read_bytes(path: str | os.PathLike[str], kind: str) -> bytes:
    """The whole file at `path` (a `kind`: "bmodel file", ".mlir file" …);
    a folder, a missing or an unreadable file is a one-line TpucError."""
    if Path(path).is_dir():
        raise TpucError(f"{path}: is a folder, not a {kind}")
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise TpucError(f"{path}: no such file") from None
    except PermissionError:
        raise TpucError(f"{path}: permission denied") from None
    except OSError as exc:
        raise TpucError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """All arrays of an npz file; a missing, unreadable or corrupt file, or a
    member that is not an .npy array (numpy returns its raw bytes), is a
    TpucError."""
    if Path(path).is_dir():
        raise TpucError(f"{path}: is a folder, not an npz file")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except FileNotFoundError:
        raise TpucError(f"{path}: no such file") from None
    except PermissionError:
        raise TpucError(f"{path}: permission denied") from None
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise TpucError(f"{path}: holds Python objects (pickled), not numeric arrays") from None
        raise _not_npz(path) from None
    except (OSError, EOFError, zipfile.BadZipFile):
        raise _not_npz(path) from None
    for key, value in arrays.items():
        if not isinstance(value, np.ndarray):
            raise TpucError(f"{path}: member '{key}' is not an .npy array")
    return arrays


def _not_npz(path: str | os.PathLike[str]) -> TpucError:
    return TpucError(f"{path}: not a readable npz file (truncated or not an npz archive)")


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _inode(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(device, inode) of an existing file, None for anything else."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


class OutputSet:
    """Outputs of one tool run, committed together or not at all. An output
    that names an input (by path, through a symlink, or as a hard link to it)
    is refused; any other existing file is replaced by a rename, never
    rewritten in place, so a file linked to it elsewhere keeps its bytes."""

    def __init__(self, protected: tuple[str | os.PathLike[str], ...] = ()) -> None:
        self._staged: list[tuple[str, Path]] = []
        self._protected = {Path(p).resolve() for p in protected}
        # the same files by identity: a hard link is another name for an input
        self._inodes = {key: os.fspath(p) for p in protected if (key := _inode(p)) is not None}
        self._made: list[Path] = []  # folders created for outputs, outermost first

    def write_bytes(self, path: str | os.PathLike[str], data: bytes) -> None:
        with self._staged_file(path) as handle:
            handle.write(data)

    def write_text(self, path: str | os.PathLike[str], text: str) -> None:
        self.write_bytes(path, text.encode())

    def save_npz(self, path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> None:
        with self._staged_file(path) as handle:
            write_npz(handle, arrays)

    def staged(self, path: str | os.PathLike[str]) -> Path:
        """Where the content written for `path` is until the set is
        committed: a later step of the same run reads it there."""
        target = Path(path)
        for tmp, staged_target in reversed(self._staged):
            if staged_target == target:
                return Path(tmp)
        raise KeyError(f"{path} was not written in this output set")

    @contextmanager
    def _staged_file(self, path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
        """A fresh temporary file next to `path`, staged once written
        (removed if writing it fails)."""
        if "\0" in os.fspath(path):  # e.g. from a damaged module name
            raise TpucError(f"{os.fspath(path)!r}: a file name cannot contain a NUL byte")
        target = Path(path)
        if target.resolve() in self._protected:
            raise TpucError(f"{path}: refusing to overwrite an input file")
        if target.is_dir():
            raise TpucError(f"{path}: is a folder; an output must be a file name")
        linked = self._inodes.get(_inode(target))
        if linked is not None:
            raise TpucError(
                f"{path}: refusing to overwrite an input file (a hard link to {linked})"
            )
        self._make_folder(target.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                yield handle
            os.chmod(tmp, 0o666 & ~_umask())
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self._staged.append((tmp, target))

    def _make_folder(self, folder: Path) -> None:
        """Create `folder` and its missing parents, remembering which were new
        so that a failed run removes them again."""
        missing = []
        for parent in (folder, *folder.parents):
            if parent.exists():
                break
            missing.append(parent)
        folder.mkdir(parents=True, exist_ok=True)
        self._made.extend(reversed(missing))

    def commit(self) -> None:
        """Rename every staged file to its name; a rename that fails (the
        name became a folder meanwhile, the disk went read-only) is one line,
        and the files not yet renamed are removed."""
        while self._staged:
            tmp, target = self._staged[0]
            try:
                os.replace(tmp, target)
            except OSError as exc:
                self.discard()
                raise TpucError(f"{target}: cannot write it ({exc.strerror or exc})") from None
            self._staged.pop(0)
        self._made.clear()

    def discard(self) -> None:
        """Remove the staged files, and the folders made for them if empty."""
        for tmp, _ in self._staged:
            Path(tmp).unlink(missing_ok=True)
        self._staged.clear()
        for folder in reversed(self._made):
            with contextlib.suppress(OSError):  # not empty (something else wrote there)
                folder.rmdir()
        self._made.clear()

    def __enter__(self) -> OutputSet:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()
