"""tpuc.base.ir_text: the scan accepts what xDSL's string-literal lexer accepts and
rejects an unclosed literal at once (xDSL itself backtracks for minutes)."""

from __future__ import annotations

import time

import pytest

from tpuc.base.errors import TpucError
from tpuc.base.ir_text import check_ir_text, decode_ir


@pytest.mark.parametrize(
    "text",
    [
        '%0 = "top.Relu"() {name = "a\\"b\\n\\t\\\\c\\0A"} : () -> none',
        '// a comment with an unclosed " quote\n%0 = "x"',
        'loc("file.onnx":3:4) "" "//not a comment"',
    ],
)
def test_valid_literals_pass(text):
    check_ir_text(text, "m.mlir")


def test_unclosed_literal_is_reported_fast():
    text = 'module {\n  %0 = "top.Relu"() {name = "r} ' + "a" * 5000 + "\n}\n"
    start = time.perf_counter()
    with pytest.raises(TpucError) as info:
        check_ir_text(text, "m.mlir")
    assert time.perf_counter() - start < 1.0
    assert str(info.value) == "m.mlir: invalid IR: line 2:29: string literal not closed on its line"


def test_unknown_escape():
    with pytest.raises(TpucError) as info:
        check_ir_text('"a\\qb"', "m.mlir")
    assert str(info.value) == (
        "m.mlir: invalid IR: line 1:3: unknown escape sequence in a string literal"
    )


def test_undecodable_bytes():
    with pytest.raises(TpucError) as info:
        decode_ir(b'module {\n "\xff" }', "m.mlir")
    assert str(info.value) == "m.mlir: invalid IR: line 2: not UTF-8 text (byte 0xff at offset 11)"


def test_huge_integer_width_is_rejected_before_xdsl():
    """xDSL builds an iN type's bounds as N-bit Python ints: seconds and GBs
    for a mutated width (found by regression/fuzz_mlir.py)."""
    text = '%0 = "top.None"() {a = [1 : i4294967297], b = "i99999999", c = si64} : () -> ui8'
    start = time.perf_counter()
    with pytest.raises(
        TpucError,
        match=r"^m.mlir: invalid IR: line 1:29: integer type width "
        r"4294967297 exceeds 65536 bits$",
    ):
        check_ir_text(text, "m.mlir")
    assert time.perf_counter() - start < 0.1
    check_ir_text(text.replace("i4294967297", "i32"), "m.mlir")  # names and strings are not types
