"""Checks on .mlir text before xDSL's parser sees it.

xDSL 0.74's lexer matches a string literal with a regular expression that
backtracks exponentially when the closing `"` is missing (30 characters take
minutes), and it reads bytes that are not UTF-8 with a raw UnicodeDecodeError.
Every loader (module_io, tpuc-opt) decodes and scans the text here first, in
one linear pass that accepts exactly the literals xDSL's lexer accepts.
"""

from __future__ import annotations

import re

from tpuc.base.errors import TpucError

_SIMPLE_ESCAPES = frozenset('"nt\\')
_HEX = frozenset("0123456789abcdefABCDEF")
_LINE_ENDS = frozenset("\n\v\f")
# xDSL builds an integer type's bounds as Python ints of its width (i4294967297
# takes seconds and 0.5 GB); MLIR allows up to 2^24 bits, tpuc needs 64.
MAX_INT_WIDTH = 1 << 16
_INT_TYPE = re.compile(r"[su]?i(\d+)")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$.-%@#!^")


def decode_ir(data: bytes, source: str) -> str:
    """`data` as UTF-8 text (pass it to `check_ir_text` before parsing)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TpucError(
            f"{source}: invalid IR: line {line}: not UTF-8 text "
            f"(byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    return text


def check_ir_text(text: str, source: str) -> None:
    """Every string literal outside comments is closed on its line and uses
    only the escapes MLIR knows; otherwise a TpucError naming the line."""
    pos, end = 0, len(text)
    while pos < end:
        char = text[pos]
        if char == '"':
            pos = _string_end(text, pos, source)
        elif char == "/" and text.startswith("//", pos):
            newline = text.find("\n", pos)
            pos = end if newline < 0 else newline + 1
        elif char in "siu" and (pos == 0 or text[pos - 1] not in _NAME_CHARS):
            pos = _word_end(text, pos, source)
        else:
            pos += 1


def _word_end(text: str, start: int, source: str) -> int:
    """The position after the bare word at `start`; an integer type's width
    must be at most MAX_INT_WIDTH."""
    pos = start
    while pos < len(text) and text[pos] in _NAME_CHARS:
        pos += 1
    found = _INT_TYPE.fullmatch(text, start, pos)
    if found and int(found.group(1)) > MAX_INT_WIDTH:
        line, col = _location(text, start)
        raise TpucError(
            f"{source}: invalid IR: line {line}:{col}: integer type width "
            f"{int(found.group(1))} exceeds {MAX_INT_WIDTH} bits"
        )
    return max(pos, start + 1)


def _string_end(text: str, start: int, source: str) -> int:
    """The position after the literal opened at `start` (a `"`)."""
    pos, end = start + 1, len(text)
    while pos < end:
        char = text[pos]
        if char == '"':
            return pos + 1
        if char in _LINE_ENDS:
            break
        if char != "\\":
            pos += 1
        elif text[pos + 1 : pos + 2] in _SIMPLE_ESCAPES:
            pos += 2
        elif len(text[pos + 1 : pos + 3]) == 2 and set(text[pos + 1 : pos + 3]) <= _HEX:
            pos += 3
        else:
            line, col = _location(text, pos)
            raise TpucError(
                f"{source}: invalid IR: line {line}:{col}: "
                "unknown escape sequence in a string literal"
            )
    line, col = _location(text, start)
    raise TpucError(
        f"{source}: invalid IR: line {line}:{col}: string literal not closed on its line"
    )


def _location(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of `pos`."""
    line_start = text.rfind("\n", 0, pos) + 1
    return text.count("\n", 0, pos) + 1, pos - line_start + 1
