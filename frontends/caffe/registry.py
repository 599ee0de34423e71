"""The table of Caffe layer converters, keyed by layer type string.

Family modules fill it with `@converter("Convolution")`; the driver looks
layers up here, so adding a layer type is one decorated function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tpuc.base.registry import Registry

if TYPE_CHECKING:
    from tpuc.frontends.caffe.converter import CaffeConverter
    from tpuc.frontends.caffe.model import Layer

ConverterFn = Callable[["CaffeConverter", "Layer"], None]

CONVERTERS: Registry[str, ConverterFn] = Registry("Caffe converters")

IDENTITY = {"Dropout", "Split"}
"""Layers whose tops are their bottom at inference (no op is emitted)."""


def converter(*types: str, priority: int = 0) -> Callable[[ConverterFn], ConverterFn]:
    """Register `fn` as the converter of each Caffe layer type given."""
    return CONVERTERS.register(*types, priority=priority)


def load_converters() -> Registry[str, ConverterFn]:
    """Import every family module once so that the table is complete."""
    from tpuc.frontends.caffe import layers_nn, layers_shape  # noqa: F401

    return CONVERTERS
