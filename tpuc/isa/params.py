"""Command parameters: an op's attributes as a stream of 64-bit words.

Each attribute is an entry: a tag word (type in bits 0-7, name length in
bits 8-15, count in bits 32-63), the name's UTF-8 bytes padded to whole
words, then `count` payload words (ints as i64, floats as f64, bools as 0/1;
a string's count is its byte length, padded; a string list's count is the
number of strings, each a length word and padded bytes). The stream is
zero-padded to whole records; a zero tag ends it. Names make the stream
self-describing, so adding an attribute to an op never shifts another.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from tpuc.isa.records import RECORD_BYTES

INT, FLOAT, BOOL, STR, INT_LIST, FLOAT_LIST, STR_LIST = range(1, 8)


def _padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 8)


def _entry(name: str, value) -> bytes:
    kind, payload, count = _payload(name, value)
    key = name.encode()
    if len(key) > 0xFF:
        raise ValueError(f"attribute name '{name[:20]}…' is longer than 255 bytes")
    tag = kind | (len(key) << 8) | (count << 32)
    return struct.pack("<Q", tag) + _padded(key) + payload


def _payload(name: str, value) -> tuple[int, bytes, int]:
    if isinstance(value, bool):
        return BOOL, struct.pack("<q", int(value)), 1
    if isinstance(value, int):
        return INT, struct.pack("<q", value), 1
    if isinstance(value, float):
        return FLOAT, struct.pack("<d", value), 1
    if isinstance(value, str):
        data = value.encode()
        return STR, _padded(data), len(data)
    if isinstance(value, list | tuple):
        items = list(value)
        if all(isinstance(v, str) for v in items) and items:
            parts = [struct.pack("<Q", len(v.encode())) + _padded(v.encode()) for v in items]
            return STR_LIST, b"".join(parts), len(items)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            return INT_LIST, struct.pack(f"<{len(items)}q", *items), len(items)
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in items):
            return FLOAT_LIST, struct.pack(f"<{len(items)}d", *items), len(items)
    raise ValueError(f"attribute '{name}' ({type(value).__name__}) has no command encoding")


def encode_params(attrs: Mapping[str, object]) -> bytes:
    """Attributes (plain Python values), sorted by name, padded to records."""
    try:
        words = b"".join(_entry(name, attrs[name]) for name in sorted(attrs))
    except struct.error as exc:  # an int outside i64
        raise ValueError(f"attribute out of range: {exc}") from None
    return words + b"\0" * (-len(words) % RECORD_BYTES)


def decode_params(data: bytes) -> dict[str, object]:
    """The inverse of `encode_params`; ValueError on a malformed stream."""
    try:
        return _decode(data)
    except (struct.error, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed parameters: {exc}") from None


def _decode(data: bytes) -> dict[str, object]:
    attrs: dict[str, object] = {}
    pos = 0
    while pos + 8 <= len(data):
        (tag,) = struct.unpack_from("<Q", data, pos)
        if tag == 0:
            break
        kind, size, count = tag & 0xFF, (tag >> 8) & 0xFF, tag >> 32
        pos += 8
        name = data[pos : pos + size].decode()
        pos += size + (-size % 8)
        attrs[name], pos = _read(kind, count, data, pos, name)
    return attrs


def _read(kind: int, count: int, data: bytes, pos: int, name: str) -> tuple[object, int]:
    if pos + 8 * (count if kind not in (STR, STR_LIST) else 0) > len(data):
        raise ValueError(f"parameter '{name}' runs past the end of its command")
    if kind == INT:
        return struct.unpack_from("<q", data, pos)[0], pos + 8
    if kind == FLOAT:
        return struct.unpack_from("<d", data, pos)[0], pos + 8
    if kind == BOOL:
        return bool(struct.unpack_from("<q", data, pos)[0]), pos + 8
    if kind == STR:
        if pos + count > len(data):
            raise ValueError(f"parameter '{name}' runs past the end of its command")
        return data[pos : pos + count].decode(), pos + count + (-count % 8)
    if kind == INT_LIST:
        return list(struct.unpack_from(f"<{count}q", data, pos)), pos + 8 * count
    if kind == FLOAT_LIST:
        return list(struct.unpack_from(f"<{count}d", data, pos)), pos + 8 * count
    if kind == STR_LIST:
        items = []
        for _ in range(count):
            (size,) = struct.unpack_from("<Q", data, pos)
            items.append(data[pos + 8 : pos + 8 + size].decode())
            pos += 8 + size + (-size % 8)
        return items, pos
    raise ValueError(f"parameter '{name}' has unknown type {kind}")
