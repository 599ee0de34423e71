"""Rounding to a stored element type: float results to f16/bf16 (the
chip stores them so), float values to integers by a `round_mode`.

`round_float` is what every float TPU kernel ends with (an f32 result, or
an integer or quantized one, passes untouched); `round_results` applies it
to each result of a multi-result kernel by its own element.
"""

from __future__ import annotations

from collections.abc import Callable

from tpuc.base.dtypes import ELEMENT_TYPES
from tpuc.base.errors import TpucError
from tpuc.base.numerics import FLOAT_ROUNDING
from tpuc.kernels.arrays import Array
from tpuc.kernels.element import Element

Result = Array | tuple[Array, ...]


def round_float(x: Array, element: Element) -> Array:
    """float32 values rounded to the float type `element` (f32, integer and
    quantized elements: as is)."""
    rounder = ELEMENT_TYPES[element.dtype].rounding
    return x if rounder is None else rounder(x)


def half_rounder(element: Element) -> Callable[[Array], Array]:
    """The rounding of float32 values to the f16/bf16 `element` (to nearest even)."""
    rounder = ELEMENT_TYPES[element.dtype].rounding
    if rounder is None:
        raise TpucError(f"{element.dtype} is not a half float type")
    return rounder


def round_results(elements: tuple[Element, ...], result: Result) -> Result:
    """Each result rounded to its own element (a single array: the first)."""
    if isinstance(result, tuple):
        return tuple(round_float(r, e) for r, e in zip(result, elements, strict=True))
    return round_float(result, elements[0])


def float_rounding(mode: str) -> Callable[[Array], Array]:
    """`round_mode` -> the rounding of float values to integers (float dtype
    kept); a TpucError for an unknown mode."""
    fn = FLOAT_ROUNDING.get(mode)
    if fn is None:
        raise TpucError(f"unknown round_mode {mode!r} (known: {', '.join(FLOAT_ROUNDING)})")
    return fn
