"""The calibration techniques of run_calibration.py (--sq --we --bc
--adaround --search) run in one plan, measured before and after.

Order, as TPU-MLIR: SmoothQuant, softmax correction, weight equalization
(all three keep the float function), then bias correction and learned rounding (both change the
weights toward what INT8 can hold), then calibration of the changed module,
then the search. Each step says what it touched; the plan's similarity is
the FP32 vs INT8 output cosine against the float outputs of the module as
it was given, measured once with the plain table of that module and once
with the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tpuc.base.cali_table import CaliEntry
from tpuc.base.registry import Registry
from tpuc.workflow.calibration.calibrate import Calibration
from tpuc.workflow.calibration.similarity import Similarity

Progress = Callable[[Iterable, str], Iterable]
Say = Callable[[str], None]
Technique = Callable[[Calibration, Sequence[Any], Progress, Mapping[str, float]], list[str]]
"""(calibration, samples, progress, current thresholds) -> what it did."""

TECHNIQUES: Registry[str, Technique] = Registry("calibration techniques")
ORDER = ("sq", "smc", "we", "bc", "adaround")
MEASURES_INT8 = ("bc",)
"""Techniques that read the thresholds: calibration runs again before them
when an earlier one changed the weights (as TPU-MLIR: --we, calibrate, --bc)."""
MAX_LISTED = 6


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    return shown + (f", … ({len(names)} in all)" if len(names) > MAX_LISTED else "")


def technique(name: str):
    def wrap(fn: Technique) -> Technique:
        TECHNIQUES.add(name, fn)
        return fn

    return wrap


@technique("sq")
def _smoothquant(cal: Calibration, samples, progress, thresholds) -> list[str]:
    from tpuc.workflow.calibration.smoothquant import smooth

    sites = smooth(cal.interp, cal.weights, samples, cal.load, progress)
    lines = [f"SmoothQuant: {len(sites)} LayerNorm -> MatMul site(s)"]
    lines += [f"  {s.name} (alpha {s.alpha:.2f}) -> {', '.join(r.name for r in s.readers)}"
              for s in sites]  # fmt: skip
    return lines


@technique("smc")
def _softmax_correction(cal: Calibration, samples, progress, thresholds) -> list[str]:
    from tpuc.workflow.calibration.softmax_correction import correct_softmaxes

    sites = correct_softmaxes(cal.interp, cal.weights, samples, cal.load, progress)
    lines = [f"softmax correction: {len(sites)} Softmax -> MatMul site(s)"]
    for site in sites[:MAX_LISTED]:
        scale = site.scale.ravel()
        lines.append(f"  {site.name} -> {site.matmul.names[0]}: mean row max per head "
                     f"{scale.min():.4g}..{scale.max():.4g}")  # fmt: skip
    if len(sites) > MAX_LISTED:
        lines.append(f"  … ({len(sites)} in all)")
    return lines


@technique("we")
def _equalize(cal: Calibration, samples, progress, thresholds) -> list[str]:
    from tpuc.workflow.calibration.equalize import equalize

    pairs = equalize((s.op for s in cal.interp.steps), cal.weights)
    return [f"weight equalization: {len(pairs)} layer pair(s): {_listed([p.label for p in pairs])}"]


@technique("bc")
def _bias_correction(cal: Calibration, samples, progress, thresholds) -> list[str]:
    import numpy as np

    from tpuc.workflow.calibration.bias_correction import correct_biases

    done = correct_biases(cal.interp, cal.weights, samples, cal.load, progress, thresholds)
    if not done:
        return ["bias correction: no layer"]
    worst = max(done, key=lambda c: float(np.abs(c.mean_error).max()))
    return [f"bias correction: {len(done)} layer(s) ({_listed([c.layer.name for c in done])}); "
            f"largest mean error removed {float(np.abs(worst.mean_error).max()):.4g} "
            f"({worst.layer.name})"]  # fmt: skip


@technique("adaround")
def _adaround(cal: Calibration, samples, progress, thresholds) -> list[str]:
    from tpuc.workflow.calibration.adaround import learn_rounding

    report = learn_rounding(cal.interp, cal.weights, samples, cal.load, progress)
    better = [(n, b, a) for n, b, a in report if a < b]
    total_b = sum(b for _, b, _ in report) or 1.0
    total_a = sum(min(a, b) for _, b, a in report)
    return [f"learned rounding: {len(better)} of {len(report)} layer(s) re-rounded; "
            f"summed output error {total_a / total_b:.3f}x of nearest rounding"]  # fmt: skip


@dataclass
class Plan:
    """What run_calibration.py was asked to do beyond plain calibration."""

    techniques: tuple[str, ...]
    search: str | None
    chip: str
    method: str
    bins: int
    inference_num: int
    expected_cos: float = 0.99
    min_layer_cos: float = 0.99
    fp_type: str = "auto"
    bc_num: int = 30  # samples --bc and --adaround read


@dataclass
class Outcome:
    entries: dict[str, CaliEntry]
    weights_changed: bool
    before: float
    after: float
    qtable: dict[str, str] | None = None
    lines: list[str] = field(default_factory=list)
    lossy: dict[str, float] = field(default_factory=dict)
    """The final table's tensors INT8 cannot hold (its `# int8_lossy` lines)."""


