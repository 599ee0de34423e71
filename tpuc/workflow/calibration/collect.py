"""Streaming activation statistics over the calibration samples.

Pass one runs every sample and keeps, per tensor, the running min/max (and
the moments ACIQ needs); pass two runs them again and fills the histogram
of |x| over the final range. Each tensor is folded into its statistics the
moment the interpreter produces it (through the interpreter's `observe`
hook), so memory does not grow with the number of samples: only the
statistics (a 2048-bucket histogram per tensor) stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from tpuc.base.errors import TpucError
from tpuc.interp.top_interpreter import Step, TopInterpreter
from tpuc.workflow.calibration.stats import TensorStats

Warn = Callable[[str], None]
SampleInputs = Callable[[Any], dict[str, np.ndarray]]
"""Loads one sample (whatever `samples` holds) as input tensors by name."""


class StatsCollector:
    """Folds tensors into `TensorStats`, one pass at a time."""

    def __init__(self, names: Sequence[str], bins: int, moments: bool):
        self.bins = bins
        self.moments = moments
        self.stats: dict[str, TensorStats] = {name: TensorStats(name) for name in names}

    # pass one: range and moments
    def observe_range(self, step: Step, args: list, results: list[np.ndarray]) -> None:
        for name, array in zip(step.names, results, strict=True):
            stats = self.stats.get(name)
            if stats is not None and array is not None:
                self._fold_range(stats, array)

    def _fold_range(self, stats: TensorStats, array: np.ndarray) -> None:
        if array.size == 0:
            return
        low, high = float(array.min()), float(array.max())
        if not (np.isfinite(low) and np.isfinite(high)):  # NaN propagates through min/max
            array = finite_part(stats, array)
            if array.size == 0:
                return
            low, high = float(array.min()), float(array.max())
        stats.min = min(stats.min, low)
        stats.max = max(stats.max, high)
        stats.count += array.size
        if self.moments:
            flat = array.reshape(-1).astype(np.float64)
            stats.total += float(flat.sum())
            stats.total_sq += float(flat @ flat)

    # pass two: histogram of |x| over the final range
    def start_histograms(self) -> None:
        for stats in self.stats.values():
            stats.hist = np.zeros(self.bins, np.int64)
            stats.width = stats.absmax / (self.bins - 1) if stats.absmax > 0 else 0.0
            stats.zeros = 0

    def observe_histogram(self, step: Step, args: list, results: list[np.ndarray]) -> None:
        for name, array in zip(step.names, results, strict=True):
            stats = self.stats.get(name)
            if stats is not None and array is not None and stats.count:
                self._fold_histogram(stats, array)

    def _fold_histogram(self, stats: TensorStats, array: np.ndarray) -> None:
        if stats.nonfinite:
            array = array[np.isfinite(array)]
        flat = array.reshape(-1)
        zeros = flat.size - int(np.count_nonzero(flat))
        stats.zeros += zeros
        if self.moments:
            stats.total_abs_dev += float(np.abs(flat.astype(np.float64) - stats.mean).sum())
        if stats.width == 0.0 or zeros == flat.size:
            return
        stats.hist += bucket_counts(flat, stats.width, self.bins)
        stats.hist[0] -= zeros


def finite_part(stats: TensorStats, array: np.ndarray) -> np.ndarray:
    """The finite values of `array`, counting the others on `stats`."""
    keep = np.isfinite(array)
    stats.nonfinite += int(array.size - np.count_nonzero(keep))
    return array[keep]


def bucket_counts(flat: np.ndarray, width: float, bins: int) -> np.ndarray:
    """TPU-MLIR's buckets of |x|: floor(|x| / width + 0.5), zeros included
    (in bucket 0); computed in float32 like the original."""
    scaled = np.abs(flat, dtype=np.float32)
    scaled *= np.float32(1.0 / width)
    scaled += np.float32(0.5)
    index = scaled.astype(np.int32)  # truncation is floor for x >= 0
    np.minimum(index, bins - 1, out=index)
    return np.bincount(index, minlength=bins)


def tensor_order(interp: TopInterpreter) -> list[str]:
    """Every tensor calibration covers, in network order: inputs and every
    op result; weights and None values have no table entry."""
    from tpuc.dialects import top

    names: list[str] = []
    for step in interp.steps:
        if not isinstance(step.op, top.WeightOp | top.NoneOp):
            names.extend(step.names)
    return list(dict.fromkeys(names))


def collect(
    interp: TopInterpreter,
    weights,
    samples: Sequence[Any],
    load: SampleInputs,
    *,
    bins: int,
    histogram: bool,
    moments: bool,
    progress: Callable[[Iterable, str], Iterable],
    warn: Warn,
) -> dict[str, TensorStats]:
    """Statistics of every tensor over `samples` (each loaded by `load`)."""
    collector = StatsCollector(tensor_order(interp), bins, moments)
    for index in progress(samples, "statistics"):
        interp.run(weights, load(index), observe=collector.observe_range, operands=False)
    check_finite(collector.stats.values(), len(samples))
    if histogram or moments:
        collector.start_histograms()
        for index in progress(samples, "histograms"):
            interp.run(weights, load(index), observe=collector.observe_histogram, operands=False)
    for stats in collector.stats.values():
        report_odd(stats, len(samples), warn)
    return collector.stats


def check_finite(all_stats: Iterable[TensorStats], samples: int) -> None:
    """Tensors without a single finite value make the table meaningless (a
    ±1e-5 range quantizes every real value to the rails): refuse, naming them."""
    dead = [s.name for s in all_stats if s.count == 0 and s.nonfinite]
    if not dead:
        return
    names = ", ".join(dead[:3]) + (", …" if len(dead) > 3 else "")
    raise TpucError(
        f"{len(dead)} tensor(s) have no finite value over {samples} sample(s) ({names}): "
        "no usable table; check the calibration data for NaN/Inf"
    )


def report_odd(stats: TensorStats, samples: int, warn: Warn) -> None:
    """Warn about tensors whose statistics cannot be trusted as they are."""
    if stats.nonfinite:
        warn(
            f"tensor '{stats.name}' has {stats.nonfinite} NaN/Inf values over {samples} "
            "sample(s); they are left out of its statistics"
        )
    if stats.count == 0:
        warn(f"tensor '{stats.name}' has no finite values; its range is set to ±1e-5")
    elif stats.absmax == 0:
        warn(
            f"tensor '{stats.name}' is all zeros over {samples} sample(s); its range is set to "
            "±1e-5 (check the calibration data)"
        )
