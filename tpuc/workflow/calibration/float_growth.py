"""Automatic mixed precision by the network's output: grow the set of float
layers until the FP32 vs INT8 output cosine on calibration samples reaches
a target (TPU-MLIR's run_qtable --expected_cos, made cheap enough to run by
default).

The per-tensor measure (int8_error.py) finds tensors INT8 cannot hold on
their own. Some networks lose instead a little at almost every layer:
PP-PicoDet on white pages (most channels vary by less than one INT8 step),
PP-OCRv4 rec over its re-parameterized blocks. No tensor is lossy, yet
the output is. What is measured here is the network itself:

Each round lowers the module as model_deploy.py would (the table, the
layers already chosen in float), runs the samples through the TPU
interpreter and the float TOP interpreter, and gives every INT8 layer the
error it *adds*: 1 − cos of its output against float, less the largest
1 − cos of its activation inputs (what it inherits). If the smallest
output cosine is below the target, the layers adding most go to float
with every layer that reads their output (a reader left in INT8 would
quantize the tensor at the same threshold: PP-OCRv4 rec's output cosine
went *down*, 0.989 to 0.895, with 66 producers alone in F16), as many as
the growth has already chosen (at least `MIN_BATCH`): the set doubles per
round, so n layers take about log2(n) rounds, and every round measures
again, since a layer in float changes what its readers inherit. Once the
target is reached, the last round's batch is cut by bisection to its
shortest head (in order of added error) that still reaches it: the growth
keeps the smallest set its ranking finds, not the doubling's overshoot.

A trailing Softmax is judged by its input, the logits: over many classes
it turns logit noise far below what changes the ranking into a low
probability cosine (resnet50: 0.72–0.99 per sample with top-1 agreeing),
so judged by its probabilities the growth fired on networks INT8 holds.
An output's cosine is taken over all the samples at once (sums of
products pooled): a sample whose float output is all but zero (PP-OCRv4
det's probability map of a blank crop, which INT8 rounds to exactly 0) has
cosine 0 on its own and says nothing about the network.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from tpuc.ir.weights import WeightStore, attach_weights
from tpuc.target.chips import Chip
from tpuc.workflow.calibration.lockstep import Lockstep
from tpuc.workflow.calibration.positions import (
    Agreement,
    argmax_agreement,
    disagreeing,
    per_position_outputs,
)

Inputs = Mapping[str, np.ndarray]
Progress = Callable[[Iterable, str], Iterable]

EXPECTED_COS = 0.99
"""Default target: the smallest output cosine on the samples (TPU-MLIR's
run_qtable default)."""
SAMPLES = 4
"""Default number of calibration samples the growth measures."""
MIN_BATCH = 4
"""Layers added in the first growing round."""


def added_error(
    cosines: Mapping[str, float], inputs_of: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    """Layer -> the 1 − cosine it adds: its output's, less the largest of
    its measured activation inputs' (0 for an input not measured: a network
    input or a weight)."""
    added = {}
    for layer, inputs in inputs_of.items():
        if layer not in cosines:
            continue
        inherited = max([1.0 - cosines[i] for i in inputs if i in cosines], default=0.0)
        added[layer] = (1.0 - cosines[layer]) - inherited
    return added


def next_batch(added: Mapping[str, float], grown: int, min_batch: int = MIN_BATCH) -> list[str]:
    """The layers to move to float next: those adding most error (only
    positive), as many as `grown` (the growth's layers so far), at least
    `min_batch`; ties by name, so the choice does not depend on order."""
    ranked = sorted(
        (name for name, loss in added.items() if loss > 0), key=lambda n: (-added[n], n)
    )
    return ranked[: max(min_batch, grown)]


@dataclass(frozen=True)
class Score:
    """What one measurement found: the smallest output cosine and, for the
    outputs judged position by position (positions.py), how many positions
    agree with FP32's best class."""

    cos: float
    positions: Agreement = Agreement()

    def reaches(self, target: float) -> bool:
        return self.cos >= target and self.positions.complete

    @property
    def rank(self) -> tuple[float, float]:
        """Better is larger: the share of positions agreeing, then the cosine."""
        return self.positions.share, self.cos

    def __str__(self) -> str:
        agree = f", positions agreeing {self.positions}" if self.positions.positions else ""
        return f"smallest output cosine {self.cos:.6f}{agree}"


@dataclass
class Growth:
    """What the growth chose and measured."""

    layers: dict[str, float] = field(default_factory=dict)  # layer -> added loss when chosen
    history: list[tuple[int, float]] = field(default_factory=list)  # (float layers, min cos)
    scores: list[Score] = field(default_factory=list)  # beside history: what each measured
    candidates: int = 0  # layers that run in INT8 without a qtable
    reached: bool = False
    seconds: float = 0.0

    @property
    def before(self) -> float:
        return self.history[0][1]

    @property
    def after(self) -> float:
        return self.history[-1][1]


class FloatGrowth:
    """A TOP module with weights, a calibration table and a chip, measured on samples."""

    def __init__(self, module: ModuleOp, store: WeightStore, cali_table: Path, chip: Chip,
                 samples: Sequence[Inputs], float_interp, scratch: Path):  # fmt: skip
        self.module, self.store, self.chip = module, store, chip
        self.cali_table = cali_table
        self.samples = list(samples)
        self.float_interp = float_interp
        self.scratch = scratch
        self.outputs = judged_tensors(module)
        self.per_position = per_position_outputs(module)
        self.ties: list[dict[str, np.ndarray]] = []  # per sample: positions float flips
        self.inputs_of = int8_layer_inputs(module, chip)
        self.measured = {*self.inputs_of, *self.outputs.values()}
        self.measured.update(n for names in self.inputs_of.values() for n in names)
        self.holders = {name: holders(module, name) for name in self.inputs_of}

    def measure(
        self, qtable: Mapping[str, str], target: float = 1.0, losses: bool = True
    ) -> tuple[Score, dict[str, float]]:
        """(the outputs' score, layer -> the error it adds averaged over the
        samples below `target` or with a position disagreeing) with
        `qtable`'s layers in float. Only those samples count layer by layer
        (what the growth must fix); the runs are compared as they go
        (`streamed_sums`), so every sample's layer sums are taken, the output
        coming last."""
        interp, weights = self._int8_run(qtable)
        todo = {k: v for k, v in self.inputs_of.items() if k not in qtable}
        wanted = {*self.outputs, *self.outputs.values(), *self.measured, *self.per_position}
        runs = Lockstep(interp, self.float_interp, wanted)
        judged = list(dict.fromkeys(j if j in runs.wanted else o for o, j in self.outputs.items()))
        pooled: dict[str, np.ndarray] = {}
        summed, below, agreement = {}, 0, Agreement()
        for i, x in enumerate(self.samples):
            layered = self.measured if losses else ()
            ties = self.ties[i] if self.ties else {}
            positions = {n: ties.get(n) for n in self.per_position}
            sums, error, agrees = streamed_sums(
                runs, (weights, self.store), x, judged, layered, positions
            )
            for name in judged:
                pooled[name] = pooled.get(name, 0.0) + sums[name]
            agreement += agrees
            worst = min(_cosine(*sums[n]) for n in judged)
            if losses and (worst < target or not agrees.complete):
                if error is not None:
                    raise error
                cosines = {n: _cosine(*three) for n, three in sums.items() if n in self.measured}
                for layer, loss in added_error(cosines, todo).items():
                    summed[layer] = summed.get(layer, 0.0) + loss
                below += 1
        worst = min(_cosine(*three) for three in pooled.values())
        return Score(worst, agreement), {k: v / below for k, v in summed.items()}

    def _int8_run(self, qtable: Mapping[str, str]):
        """The module lowered as model_deploy.py would with `qtable`'s layers
        in float: its TPU interpreter and weights. The interpreter runs on
        the float interpreter's memory (the two take turns, lockstep.py),
        which first lets go of what calibration's runs kept, so the
        lowering can use it."""
        from tpuc.interp.tpu_interpreter import TpuInterpreter
        from tpuc.ir.qtable import format_qtable
        from tpuc.ir.weights import weights_of
        from tpuc.workflow.deploy import lower

        self.float_interp.executor.release()
        lowered = self.module.clone()
        attach_weights(lowered, WeightStore(self.store))
        path = None
        if qtable:
            path = self.scratch / "growth_qtable"
            path.write_text(format_qtable(dict(qtable)))
        lower(lowered, self.chip.name, "INT8", cali_table=self.cali_table, qtable=path)
        executor = self.float_interp.executor.sibling()
        return TpuInterpreter(lowered, executor=executor), weights_of(lowered)

    def grow(self, start: Mapping[str, str], target: float, mode: str,
             say: Callable[[str], None] = lambda _: None) -> Growth:  # fmt: skip
        """Float layers beyond `start` (the qtable already decided) until the
        smallest output cosine reaches `target` and every position of a
        per-position output agrees, or no layer adds error; then
        the last batch cut to its shortest head that still reaches it, or,
        short of the target, the round that measured best."""
        began = time.perf_counter()
        growth = Growth(candidates=len(self.inputs_of))
        self.ties = self.float_ties(mode) if self.per_position else []
        qtable, last, best = dict(start), None, None
        while True:
            score, added = self.measure(qtable, target)
            self._record(growth, qtable, score, mode, say)
            if best is None or score.rank > best[0].rank:
                best = (score, len(qtable), dict(growth.layers))
            if score.reaches(target):
                growth.reached = True
                break
            batch = next_batch(added, len(growth.layers))
            if not batch:
                break
            last = (dict(qtable), [(name, added[name]) for name in batch])
            self._add(growth, qtable, last[1], mode)
        if growth.reached and last is not None and len(last[1]) > 1:
            self._shortest_head(growth, *last, target, mode, say)
        elif not growth.reached and best[2] != growth.layers:
            self._keep_best(growth, *best, say)
        growth.seconds = time.perf_counter() - began
        return growth

    def float_ties(self, mode: str) -> list[dict[str, np.ndarray]]:
        """Per sample and per-position output: the positions whose best
        class differs from float's with every layer in `mode` (near ties
        no float layer set holds; positions.py)."""
        from tpuc.interp.tpu_interpreter import TpuInterpreter
        from tpuc.ir.qtable import format_qtable
        from tpuc.ir.weights import weights_of
        from tpuc.workflow.deploy import lower

        lowered = self.module.clone()
        attach_weights(lowered, WeightStore(self.store))
        path = self.scratch / "growth_float_qtable"
        path.write_text(format_qtable(dict.fromkeys(self.inputs_of, mode)))
        lower(lowered, self.chip.name, "INT8", cali_table=self.cali_table, qtable=path)
        interp, weights = TpuInterpreter(lowered), weights_of(lowered)
        ties = []
        for x in self.samples:
            reference = self.float_interp.run(self.store, x)
            run = interp.real_values(interp.run(weights, x))
            ties.append({n: disagreeing(run[n], np.asarray(reference[n], np.float32))
                         for n in self.per_position})  # fmt: skip
        return ties

    def _add(self, growth: Growth, qtable: dict[str, str], batch, mode: str) -> None:
        """Each chosen layer with the layers holding its output in INT8."""
        for name, loss in batch:
            for layer in self.holders[name]:
                if layer in self.inputs_of and layer not in qtable:
                    growth.layers[layer] = loss if layer == name else 0.0
                    qtable[layer] = mode

    def _shortest_head(self, growth: Growth, before: dict[str, str], batch, target: float,
                       mode: str, say: Callable[[str], None]) -> None:  # fmt: skip
        """Bisect the last batch: the fewest of its first layers that,
        added to `before`, still reach `target` (all of them do)."""
        fails, reaches = 0, len(batch)
        reached = {reaches: growth.scores[-1]}
        while reaches - fails > 1:
            middle = (fails + reaches) // 2
            trial = dict(before)
            self._add(Growth(), trial, batch[:middle], mode)
            score, _ = self.measure(trial, target, losses=False)
            self._record(growth, trial, score, mode, say)
            if score.reaches(target):
                reaches, reached[middle] = middle, score
            else:
                fails = middle
        kept = dict(before)
        self._add(Growth(), kept, batch[:reaches], mode)
        for layer in [n for n in growth.layers if n not in kept]:
            del growth.layers[layer]
        growth.history.append((len(kept), reached[reaches].cos))
        growth.scores.append(reached[reaches])

    @staticmethod
    def _keep_best(growth: Growth, score: Score, size: int, layers: dict[str, float],
                   say: Callable[[str], None]) -> None:  # fmt: skip
        """Short of the target, the round that measured best is kept (more
        layers in float can read worse: PP-OCRv4 rec's last round, 164
        layers, had 158 of 160 positions agreeing, the one before 159)."""
        growth.layers = layers
        growth.history.append((size, score.cos))
        growth.scores.append(score)
        say(f"auto mix: the target is not reached; keeping the {size} layer(s) that measured best")

    @staticmethod
    def _record(growth: Growth, qtable, score: Score, mode: str, say) -> None:
        growth.history.append((len(qtable), score.cos))
        growth.scores.append(score)
        say(f"auto mix: {len(qtable)} layer(s) in {mode}, {score}")


def _sums(interp, quantized: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray],
          name: str) -> np.ndarray:  # fmt: skip
    """(t·t, r·r, t·r) of tensor `name`, INT8 run (real values) t against
    float r: in float64 by einsum, not BLAS dot (several times slower on a
    loaded machine, and this runs on every tensor of every sample)."""
    real = np.ravel(interp.real_values({name: quantized[name]})[name])
    ref = np.ravel(np.asarray(reference[name], np.float32))
    if real.size != ref.size:
        raise ValueError(f"tensor '{name}': {real.size} values in INT8, {ref.size} in float")
    real, ref = (a if np.isfinite(a).all() else np.nan_to_num(a, posinf=1e4, neginf=-1e4)
                 for a in (real, ref))  # fmt: skip
    return np.array([np.einsum("i,i->", a, b, dtype=np.float64)
                     for a, b in ((real, real), (ref, ref), (real, ref))])  # fmt: skip


