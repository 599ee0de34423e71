"""`run_calibration.py --search`: choose thresholds, or float layers, by the
measured FP32 vs INT8 output cosine instead of by a rule.

- search_threshold: as TPU-MLIR, score the whole table of each threshold
  method (kl tuned, kl, max, percentile9999, mse) and keep the best; then,
  going further than TPU-MLIR, revisit in network order each tensor whose
  candidates differ by more than 1.5x and keep another method's threshold
  for it wherever that raises the output cosine.
- search_qtable: every INT8 layer is a candidate for float; each is scored
  by the network's loss with only it in float, and layers are added in
  order of gain until --expected_cos (run_qtable.py's search,
  tpuc/workflow/mixed_precision.py).
- fast_search / mix_search: the same with only the layers whose own INT8
  cosine is below --min_layer_cos as candidates (what run_qtable.py does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tpuc.base.cali_table import CaliEntry
from tpuc.workflow.calibration.calibrate import entry_of
from tpuc.workflow.calibration.rules import apply_rules
from tpuc.workflow.calibration.stats import TensorStats
from tpuc.workflow.calibration.thresholds import threshold

MODES = ("search_threshold", "search_qtable", "fast_search", "mix_search")
THRESHOLD_METHODS = ("kl", "max", "percentile9999", "mse")
"""TPU-MLIR's search_threshold candidates (kl tuned goes first when tuning runs)."""
MIN_GAIN = 1e-6  # a change must raise the cosine by more than this
MIN_MOVE = 0.01  # candidates within 1% of the current threshold are not tried
MIN_SPREAD = 1.5
"""Tensors revisited one by one: those whose candidates span more than this
ratio (where the method matters: long tails, outliers). Elsewhere each
candidate rounds alike and a network run per candidate would buy nothing."""

Thresholds = dict[str, float]
Score = Callable[[Mapping[str, CaliEntry]], float]


@dataclass
class ThresholdSearch:
    """Candidate thresholds per tensor and what the search chose."""

    stats: Mapping[str, TensorStats]
    steps: Sequence
    candidates: dict[str, Thresholds]  # method -> tensor -> threshold
    method_cos: dict[str, float] = field(default_factory=dict)
    changes: list[tuple[str, float, float, float]] = field(default_factory=list)
    best_method: str = ""
    cos: float = 0.0

    def entries(self, thresholds: Mapping[str, float]) -> dict[str, CaliEntry]:
        """The table for raw thresholds, with the range rules applied."""
        raw = {name: entry_of(self.stats[name], thresholds[name]) for name in self.stats}
        return apply_rules(self.steps, raw)

    def run(self, score: Score, progress: Callable[[Iterable, str], Iterable]) -> dict:
        """The chosen table (entries)."""
        for method, thresholds in progress(list(self.candidates.items()), "methods"):
            self.method_cos[method] = score(self.entries(thresholds))
        self.best_method = max(self.method_cos, key=lambda m: (self.method_cos[m], -_at(self, m)))
        current = dict(self.candidates[self.best_method])
        self.cos = self.method_cos[self.best_method]
        table = self.entries(current)
        for name in progress(list(self.stats), "tensors"):
            for value in self._alternatives(name, current[name]):
                trial = {**current, name: value}
                trial_table = self.entries(trial)
                if trial_table == table:
                    continue  # a rule overrides this tensor's threshold
                cos = score(trial_table)
                if cos > self.cos + MIN_GAIN:
                    self.changes.append((name, current[name], value, cos))
                    current, table, self.cos = trial, trial_table, cos
        return table

    def _alternatives(self, name: str, now: float) -> list[float]:
        values = sorted({c[name] for c in self.candidates.values()})
        if values[-1] <= MIN_SPREAD * values[0]:
            return []
        return [v for v in values if abs(v - now) > MIN_MOVE * max(abs(now), 1e-12)]


def _at(search: ThresholdSearch, method: str) -> int:
    return list(search.candidates).index(method)


def method_thresholds(
    stats: Mapping[str, TensorStats], tuned: Mapping[str, float] | None
) -> dict[str, Thresholds]:
    """Each candidate method's thresholds (kl_tune first when given)."""
    found: dict[str, Thresholds] = {}
    kl = {name: threshold("kl", s) for name, s in stats.items()}
    if tuned:
        found["kl_tune"] = {**kl, **tuned}
    for method in THRESHOLD_METHODS:
        if method == "kl":
            found[method] = kl
        else:
            found[method] = {name: threshold(method, s) for name, s in stats.items()}
    return found
