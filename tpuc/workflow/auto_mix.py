"""The automatic mixed-precision step of model_deploy.py (on by default for
INT8; off with --disable_auto_mix).

Calibration measures what each tensor loses in INT8 on its samples
(tpuc/workflow/calibration/int8_error.py) and lists the tensors that lose most in
the table (`# int8_lossy` lines); then it measures the network's output
and, where that is still below its target, lists the layers it grew into
float (`# int8_float` lines, tpuc/workflow/calibration/float_growth.py).
The layers that would hold a lossy tensor in INT8 — its producer and its
readers —, and the grown layers, run in a float mode instead:
F16 where the chip has it (half the bytes of F32, 11 bits of mantissa are
plenty for what INT8 could not hold), else the chip's float fallback. The
layers become quantize-table entries, so everything downstream treats them
as a user's `--quantize_table`; the user's own entries win.

A lossy network *output* takes its tail with it: the ops that compute it
from the last layers doing real work (at most `TAIL_FLOPS_PER_ELEMENT` per
element, within `TAIL_SHARE` of the network's FLOPs). Their values are what
a user's post-processing reads, and a tensor-wide SQNR does not say how
well they hold it: YOLOv8n's decoded boxes (0–319 px) measure 48 dB in
INT8, yet a step of 1.25 px moves a 20 px face's box by 6%: with the tail
in INT8 the COCO AP of its detections against FP32's is 0.854, with it in
F16 0.957 (regression/int8_safety.py's photos and protocol).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from tpuc.ir.core import output_names
from tpuc.target.chips import Chip, get_chip
from tpuc.workflow.calibration.float_growth import holders


@dataclass(frozen=True)
class FloatLayer:
    """A layer kept out of INT8, the mode it runs in, and why: the SQNR in
    dB of a lossy tensor, or the output loss (1 − cosine) a grown layer added."""

    name: str
    mode: str
    sqnr_db: float | None = None
    added_loss: float | None = None

    def why(self) -> str:
        if self.sqnr_db is not None:
            return f"{self.sqnr_db:.1f} dB"
        return f"adds {self.added_loss:.2g}"


def float_mode(chip: Chip) -> str:
    """F16 where the chip has it, else its float fallback."""
    return "F16" if "F16" in chip.modes else chip.float_fallback


def int8_layers(module: ModuleOp, chip: Chip, floated: Iterable[str] = ()) -> set[str]:
    """Names of the layers that run in INT8 with `floated` in float (with
    none: what a qtable can move: not leaves, not data movement, not float
    fallbacks); an elementwise chain ending in a floated layer follows it."""
    from tpuc.dialects.base import TensorOp
    from tpuc.passes.lowering.convert import op_modes
    from tpuc.workflow.mixed_precision import NOT_CANDIDATES

    ops = [o for o in module.walk() if isinstance(o, TensorOp)]
    ops = [o for o in ops if not isinstance(o, NOT_CANDIDATES)]
    modes, _ = op_modes(ops, "INT8", dict.fromkeys(floated, float_mode(chip)), chip)
    return {o.names[0] for o in ops if modes[o] == "INT8"}


def auto_float_layers(
    module: ModuleOp, cali_table: str | os.PathLike[str], chip: str | Chip
) -> list[FloatLayer]:
    """The layers the table keeps in float (its lossy tensors' layers, then
    its grown layers) that would run in INT8, in table order."""
    from tpuc.base.cali_table import read_table

    table = read_table(cali_table)
    return lossy_float_layers(module, table.lossy, chip, table.float_layers)


def lossy_float_layers(
    module: ModuleOp,
    lossy: Mapping[str, float],
    chip: str | Chip,
    grown: Mapping[str, float] | None = None,
) -> list[FloatLayer]:
    """The layers holding the `lossy` tensors (tensor -> SQNR dB) and the
    `grown` layers (layer -> added loss) that would run in INT8."""
    target = get_chip(chip) if isinstance(chip, str) else chip
    if not lossy and not grown:
        return []
    candidates = int8_layers(module, target)
    mode = float_mode(target)
    outputs = set(output_names(module))
    layers: dict[str, FloatLayer] = {}
    for tensor, db in lossy.items():
        tail = output_tail(module, tensor) if tensor in outputs else []
        for name in [*holders(module, tensor), *tail]:
            if name in candidates and name not in layers:
                layers[name] = FloatLayer(name, mode, db)
    for name, loss in (grown or {}).items():
        if name in candidates and name not in layers:
            layers[name] = FloatLayer(name, mode, added_loss=loss)
    return list(layers.values())


TAIL_FLOPS_PER_ELEMENT = 4
"""An op doing at most this much work per output element (elementwise math,
data movement, a Softmax) belongs to an output's tail; a Conv or MatMul
(2 per multiply-accumulate) or a pooling window ends it."""

TAIL_SHARE = 0.01
"""The tail stops growing at this share of the network's FLOPs: float
there costs nothing measurable."""


def output_tail(module: ModuleOp, tensor: str) -> list[str]:
    """The layers computing output `tensor` from the last ones that do real
    work: walked back from its producer through ops of at most
    `TAIL_FLOPS_PER_ELEMENT` FLOPs per element, within `TAIL_SHARE` of the
    module's FLOPs, in the order found."""
    from tpuc.dialects.base import TensorOp
    from tpuc.ir.flops import module_flops, op_flops

    producer = next(
        (op for op in module.walk() if isinstance(op, TensorOp) and tensor in op.names), None
    )
    if producer is None:
        return []
    budget = TAIL_SHARE * module_flops(module)
    found: list[str] = []
    pending, seen = [producer], set()
    while pending:
        op = pending.pop(0)
        if op in seen or not _light(op):
            continue
        seen.add(op)
        budget -= op_flops(op)
        if budget < 0:
            break
        found.append(op.names[0])
        pending += [v.owner for v in op.operands if isinstance(v.owner, TensorOp)]
    return found


