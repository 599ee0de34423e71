"""Atomic, reproducible output files.

Every tool stages its outputs in an `OutputSet`: files are written under a
temporary name next to their destination and renamed only when the whole
step succeeded, so a failed run leaves nothing half-written. npz files are
written with fixed zip timestamps so the same arrays give the same bytes.
"""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import numpy as np

from tpuc.errors import TpucError

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An uncompressed .npz archive, byte-identical for identical arrays."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """All arrays of an npz file; a missing or corrupt file is a TpucError."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except FileNotFoundError:
        raise TpucError(f"{path}: no such file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        raise TpucError(
            f"{path}: not a readable npz file (truncated or not an npz archive)"
        ) from None


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


class OutputSet:
    """Outputs of one tool run, committed together or not at all."""

    def __init__(self, protected: tuple[str | os.PathLike[str], ...] = ()) -> None:
        self._staged: list[tuple[str, Path]] = []
        self._protected = {Path(p).resolve() for p in protected}

    def write_bytes(self, path: str | os.PathLike[str], data: bytes) -> None:
        target = Path(path)
        if target.resolve() in self._protected:
            raise TpucError(f"{path}: refusing to overwrite an input file")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        self._staged.append((tmp, target))

    def write_text(self, path: str | os.PathLike[str], text: str) -> None:
        self.write_bytes(path, text.encode())

    def save_npz(self, path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> None:
        self.write_bytes(path, npz_bytes(arrays))

    def commit(self) -> None:
        for tmp, target in self._staged:
            os.replace(tmp, target)
        self._staged.clear()

    def discard(self) -> None:
        for tmp, _ in self._staged:
            Path(tmp).unlink(missing_ok=True)
        self._staged.clear()

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
