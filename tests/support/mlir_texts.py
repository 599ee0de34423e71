"""Small TOP modules as text, and broken variants of them, for the loader tests."""

# ruff: noqa: E501  (IR lines are as long as MLIR prints them)

from __future__ import annotations

GOOD = """builtin.module attributes {module.name = "m", module.state = "TOP_F32"} {
  func.func @main(%0: tensor<1x4xf32>) -> tensor<1x4xf32> {
    %1 = "top.Input"(%0) {name = "x"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %2 = "top.Relu"(%1) {name = "r"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %3 = "top.Relu"(%2) {name = "s"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    func.return %3 : tensor<1x4xf32>
  }
}
"""

# the closing quote of "r" deleted: xDSL 0.74's lexer backtracks exponentially on it
UNCLOSED = GOOD.replace('{name = "r"}', '{name = "r} ' + "a" * 40)

# "s" consumes %2 before the op that defines it
USE_BEFORE_DEF = GOOD.replace(
    '    %2 = "top.Relu"(%1) {name = "r"} : (tensor<1x4xf32>) -> tensor<1x4xf32>\n', ""
).replace(
    "    func.return",
    '    %2 = "top.Relu"(%1) {name = "r"} : (tensor<1x4xf32>) -> tensor<1x4xf32>\n    func.return',
)

UNDEFINED = GOOD.replace('"top.Relu"(%2)', '"top.Relu"(%9)')

NOT_UTF8 = GOOD.encode().replace(b'"s"', b'"\xffs"')

MESSAGES = {
    "unclosed": "invalid IR: line 4:33: string literal not closed on its line",
    "use_before_def": "invalid IR: operand 0 of top.Relu 's' is used before its definition "
    "(a result of top.Relu 'r')",
    "undefined": "invalid IR: line 9:1: values used but not defined: [%9]",
    "not_utf8": "invalid IR: line 5: not UTF-8 text (byte 0xff at offset 320)",
}


def broken_files(folder) -> dict[str, object]:
    """Each broken module written to `folder`, keyed like MESSAGES."""
    paths = {}
    for key, content in {
        "unclosed": UNCLOSED,
        "use_before_def": USE_BEFORE_DEF,
        "undefined": UNDEFINED,
        "not_utf8": NOT_UTF8,
    }.items():
        path = folder / f"{key}.mlir"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        paths[key] = path
    return paths


CONV = """builtin.module attributes {module.name = "c", module.state = "TOP_F32", module.weight_file = "c_weight.npz"} {
  func.func @main(%0: tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32> {
    %1 = "top.Input"(%0) {name = "x"} : (tensor<1x16x8x8xf32>) -> tensor<1x16x8x8xf32>
    %2 = "top.Weight"() {name = "w"} : () -> tensor<16x16x3x3xf32>
    %3 = "top.None"() : () -> none
    %4 = "top.Conv"(%1, %2, %3) {name = "conv", kernel_shape = [3, 3], pads = [1, 1, 1, 1]} : (tensor<1x16x8x8xf32>, tensor<16x16x3x3xf32>, none) -> tensor<1x16x8x8xf32>
    func.return %4 : tensor<1x16x8x8xf32>
  }
}
"""
"""A conv whose filter lives in c_weight.npz (write it next to the text)."""