def _cosine(tt: float, rr: float, tr: float) -> float:
    norm = np.sqrt(tt) * np.sqrt(rr)
    if norm == 0.0:
        return 1.0 if tt == 0.0 and rr == 0.0 else 0.0
    return float(tr / norm)


def streamed_sums(runs: Lockstep, weights: tuple[Inputs, Inputs], x: Inputs,
                  judged: Sequence[str], layered: Collection[str],
                  positions: Mapping[str, np.ndarray | None] | None = None,
                  ) -> tuple[dict[str, np.ndarray], ValueError | None, Agreement]:  # fmt: skip
    """`_sums` of the `judged` tensors and of the `layered` ones both runs
    compute, the INT8 run (`runs.lead`) against the float one, for sample
    `x`: the two run side by side and each tensor is dropped once summed
    (lockstep.py), so neither run's tensors are all held at once. The
    layered tensors are summed whether or not the sample will need them
    (that is known only at its output); a size mismatch among them comes
    back as the error to raise if their cosines are used. The per-position
    outputs in `positions` (name -> the positions float itself flips) are
    counted as they pass (`argmax_agreement` on the INT8 run's real values)."""
    sums: dict[str, np.ndarray] = {}
    error = None
    agreement = Agreement()
    positions = positions or {}
    interp = runs.lead
    for name, quantized, reference in runs.pairs(*weights, x):
        if name in positions:
            real = interp.real_values({name: quantized})[name]
            ref = np.asarray(reference, np.float32)
            agreement += argmax_agreement(real, ref, positions[name])
        if name not in judged and name not in layered:
            continue
        try:
            sums[name] = _sums(interp, {name: quantized}, {name: reference}, name)
        except ValueError as exc:
            if name in judged:
                raise
            error = error or exc
    return sums, error, agreement


