"""Checks on .mlir text before xDSL's parser sees it.

xDSL 0.74's lexer matches a string literal with a regular expression that
backtracks exponentially when the closing `"` is missing (30 characters take
minutes), and it reads bytes that are not UTF-8 with a raw UnicodeDecodeError.
Every loader (module_io, tpuc-opt) decodes and scans the text here first, in
one linear pass that accepts exactly the literals xDSL's lexer accepts.
"""

from __future__ import annotations

from tpuc.errors import TpucError

_SIMPLE_ESCAPES = frozenset('"nt\\')
_HEX = frozenset("0123456789abcdefABCDEF")
_LINE_ENDS = frozenset("\n\v\f")


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
        else:
            pos += 1


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
