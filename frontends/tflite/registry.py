"""The tables of TFLite operators, keyed by builtin op name (`CONV_2D`,
...) or `CUSTOM:<custom_code>` for a custom op tpuc knows: the converters
(an op -> TOP ops) and the folders (an op whose inputs are known at
conversion time -> its constant outputs, folding.py).

Each family module fills a table with `@converter("CONV_2D")` or
`@folder("SHAPE")`; the driver looks operators up here, so adding an op is
one decorated function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tpuc.base.registry import Registry

if TYPE_CHECKING:
    from tpuc.frontends.tflite.converter import TfliteConverter
    from tpuc.frontends.tflite.folding import FoldArgs, Folder
    from tpuc.frontends.tflite.model import TOperator

ConverterFn = Callable[["TfliteConverter", "TOperator"], None]

CONVERTERS: Registry[str, ConverterFn] = Registry("TFLite converters")
FOLDERS: Registry[str, Folder] = Registry("TFLite constant folders")


def converter(*ops: str, priority: int = 0) -> Callable[[ConverterFn], ConverterFn]:
    """Register `fn` as the converter of each TFLite op given."""
    return CONVERTERS.register(*ops, priority=priority)


def load_converters() -> Registry[str, ConverterFn]:
    """Import every family module once so that the table is complete."""
    from tpuc.frontends.tflite import elementwise, nn, shape_ops  # noqa: F401

    return CONVERTERS


def load_folders() -> Registry[str, Folder]:
    """Import the fold functions once so that the table is complete."""
    from tpuc.frontends.tflite import fold_ops  # noqa: F401

    return FOLDERS


def folder(
    *ops: str, shape_only: bool = False, priority: int = 0
) -> Callable[[Callable[[FoldArgs], list]], Callable[[FoldArgs], list]]:
    """Register `fn` as the constant folder of each TFLite op given;
    `shape_only`: it reads its first input's shape, not its value."""
    from tpuc.frontends.tflite.folding import Folder

    def decorate(fn):
        for op in ops:
            FOLDERS.add(op, Folder(fn, shape_only), priority)
        return fn

    return decorate
