"""The .bmodel file: a 64-byte header, the flatbuffer, the binary blob.

Header (little-endian u32s): magic 0xFF55AAEE, header_size (64),
flatbuffers_size, binary_size, 12 reserved zeros — TPU-MLIR's layout.
Every `Binary` of the flatbuffer addresses the blob from its first byte.
`write_bmodel` is deterministic (the caller chooses `time`, see
`bmodel_time`); `read_bmodel` checks the header against the file length,
every payload range and the coefficient sha256, and fails with one line
naming the file.
"""

from __future__ import annotations

import os
import struct
from datetime import UTC, datetime

from tpuc.bmodel.fbs_read import decode
from tpuc.bmodel.fbs_write import encode
from tpuc.bmodel.model import (
    MODE_CODES,
    Binary,
    BModel,
    CmdGroup,
    CpuParam,
    Location,
    Net,
    NetParameter,
    SubNet,
    TensorDesc,
)
from tpuc.dtypes import DTYPE_BYTES, DTYPE_CODES
from tpuc.errors import TpucError
from tpuc.files import read_bytes

__all__ = [
    "DTYPE_BYTES",
    "DTYPE_CODES",
    "HEADER_SIZE",
    "MAGIC",
    "MODE_CODES",
    "Binary",
    "BModel",
    "CmdGroup",
    "CpuParam",
    "Location",
    "Net",
    "NetParameter",
    "SubNet",
    "TensorDesc",
    "bmodel_time",
    "load_bmodel_file",
    "read_bmodel",
    "write_bmodel",
]

MAGIC = 0xFF55AAEE
HEADER_SIZE = 64
_HEADER = struct.Struct("<4I48x")
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def write_bmodel(model: BModel) -> bytes:
    """The bytes of a .bmodel file holding `model` (same model, same bytes)."""
    flatbuffer, blob = encode(model)
    header = _HEADER.pack(MAGIC, HEADER_SIZE, len(flatbuffer), len(blob))
    return header + flatbuffer + blob


def read_bmodel(data: bytes, source: str) -> BModel:
    """The BModel in `data` (the bytes of file `source`), fully checked."""
    if len(data) < HEADER_SIZE:
        raise TpucError(
            f"{source}: truncated bmodel: {len(data)} bytes, shorter than the "
            f"{HEADER_SIZE}-byte header"
        )
    magic, header_size, fb_size, bin_size = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise TpucError(f"{source}: not a bmodel (magic 0x{magic:08X}, expected 0x{MAGIC:08X})")
    if header_size != HEADER_SIZE:
        raise TpucError(
            f"{source}: unsupported bmodel header size {header_size} (expected {HEADER_SIZE})"
        )
    total = HEADER_SIZE + fb_size + bin_size
    if len(data) < total:
        raise TpucError(
            f"{source}: truncated bmodel: header says {total} bytes, file has {len(data)}"
        )
    if len(data) > total:
        raise TpucError(
            f"{source}: bmodel size mismatch: header says {total} bytes, file has {len(data)}"
        )
    view = memoryview(data)
    flatbuffer = bytes(view[HEADER_SIZE : HEADER_SIZE + fb_size])
    blob = bytes(view[HEADER_SIZE + fb_size :])
    return decode(flatbuffer, blob, source)


def load_bmodel_file(path: str | os.PathLike) -> BModel:
    """Read and check the .bmodel file at `path`."""
    data = read_bytes(path, "bmodel file")
    return read_bmodel(data, str(path))


def bmodel_time() -> str:
    """Model.time as TPU-MLIR writes it ("2026-11-21 18:03:07"): from
    SOURCE_DATE_EPOCH (UTC) when set, for reproducible builds; else local now."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is None:
        return datetime.now().strftime(TIME_FORMAT)
    try:
        stamp = datetime.fromtimestamp(int(epoch), tz=UTC)
    except (ValueError, OverflowError, OSError):
        raise TpucError(
            f"SOURCE_DATE_EPOCH='{epoch}' is not a valid number of seconds since 1970"
        ) from None
    return stamp.strftime(TIME_FORMAT)