def judged_tensors(module: ModuleOp) -> dict[str, str]:
    """Output -> the tensor its cosine is judged on: the output itself, or
    the logits of a trailing Softmax (reached through data movement)."""
    from tpuc.dialects import top
    from tpuc.dialects.base import TensorOp
    from tpuc.interp.top_interpreter import activation_name
    from tpuc.ir.core import output_names

    producers = {n: op for op in module.walk() if isinstance(op, TensorOp) for n in op.names}
    judged = {}
    for name in output_names(module):
        op = producers.get(name)
        while isinstance(op, top.VALUE_MOVES) and len(op.operands) == 1:
            op = op.operands[0].owner
        logits = activation_name(op.operands[0]) if isinstance(op, top.SoftmaxOp) else None
        judged[name] = logits or name
    return judged


def int8_layer_inputs(module: ModuleOp, chip: Chip) -> dict[str, list[str]]:
    """Layers that run in INT8 without a qtable (what a qtable can move) ->
    the names of their activation inputs, in network order."""
    from tpuc.dialects.base import TensorOp
    from tpuc.interp.top_interpreter import activation_name
    from tpuc.passes.lowering.convert import op_modes
    from tpuc.workflow.mixed_precision import NOT_CANDIDATES

    ops = [
        o for o in module.walk() if isinstance(o, TensorOp) and not isinstance(o, NOT_CANDIDATES)
    ]
    modes, _ = op_modes(ops, "INT8", {}, chip)
    return {
        o.names[0]: [n for n in map(activation_name, o.operands) if n is not None]
        for o in ops
        if modes[o] == "INT8"
    }


def holders(module: ModuleOp, tensor: str) -> list[str]:
    """The layers that would hold `tensor` in INT8: its producer, and every
    op that reads it (through data movement, which keeps its producer's
    type) — an INT8 reader would requantize it with the same threshold."""
    from tpuc.dialects import top
    from tpuc.dialects.base import TensorOp

    producer = next(
        (op for op in module.walk() if isinstance(op, TensorOp) and tensor in op.names), None
    )
    if producer is None:
        return []
    found, pending = [producer.names[0]], list(producer.results)
    while pending:
        for use in pending.pop().uses:
            reader = use.operation
            if not isinstance(reader, TensorOp):
                continue
            if isinstance(reader, top.VALUE_MOVES):
                pending.extend(reader.results)
            elif reader.names[0] not in found:
                found.append(reader.names[0])
    return found
