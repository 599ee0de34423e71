"""How much each tensor loses in INT8, measured on the calibration data.

A threshold that suits most of a tensor can ruin the rest of it: YOLOv8
concatenates box coordinates (0–316) with class scores (0–0.83) into one
output, and kl gives it 20.35, so every box is clipped at 20 px. Such
tensors are found here by what they lose, not by what op made them: from
each tensor's histogram of |x| (the one kl reads) and its final threshold,
the signal-to-quantization-noise ratio (SQNR) of its INT8 form — values
beyond the threshold lose what is clipped, values within it the rounding
noise of one step (step²/12, or the value itself when it rounds to 0). A
Concat also measures each input at its own threshold: a threshold that
keeps the boxes (318.9) rounds the scores to 0.
Tensors below `MIN_SQNR_DB` are listed in the table, and model_deploy.py
keeps them in a float mode (tpuc/workflow/auto_mix.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from tpuc.base.cali_table import CaliEntry
from tpuc.interp.top_interpreter import Step
from tpuc.workflow.calibration.stats import TensorStats

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


def concat_parts(steps: Iterable[Step]) -> dict[str, list[str]]:
    """Concat output -> its activation inputs: each part is measured on its
    own at the output's threshold, since the largest part hides the others
    from the whole tensor's SQNR (YOLOv8's boxes at 318.9 leave its 0–0.83
    scores 0 steps and the output still measures 40 dB)."""
    from tpuc.dialects import top
    from tpuc.interp.top_interpreter import activation_name

    parts = {}
    for step in steps:
        if isinstance(step.op, top.ConcatOp):
            names = [activation_name(v) for v in step.operands]
            parts[step.names[0]] = [n for n in names if n is not None]
    return parts


def lossy_tensors(
    stats: dict[str, TensorStats],
    entries: dict[str, CaliEntry],
    steps: Iterable[Step] = (),
    min_db: float = MIN_SQNR_DB,
) -> dict[str, float]:
    """Tensor name -> SQNR (dB) of the tensors below `min_db`, in network
    order; a Concat's is its worst part's."""
    parts = concat_parts(steps)
    lossy = {}
    for name, entry in entries.items():
        measured = [stats.get(n) for n in [name, *parts.get(name, [])]]
        found = [int8_sqnr_db(m, entry) for m in measured if m is not None]
        found = [db for db in found if db is not None]
        if found and min(found) < min_db:
            lossy[name] = round(min(found), 2)
    return lossy
