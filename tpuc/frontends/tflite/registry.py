"""The table of TFLite operator converters, keyed by builtin op name
(`CONV_2D`, ...) or `CUSTOM:<custom_code>` for a custom op tpuc knows.

Each family module fills the table with `@converter("CONV_2D")`; the driver
looks operators up here, so adding an op is one decorated function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tpuc.registry import Registry

if TYPE_CHECKING:
    from tpuc.frontends.tflite.converter import TfliteConverter
    from tpuc.frontends.tflite.model import TOperator

ConverterFn = Callable[["TfliteConverter", "TOperator"], None]

CONVERTERS: Registry[str, ConverterFn] = Registry("TFLite converters")


def converter(*ops: str, priority: int = 0) -> Callable[[ConverterFn], ConverterFn]:
    """Register `fn` as the converter of each TFLite op given."""
    return CONVERTERS.register(*ops, priority=priority)


def load_converters() -> Registry[str, ConverterFn]:
    """Import every family module once so that the table is complete."""
    from tpuc.frontends.tflite import elementwise, nn, shape_ops  # noqa: F401

    return CONVERTERS
