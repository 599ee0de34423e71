"""Auto-tune: refine each tensor's threshold by what it does to its readers.

KL picks a threshold from the tensor's own distribution; what matters is the
output of the ops that read it. With the weights fake-quantized once
(per-channel for convolutions, per-tensor for matmuls), every op re-runs
with one input fake-quantized at each candidate threshold — evenly spaced
from the current threshold up to the tensor's abs-max — and the candidate
is scored by the distance of the op's output from the float output,
‖ref − out‖₂ / ‖ref‖₁ averaged over the tune samples. Each reader keeps its
best candidate; a tensor read by several ops keeps the largest of their
choices (a smaller one would clip what another reader needs).

Candidate distances often nearly tie (a grid step changes the distance in
its sixth digit), so a bare argmin would follow float32 rounding: the
machine's BLAS, the thread count, onnxruntime or numpy kernels. `pick`
therefore moves a threshold only when the best distance beats the current
threshold's by more than NEAR_TIE (relative), and then takes the smallest
candidate within NEAR_TIE of the best.

The candidates run inside the float interpreter's pass (its `observe` hook),
while the op's inputs and output are alive, so tuning keeps no activations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpuc.base.numerics import fake_quant, quant_per_channel
from tpuc.dialects import top
from tpuc.dialects.traits import IndexOperands, Untuned, WeightAxes
from tpuc.interp.top_interpreter import Step, TopInterpreter, activation_name
from tpuc.interp.top_ops import KERNELS
from tpuc.workflow.calibration.collect import SampleInputs

NEAR_TIE = 1e-3
"""Distances closer than this, relative to the current threshold's, tie.
Float32 rounding (numpy against onnxruntime kernels) moves ppocr_det's
distances by 2e-7 (median of 159 (op, operand) pairs); a gain under 0.1 %
of one op's distance is not worth a table that depends on the machine.
(1e-2 would also absorb a global pool's few outputs, which move up to 1e-2,
but lowers smallcnn's INT8 cosine from 0.99996 to 0.99990.)"""


def _weight_axes(op) -> dict[int, int | None]:
    """Weight operands INT8 lowering quantizes -> the axis of their scales."""
    found = op.get_trait(WeightAxes)
    return found.axes if found is not None else {}


def _index_operands(op) -> tuple[int, ...]:
    """Operands holding indices or conditions: never fake-quantized."""
    found = op.get_trait(IndexOperands)
    return found.indices if found is not None else ()


@dataclass
class Candidate:
    """One (op, operand) pair being tuned and its candidate scores."""

    operand: int
    tensor: str
    thresholds: np.ndarray
    distance: np.ndarray  # summed over samples


class Tuner:
    """Scores candidate thresholds for every tunable (op, input) pair."""

    def __init__(
        self,
        interp: TopInterpreter,
        thresholds: Mapping[str, float],
        absmax: Mapping[str, float],
        steps: int = 10,
    ):
        self.index = {step.op: i for i, step in enumerate(interp.steps)}
        self.arena = interp.executor.arena  # where the kernels' outputs come from
        # int8 and scales, filled on first use: a float copy of every weight
        # would cost as much memory as the onnxruntime path's sessions
        self.fake_weights: dict[int, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        self.candidates: dict[int, list[Candidate]] = {}
        for i, step in enumerate(interp.steps):
            tuned = self._candidates(i, step, thresholds, absmax, steps)
            if tuned:
                self.candidates[i] = tuned

    def _candidates(self, i, step: Step, thresholds, absmax, steps) -> list[Candidate]:
        if step.leaf or step.op.has_trait(Untuned) or type(step.op) not in KERNELS:
            return []
        skip = _index_operands(step.op)
        found = []
        for j, value in enumerate(step.operands):
            name = activation_name(value)
            if j in skip or name is None or name not in thresholds:
                continue
            low, high = thresholds[name], absmax.get(name, 0.0)
            if not high > low:
                continue  # nothing above the threshold to move to
            grid = low + (high - low) * np.arange(steps + 1) / steps
            found.append(Candidate(j, name, grid, np.zeros(steps + 1)))
        return found

    @property
    def evaluations(self) -> int:
        """Op re-runs per sample."""
        return sum(len(c.thresholds) for cs in self.candidates.values() for c in cs)

    def observe(self, step: Step, args: list, results: list[np.ndarray]) -> None:
        i = self.index[step.op]
        tuned = self.candidates.get(i)
        if not tuned:
            return
        kernel = KERNELS[type(step.op)]
        base = list(args)
        if i not in self.fake_weights:
            self.fake_weights[i] = _fake_weights(step, args)
        for j, (q, scale) in self.fake_weights[i].items():
            base[j] = (q * scale).astype(np.float32)  # fake_quant_per_channel's floats
        reference = [r for r in results if r is not None]
        scale = None  # ‖ref‖₁: the same for every candidate
        for cand in tuned:
            trial = list(base)
            for k, threshold in enumerate(cand.thresholds):
                trial[cand.operand] = fake_quant(args[cand.operand], float(threshold))
                outs = _listed(kernel(step.op, trial))
                trial[cand.operand] = None  # freed before the distance's temporary
                if scale is None:
                    scale = _scale(reference, outs)
                cand.distance[k] += _distance(reference, outs, scale)
                # back to the arena now, not at the step's end: otherwise the
                # 11 candidates' outputs all stay lent (ppocr_det: +300 MB)
                del outs
                self.arena.collect()

    def thresholds(self) -> dict[str, float]:
        """Each tuned tensor's new threshold: the largest of its readers'
        picks (see `pick`)."""
        chosen: dict[str, float] = {}
        for tuned in self.candidates.values():
            for cand in tuned:
                best = float(cand.thresholds[pick(cand.distance)])
                chosen[cand.tensor] = max(chosen.get(cand.tensor, 0.0), best)
        return chosen


def pick(distance: np.ndarray, tolerance: float = NEAR_TIE) -> int:
    """The chosen candidate's index: 0 (the current threshold) unless some
    distance is lower than distance[0] by more than `tolerance` x distance[0];
    then the first (smallest threshold) within that margin of the lowest."""
    margin = tolerance * float(distance[0])
    lowest = float(distance.min())
    if not lowest < float(distance[0]) - margin:
        return 0
    return int(np.flatnonzero(distance <= lowest + margin)[0])


def _fake_weights(step: Step, args: list) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """The op's weight operands (as the interpreter passed them) quantized,
    as int8 values and scales by operand index."""
    return {
        j: quant_per_channel(args[j], axis)
        for j, axis in _weight_axes(step.op).items()
        if j < len(args) and isinstance(step.operands[j].owner, top.WeightOp)
    }


def _listed(out) -> list:
    return list(out) if isinstance(out, tuple) else [out]


def _scale(reference: list[np.ndarray], outs: list) -> float:
    """‖ref‖₁ over the outputs the kernel gives: the distance's denominator."""
    return sum(
        float(np.abs(ref).sum(dtype=np.float64))
        for ref, got in zip(reference, outs, strict=False)
        if got is not None
    )


def _distance(reference: list[np.ndarray], outs: list, scale: float) -> float:
    """‖ref − out‖₂ / ‖ref‖₁ (`scale`)."""
    num = 0.0
    for ref, got in zip(reference, outs, strict=False):
        if got is None:
            continue
        diff = (np.asarray(ref, np.float32) - np.asarray(got, np.float32)).reshape(-1)
        num += float(diff @ diff)
    return float(np.sqrt(num) / scale) if scale > 0 else float(np.sqrt(num))


def tune(
    interp: TopInterpreter,
    weights: Mapping[str, np.ndarray],
    samples: Sequence[Any],
    load: SampleInputs,
    thresholds: Mapping[str, float],
    absmax: Mapping[str, float],
    progress: Callable[[Iterable, str], Iterable],
) -> dict[str, float]:
    """Tuned thresholds for the tensors that have a better one (others are
    left out: keep their current threshold)."""
    tuner = Tuner(interp, thresholds, absmax)
    if not tuner.candidates:
        return {}
    for index in progress(samples, "auto-tune"):
        interp.run(weights, load(index), observe=tuner.observe)
    return tuner.thresholds()