def _light(op) -> bool:
    """An op with an activation result doing little work per element."""
    from tpuc.ir.flops import op_flops
    from tpuc.workflow.mixed_precision import NOT_CANDIDATES

    if isinstance(op, NOT_CANDIDATES) and not op.operands:
        return False  # inputs and weights: leaves
    elements = sum(_elements(r) for r in op.results) or 1
    return op_flops(op) <= TAIL_FLOPS_PER_ELEMENT * elements


def _elements(value) -> int:
    from xdsl.dialects.builtin import TensorType

    t = value.type
    return math.prod(t.get_shape()) if isinstance(t, TensorType) else 0


def merged_qtable(auto: list[FloatLayer], user: Mapping[str, str]) -> dict[str, str]:
    """The automatic entries with the user's on top (the user's mode wins)."""
    return {**{layer.name: layer.mode for layer in auto}, **user}


def report(auto: list[FloatLayer], shown: int = 5, share: str = "") -> str:
    """One line: 'kept 3 layers in F16: a (2.1 dB), b (4.0 dB), c (adds 0.012)'
    and, when given, what share of the network stays in INT8."""
    by_mode: dict[str, list[FloatLayer]] = {}
    for layer in auto:
        by_mode.setdefault(layer.mode, []).append(layer)
    parts = []
    for mode, layers in by_mode.items():
        listed = ", ".join(f"{x.name} ({x.why()})" for x in layers[:shown])
        more = f", … ({len(layers) - shown} more)" if len(layers) > shown else ""
        noun = "layer" if len(layers) == 1 else "layers"
        parts.append(f"kept {len(layers)} {noun} in {mode}: {listed}{more}")
    share = f"; {share}" if share else ""
    return (
        "; ".join(parts) + share + " (INT8 loses them on the calibration data; --disable_auto_mix)"
    )


def int8_share(
    module: ModuleOp, chip: str | Chip, floated: Iterable[str]
) -> tuple[int, int, float]:
    """(layers still in INT8, layers that could be, share of those layers'
    FLOPs still in INT8) once `floated` run in float."""
    from tpuc.dialects.base import TensorOp
    from tpuc.ir.flops import op_flops

    target = get_chip(chip) if isinstance(chip, str) else chip
    candidates = int8_layers(module, target)
    flops = {o.names[0]: op_flops(o) for o in module.walk()
             if isinstance(o, TensorOp) and o.names[0] in candidates}  # fmt: skip
    kept = candidates & int8_layers(module, target, floated)
    total = sum(flops.values()) or 1
    return len(kept), len(candidates), sum(flops[n] for n in kept) / total


def share_text(module: ModuleOp, chip: str | Chip, floated: Iterable[str]) -> str:
    """'INT8 keeps 47 of 191 layers (31% of their FLOPs)'."""
    kept, total, flops = int8_share(module, chip, floated)
    return f"INT8 keeps {kept} of {total} layers ({100 * flops:.0f}% of their FLOPs)"
