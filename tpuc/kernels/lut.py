"""tpu.Lut: table lookup on stored integers.

The table holds one entry per stored value of the (quantized) input,
indexed by q − qmin; a [C, n] table holds one row per channel of axis 1.
The looked-up values are rounded to the result's float type (integer and
quantized results hold them as they are).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpuc.base.errors import TpucError
from tpuc.kernels.arrays import Array
from tpuc.kernels.element import Element
from tpuc.kernels.rounding import round_float


@dataclass(frozen=True)
class Lut:
    """`inp` must be quantized (its storage range sizes the table)."""

    inp: Element
    out: Element


def lut(p: Lut, x: Array, table: Array) -> Array:
    """table[q − qmin_in]; a [C, n] table picks row c for channel c (axis 1)."""
    if not p.inp.quantized:
        raise TpucError(f"the input must be quantized, not {p.inp.dtype}")
    needed = p.inp.qmax - p.inp.qmin + 1
    if table.ndim not in (1, 2) or table.shape[-1] < needed:
        raise TpucError(f"table shape {list(table.shape)} is not [{needed}] or [C, {needed}]")
    index = (np.asarray(x, np.float32) - np.float32(p.inp.qmin)).astype(np.intp)
    if table.ndim == 1:
        y = table[index]
    else:
        if np.ndim(x) < 2 or x.shape[1] != table.shape[0]:
            raise TpucError(
                f"{table.shape[0]} tables for input shape "
                f"{list(np.shape(x))} (one per channel on axis 1)"
            )
        channel = np.arange(table.shape[0]).reshape((1, -1) + (1,) * (np.ndim(x) - 2))
        y = table[channel, index]
    return round_float(np.asarray(y, np.float32), p.out)
