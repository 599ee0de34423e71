"""Table lookup on stored integers (tpu.Lut), without IR.

Kept in its own module so the lookup has a library record before the rest
of the data-movement family moves here: `out = table[q − qmin_in]`, one
table, or one row per channel of axis 1 for a [C, n] table, then rounded to
the result's float type (an integer or quantized result: as stored).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpuc.dtypes import ELEMENT_TYPES
from tpuc.errors import TpucError
from tpuc.kernels.arrays import Array
from tpuc.kernels.element import Element


@dataclass(frozen=True)
class Lut:
    input: Element  # quantized: its qmin is table index 0
    out: Element


def lut(p: Lut, x: Array, table: Array) -> Array:
    if not p.input.quantized:
        raise TpucError(f"the input must be quantized, not {p.input.dtype}")
    needed = p.input.qmax - p.input.qmin + 1
    if table.ndim not in (1, 2) or table.shape[-1] < needed:
        raise TpucError(f"table shape {list(table.shape)} is not [{needed}] or [C, {needed}]")
    index = (np.asarray(x, np.float32) - np.float32(p.input.qmin)).astype(np.intp)
    if table.ndim == 1:
        y = table[index]
    else:
        if np.ndim(x) < 2 or x.shape[1] != table.shape[0]:
            raise TpucError(
                f"{table.shape[0]} tables for input shape {list(np.shape(x))} "
                "(one per channel on axis 1)"
            )
        channel = np.arange(table.shape[0]).reshape((1, -1) + (1,) * (np.ndim(x) - 2))
        y = table[channel, index]
    y = np.asarray(y, np.float32)
    rounder = None if p.out.quantized else ELEMENT_TYPES[p.out.dtype].rounding
    return y if rounder is None else rounder(y)