def run_plan(cal: Calibration, samples, tune_samples, plan: Plan, progress: Progress,
             say: Say) -> Outcome:  # fmt: skip
    """Run the plan on `cal` (whose module and weights it changes)."""
    inputs = [cal.load(s) for s in samples[: plan.inference_num or len(samples)]]
    meter = Similarity.of_float(cal.module, cal.interp, cal.weights, inputs, plan.chip)
    try:
        entries = cal.run(samples, tune_samples, plan.method, plan.bins, progress)
        before = meter.cosine(cal.module, cal.weights, entries)
        say(f"FP32 vs INT8 output cosine before: {before:.6f} ({len(inputs)} samples, {plan.chip})")
        changed = stale = False
        for name in (n for n in ORDER if n in plan.techniques):
            if stale and name in MEASURES_INT8:
                entries = cal.run(samples, tune_samples, plan.method, plan.bins, progress)
            used = samples if name in ("sq", "smc", "we") else samples[: plan.bc_num]
            thresholds = {n: e.threshold for n, e in entries.items()}
            for line in TECHNIQUES[name](cal, used, progress, thresholds):
                say(line)
            cal.rebuild()  # a technique may have added a bias weight
            changed = stale = True
        if changed:
            entries = cal.run(samples, tune_samples, plan.method, plan.bins, progress)
        lossy = cal.lossy
        if plan.search == "search_threshold":
            entries, lossy = _search_thresholds(cal, samples, tune_samples, plan, meter, progress,
                                                say)  # fmt: skip
        after = meter.cosine(cal.module, cal.weights, entries)
        say(f"FP32 vs INT8 output cosine after: {after:.6f} (before {before:.6f})")
        outcome = Outcome(entries, changed, before, after, lossy=dict(lossy))
        if plan.search in ("search_qtable", "fast_search", "mix_search"):
            outcome.qtable = _search_qtable(cal, entries, inputs, plan, meter, progress, say)
        return outcome
    finally:
        meter.close()


def _search_thresholds(cal, samples, tune_samples, plan, meter, progress, say) -> tuple:
    """The searched table and its lossy tensors, measured on the search's statistics."""
    from tpuc.workflow.calibration.collect import collect
    from tpuc.workflow.calibration.int8_error import lossy_tensors
    from tpuc.workflow.calibration.search import ThresholdSearch, method_thresholds
    from tpuc.workflow.calibration.thresholds import threshold
    from tpuc.workflow.calibration.tune import tune

    stats = collect(cal.interp, cal.weights, samples, cal.load, bins=plan.bins, histogram=True,
                    moments=True, progress=progress, warn=cal.warn)  # fmt: skip
    tuned = None
    if tune_samples:
        kl = {name: threshold("kl", s) for name, s in stats.items()}
        absmax = {name: s.absmax for name, s in stats.items()}
        tuned = tune(cal.interp, cal.weights, tune_samples, cal.load, kl, absmax, progress)
    search = ThresholdSearch(stats, cal.interp.steps, method_thresholds(stats, tuned))
    table = search.run(lambda e: meter.cosine(cal.module, cal.weights, e), progress)
    scores = ", ".join(f"{m} {c:.6f}" for m, c in search.method_cos.items())
    say(f"search_threshold: whole-table cosines: {scores}; best {search.best_method}")
    for name, old, new, cos in search.changes:
        say(f"  {name}: threshold {old:.6g} -> {new:.6g} (cosine {cos:.6f})")
    say(f"search_threshold: {len(search.changes)} tensor(s) moved, {meter.evaluations} INT8 runs")
    return table, lossy_tensors(stats, table, cal.interp.steps)


def _search_qtable(cal, entries, inputs, plan, meter, progress, say) -> dict[str, str]:
    from tpuc.target.chips import get_chip
    from tpuc.workflow.mixed_precision import MixedPrecisionSearch, best_float_mode

    chip = get_chip(plan.chip)
    mode = best_float_mode(chip) if plan.fp_type == "auto" else plan.fp_type
    chip.check_mode(mode)
    table = meter.table_file(entries, "searched_table")
    search = MixedPrecisionSearch(cal.module, cal.weights, table, chip, inputs,
                                  top_interp=cal.interp)  # fmt: skip
    try:
        if plan.search == "search_qtable":
            layers = search.layers()
        else:
            layers = search.candidates(plan.min_layer_cos)
        say(
            f"{plan.search}: {len(layers)} candidate layer(s), "
            f"all-INT8 cosine {search.base_cos:.6f}"
        )
        losses = search.layer_losses(layers, mode, progress)
        chosen, cos = search.select(losses, mode, plan.expected_cos)
    finally:
        search.close()
    say(f"{plan.search}: {len(chosen)} layer(s) in {mode} ({_listed(list(chosen))}); "
        f"predicted output cosine {cos:.6f}")  # fmt: skip
    return chosen
