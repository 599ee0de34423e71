"""The .bmodel file: a 64-byte header, the flatbuffer, the binary blob.

Header (little-endian u32s): magic 0xFF55AAEE, header_size (64),
flatbuffers_size, binary_size, 12 reserved words — TPU-MLIR's layout.
Every `Binary` of the flatbuffer addresses the blob from its first byte.

Integrity: tpuc fills the first 36 reserved bytes with a digest — the tag
"TPD1", BLAKE2b-128 of the flatbuffer, BLAKE2b-128 of the blob — and the
flatbuffer carries a sha256 per command stream (CmdGroup.*_check_code) and
of the coefficients (CoeffMem.check_code). Readers that do not know them
ignore reserved bytes and unknown fields; all-zero reserved bytes (other
writers) mean "no digest".

`write_bmodel` is deterministic (the caller chooses `time`, see
`bmodel_time`); `read_bmodel` checks the header against the file length,
the digests and every payload range, and fails with one line naming the
file (the simulator then checks the model's fields: `tpuc.target.bmodel.validate`).
"""

from __future__ import annotations

import hashlib
import os
import struct
from datetime import UTC, datetime

from tpuc.base.dtypes import DTYPE_BYTES, DTYPE_CODES
from tpuc.base.errors import TpucError
from tpuc.base.files import read_bytes
from tpuc.target.bmodel.fbs_read import decode
from tpuc.target.bmodel.fbs_write import encode
from tpuc.target.bmodel.model import (
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
    input_scale,
)

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
    "input_scale",
    "bmodel_time",
    "load_bmodel_file",
    "read_bmodel",
    "write_bmodel",
]

MAGIC = 0xFF55AAEE
HEADER_SIZE = 64
_HEADER = struct.Struct("<4I48x")
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
DIGEST_TAG = b"TPD1"  # reserved bytes 16..19: the digest's format
DIGEST_BYTES = 16  # BLAKE2b-128 of the flatbuffer (20..35), of the blob (36..51)
_DIGEST = struct.Struct(f"<4s{DIGEST_BYTES}s{DIGEST_BYTES}s12x")


def payload_digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST_BYTES).digest()


def write_bmodel(model: BModel) -> bytes:
    """The bytes of a .bmodel file holding `model` (same model, same bytes)."""
    flatbuffer, blob = encode(model)
    header = bytearray(_HEADER.pack(MAGIC, HEADER_SIZE, len(flatbuffer), len(blob)))
    _DIGEST.pack_into(header, 16, DIGEST_TAG, payload_digest(flatbuffer), payload_digest(blob))
    return bytes(header) + flatbuffer + blob


def _stored_digests(data: bytes, source: str) -> tuple[bytes, bytes] | None:
    """(flatbuffer, blob) digests of the header; None when the reserved
    bytes are all zero (a writer that stores none)."""
    reserved = data[16:HEADER_SIZE]
    if not any(reserved):
        return None
    tag, flat, blob = _DIGEST.unpack_from(data, 16)
    if tag != DIGEST_TAG or any(data[16 + 4 + 2 * DIGEST_BYTES : HEADER_SIZE]):
        raise TpucError(
            f"{source}: the header's reserved bytes hold neither zeros nor a tpuc digest "
            f"(tag {tag!r}): the file is corrupt"
        )
    return flat, blob


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
    _refuse_native(data, source)
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
    digests = _stored_digests(data, source)
    if digests is not None and payload_digest(flatbuffer) != digests[0]:
        raise TpucError(
            f"{source}: flatbuffer digest mismatch (BLAKE2b of its {fb_size} bytes differs "
            "from the header's): the file is corrupt"
        )
    model = decode(flatbuffer, blob, source)  # names a damaged stream or coefficients
    if digests is not None and payload_digest(blob) != digests[1]:
        raise TpucError(
            f"{source}: binary blob digest mismatch (BLAKE2b of its {bin_size} bytes differs "
            "from the header's; the command streams and coefficients match their "
            "checksums, so CPU parameters or padding changed): the file is corrupt"
        )
    return model


def _refuse_native(data: bytes, source: str) -> None:
    """A bmodel of the chip's own command streams is not for tpuc's simulator."""
    from tpuc.target.bmodel.native import NATIVE_TYPE, model_type

    if model_type(data) == NATIVE_TYPE:
        raise TpucError(
            f"{source}: a native bmodel (the chip's own command streams): tpuc's device simulator "
            "runs only tpuc's instruction set; run it with model_runner.py, which uses the vendor "
            "runtime (`tpuc-vendor fetch` once)"
        )


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
