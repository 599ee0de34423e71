"""Range rules per op kind, applied after thresholds are chosen.

What measurement alone gets wrong, TPU-MLIR fixes by the op's semantics:
ops that only move values (reshape, permute, max-pool, slice …) take
their input's range, so INT8 lowering needs no requant there; Sigmoid,
HardSigmoid and Softmax outputs lie in [0, 1] (that bound is their
threshold when the samples come near it, else their measured maximum);
an attention mask added to scores leaves the scores' range;
ReLU outputs (a Relu op or any op with `do_relu`) never go below zero.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tpuc.base.cali_table import CaliEntry
from tpuc.base.registry import Registry
from tpuc.dialects import top
from tpuc.dialects.base import TensorOp
from tpuc.interp.top_interpreter import Step, activation_name

Entries = dict[str, CaliEntry]
Rule = Callable[[Step, Entries], None]

RULES: Registry[type, Rule] = Registry("calibration rules")

PASS_THROUGH = (*top.VALUE_MOVES, top.MaxPoolOp)
"""Ops whose every output value is one of their input's values."""

UNIT_RANGE = (top.SigmoidOp, top.HardSigmoidOp, top.SoftmaxOp)


def rule(*op_types: type, priority: int = 0) -> Callable[[Rule], Rule]:
    """Register `fn` as the table rule of each op class."""
    return RULES.register(*op_types, priority=priority)


@rule(*PASS_THROUGH)
def _keep_input_range(step: Step, entries: Entries) -> None:
    source = activation_name(step.operands[0])
    if source is None or source not in entries:
        return
    for name in step.names:
        if name in entries:
            entries[name] = entries[source]


NEAR_BOUND = 0.25
"""A bounded output whose measured maximum reaches this share of its bound
takes the bound as threshold (headroom for inputs beyond the samples); far
below it, the bound would waste resolution (PP-PicoDet's class scores peak
at 0.12: 1.0 leaves them 30 of 255 steps). Measured on ppocr_cls: its SE
gate (HardSigmoid, max 0.35) loses output cosine with its measured max or
twice it as threshold, not with 1.0."""


@rule(*UNIT_RANGE)
def _unit_range(step: Step, entries: Entries) -> None:
    """[0, 1] where the samples come near 1, else the measured maximum (an
    activation that never clips its largest, most telling values)."""
    for name in step.names:
        entry = entries.get(name)
        if entry is None:
            continue
        high = min(max(entry.max, 0.0), 1.0)
        if high >= NEAR_BOUND or high <= 0.0:
            entries[name] = CaliEntry(1.0, 0.0, 1.0)
        else:
            entries[name] = CaliEntry(high, 0.0, high)


MASK_SPAN = 1024.0
"""An Add operand this many times wider than the other, and never positive,
is an attention mask (see `_mask_add`)."""


@rule(top.AddOp)
def _mask_add(step: Step, entries: Entries) -> None:
    """scores + mask, the mask 0 or hugely negative (-3.4e38, -10000): the
    output's range is the scores' (the masked values are not real values;
    they saturate any INT8 scale, and the Add itself runs in float, see
    lowering's `within_int8_span`)."""
    names = [activation_name(v) for v in step.operands]
    if len(names) != 2 or not all(n in entries for n in names):
        if _fuses_relu(step):
            _non_negative(step, entries)
        return
    first, second = (entries[n] for n in names)
    for mask, scores in ((first, second), (second, first)):
        if mask.max <= 0.0 and -mask.min >= MASK_SPAN * max(abs(scores.min), abs(scores.max)):
            for name in step.names:
                if name in entries:
                    entries[name] = scores
            return
    if _fuses_relu(step):
        _non_negative(step, entries)


@rule(top.ReluOp)
def _non_negative(step: Step, entries: Entries) -> None:
    for name in step.names:
        entry = entries.get(name)
        if entry is None:
            continue
        high = max(entry.max, 0.0)
        threshold = min(entry.threshold, high) if high > 0 else entry.threshold
        entries[name] = CaliEntry(threshold, 0.0, high)


def apply_rules(steps: Iterable[Step], entries: Entries) -> Entries:
    """Entries with the op rules applied, in network order (so a chain of
    reshapes carries its first input's range all the way)."""
    result = dict(entries)
    for step in steps:
        fn = RULES.get(type(step.op))
        if fn is not None:
            fn(step, result)
        elif _fuses_relu(step):
            _non_negative(step, result)
    return result


def _fuses_relu(step: Step) -> bool:
    return isinstance(step.op, TensorOp) and bool(step.op.value("do_relu"))
