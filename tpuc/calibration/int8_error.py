"""How much each tensor loses in INT8, measured on the calibration data.

A threshold that suits most of a tensor can ruin the rest of it: YOLOv8
concatenates box coordinates (0–316) with class scores (0–0.83) into one
output, and kl gives it 20.35, so every box is clipped at 20 px. Such
tensors are found here by what they lose, not by what op made them: from
each tensor's histogram of |x| (the one kl reads) and its final threshold,
the signal-to-quantization-noise ratio (SQNR) of its INT8 form — values
beyond the threshold lose what is clipped, values within it the rounding
noise of one step (step²/12, or the value itself when it rounds to 0).
Tensors below `MIN_SQNR_DB` are listed in the table, and model_deploy.py
keeps them in a float mode (tpuc/auto_mix.py).
"""

from __future__ import annotations

import math

import numpy as np

from tpuc.cali_table import CaliEntry
from tpuc.calibration.stats import TensorStats

MIN_SQNR_DB = 15.0
"""Below this a tensor's INT8 form is mostly error (a clean INT8 tensor
measures 25–40 dB; YOLOv8n's clipped box/score concat 0–3 dB)."""

MASK_SPAN = 1024.0
"""Values this far beyond the threshold are attention masks, not real
values (kept exact by the mask rules): their tensors are not measured."""


def int8_sqnr_db(stats: TensorStats, entry: CaliEntry) -> float | None:
    """The tensor's SQNR in INT8 with `entry`'s threshold; None when it has
    no histogram (a method without one, or an all-zero tensor) or holds
    mask values."""
    if stats.hist is None or stats.width <= 0 or not stats.hist.any():
        return None
    threshold = entry.threshold
    if stats.absmax >= MASK_SPAN * threshold:
        return None
    levels = 255 if entry.min >= 0 else 127
    step = threshold / levels
    centers = np.arange(stats.hist.size, dtype=np.float64) * stats.width
    counts = stats.hist.astype(np.float64)
    rounding = np.minimum(centers**2, step * step / 12.0)
    clipped = np.maximum(centers - threshold, 0.0) ** 2
    noise = float(counts @ np.where(centers > threshold, clipped, rounding))
    signal = float(counts @ centers**2)
    if noise <= 0.0 or signal <= 0.0:
        return None
    return 10.0 * math.log10(signal / noise)


def lossy_tensors(
    stats: dict[str, TensorStats], entries: dict[str, CaliEntry], min_db: float = MIN_SQNR_DB
) -> dict[str, float]:
    """Tensor name -> SQNR (dB) of the tensors below `min_db`, in network order."""
    lossy = {}
    for name, entry in entries.items():
        measured = stats.get(name)
        sqnr = int8_sqnr_db(measured, entry) if measured is not None else None
        if sqnr is not None and sqnr < min_db:
            lossy[name] = round(sqnr, 2)
    return lossy
