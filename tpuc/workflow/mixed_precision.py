"""Mixed-precision search (run_qtable.py): the few layers INT8 cannot carry.

The loss of a layer is the network's output loss, 1 − cos(mixed, float),
averaged over samples and outputs, when only that layer runs in the float
mode and every other op in INT8. Each candidate is lowered by the same
passes model_deploy.py runs (with a one-line qtable) and run by the same
TPU interpreter, so the numbers predict the deployed model exactly.

Reuse: the float outputs and every tensor of the all-INT8 model are
computed once per sample. A candidate module is compared with the all-INT8
one op by op (name, attributes, result types and the same for everything
upstream): ops that match compute what they computed before, so their
values are taken from the all-INT8 run, weights only they read are not
loaded, and only what lies downstream of the change runs again. Lowering a
candidate costs far less than running it: the lowering passes reuse the
long per-channel lists of earlier lowerings (dialects/base.py), and
`op_signatures` remembers their text.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, ModuleOp
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Attribute, Operation

from tpuc.base.compare import cosine_similarity
from tpuc.base.errors import TpucError
from tpuc.dialects import top
from tpuc.dialects.base import TensorOp
from tpuc.dialects.traits import Leaf, with_trait
from tpuc.ir.weights import WeightStore, attach_weights
from tpuc.target.chips import Chip

Inputs = Mapping[str, np.ndarray]
Progress = Callable[[Iterable, str], Iterable]

NOT_CANDIDATES = (*with_trait(top.TOP_OPS, Leaf), *top.VALUE_MOVES)
"""Ops that never become qtable entries: leaves, and data movement (it keeps
whatever precision its producer has)."""


def _constant(op: Operation) -> bool:
    """Weights and None: leaves that hold no activation."""
    return isinstance(op, top.WeightOp | top.NoneOp)


def best_float_mode(chip: Chip) -> str:
    """`--fp_type auto`: F32 where the chip has it, else its float fallback."""
    return "F32" if "F32" in chip.modes else chip.float_fallback


def op_signatures(module: ModuleOp, texts: dict | None = None) -> dict[str, int]:
    """Tensor name -> a hash of its op and everything upstream (op name,
    attributes, properties, result types, operand signatures). Equal
    signatures in two lowerings of one TOP module mean equal values.
    `texts` remembers the text of long attributes (see `_text`) from one
    call to the next."""
    from tpuc.ir.core import main_function

    texts = {} if texts is None else texts
    by_value: dict = {}
    names: dict[str, int] = {}
    for op in main_function(module).body.block.ops:
        if isinstance(op, ReturnOp):
            continue
        key = hash((op.name, _fields(op, texts), tuple(str(r.type) for r in op.results),
                    tuple(by_value.get(v, ("arg", str(v))) for v in op.operands)))  # fmt: skip
        for result in op.results:
            by_value[result] = hash((key, result.index))
        if isinstance(op, TensorOp):
            for name in op.names:
                names[name] = key
    return names


def _fields(op: Operation, texts: dict) -> tuple:
    items = [*op.attributes.items(), *op.properties.items()]
    return tuple(sorted((k, _text(v, texts)) for k, v in items))


LONG = 16
"""Arrays at least this long have their text remembered."""


def _text(attr: Attribute, texts: dict) -> str:
    """str(attr), remembered by identity for long arrays: the per-channel
    multiplier lists are the bulk of a lowered module's text, and every
    lowering shares them (dialects/base.py keeps them)."""
    if not (isinstance(attr, ArrayAttr) and len(attr.data) >= LONG):
        return str(attr)
    known = texts.get(id(attr))
    if known is None or known[0] is not attr:
        if len(texts) > 1 << 14:
            texts.clear()
        known = texts[id(attr)] = (attr, str(attr))  # holding attr keeps its id unique
    return known[1]


@dataclass
class SearchStats:
    """What the search did: candidate evaluations and ops computed."""

    evaluations: int = 0
    ops_run: int = 0
    ops_reused: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Add the time the block takes to seconds[stage]."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start


class MixedPrecisionSearch:
    """A TOP_F32 module with weights, a calibration table, a chip and
    samples, ready to score qtables (layer name -> float mode)."""

    def __init__(
        self,
        module: ModuleOp,
        store: WeightStore,
        cali_table: str | Path,
        chip: Chip,
        samples: Sequence[Inputs],
        downstream_only: bool = True,
        top_interp=None,
    ):
        """`top_interp`: a TopInterpreter of `module` already built (e.g. the
        calibration's), else one is made."""
        from tpuc.interp.accelerator import accelerated
        from tpuc.interp.top_interpreter import TopInterpreter
        from tpuc.ir.core import output_names

        if not samples:
            raise TpucError("the mixed-precision search needs at least one sample")
        self.module, self.store = module, store
        self.cali_table, self.chip = str(cali_table), chip
        self.samples = list(samples)
        self.downstream_only = downstream_only
        self.stats = SearchStats()
        self._tmp = tempfile.TemporaryDirectory(prefix="tpuc_qtable_")
        start = time.perf_counter()
        top_interp = top_interp or TopInterpreter(module, native=accelerated("mixed_precision"))
        self.float_tensors = [top_interp.run(store, x, dump_all=True) for x in self.samples]
        self.output_names = output_names(module)
        self.stats.seconds["float"] = time.perf_counter() - start
        start = time.perf_counter()
        base = self.lower({})
        self._texts: dict = {}  # see op_signatures
        self.base_signatures = op_signatures(base, self._texts)
        self.base_interp, self.base_weights = self._interpreter(base)
        self.base_values = [
            self.base_interp.run(self.base_weights, x, dump_all=True) for x in self.samples
        ]
        self.base_cos = self._score(self.base_interp, self.base_values)
        self.stats.seconds["int8"] = time.perf_counter() - start

    def close(self) -> None:
        self._tmp.cleanup()

    # --- lowering and scoring ------------------------------------------------------------

    def lower(self, qtable: Mapping[str, str]) -> ModuleOp:
        """A TPU module: the TOP module in INT8 with `qtable`'s overrides."""
        from tpuc.ir.qtable import format_qtable
        from tpuc.workflow.deploy import lower

        module = self.module.clone()
        attach_weights(module, WeightStore(self.store))
        path = None
        if qtable:
            path = Path(self._tmp.name) / "qtable"
            path.write_text(format_qtable(dict(qtable)))
        lower(module, self.chip.name, "INT8", cali_table=self.cali_table, qtable=path)
        return module

    @staticmethod
    def _interpreter(module: ModuleOp):
        from tpuc.interp.tpu_interpreter import TpuInterpreter
        from tpuc.ir.weights import weights_of

        return TpuInterpreter(module), weights_of(module)

    def _score(self, interp, values: Sequence[Mapping[str, np.ndarray]]) -> float:
        """Mean cosine of the outputs against the float outputs."""
        cosines = []
        for reference, stored in zip(self.float_tensors, values, strict=True):
            real = interp.real_values({n: stored[n] for n in self.output_names})
            cosines += [cosine_similarity(real[n], reference[n]) for n in self.output_names]
        return float(np.mean(cosines))

    def evaluate(self, qtable: Mapping[str, str]) -> float:
        """The output cosine with `qtable`'s layers in float."""
        timed = self.stats.timed
        with timed("lower"):
            module = self.lower(qtable)
            interp, weights = self._interpreter(module)
        reuse, idle = set(), {}
        if self.downstream_only:
            with timed("compare"):
                reuse, idle = self._reusable(module, interp)
        outputs = []
        with timed("run"):
            for x, given in zip(self.samples, self.base_values, strict=True):
                given = {**given, **idle} if idle else given
                outputs.append(interp.run(weights, x, given=given, reuse=reuse))
        ops = sum(1 for step in interp.steps if not _constant(step.op))
        reused = sum(1 for i in reuse if not _constant(interp.steps[i].op))
        self.stats.evaluations += 1
        self.stats.ops_reused += reused * len(self.samples)
        self.stats.ops_run += (ops - reused) * len(self.samples)
        return self._score(interp, outputs)

    def _reusable(self, module: ModuleOp, interp) -> tuple[set[int], dict[str, None]]:
        """Steps whose signature matches the all-INT8 module's (their values
        are the all-INT8 run's), and the weights only they read: those are
        not even decoded (`idle`: their names, given as None)."""
        signatures = op_signatures(module, self._texts)

        def unchanged(name: str) -> bool:
            base = self.base_signatures.get(name)
            return base is not None and signatures.get(name) == base

        reuse = {
            i
            for i, step in enumerate(interp.steps)
            if not _constant(step.op) and all(map(unchanged, step.names))
        }
        read = {v for i, s in enumerate(interp.steps) if i not in reuse for v in s.operands}
        read.update(interp.returned)
        idle: dict[str, None] = {}
        for i, step in enumerate(interp.steps):
            if _constant(step.op) and not read.intersection(step.results):
                reuse.add(i)
                idle.update(dict.fromkeys(step.names))
        return reuse, idle

    # --- the search ----------------------------------------------------------------------

    def layer_cosines(self) -> dict[str, float]:
        """Each TOP tensor's own cosine in the all-INT8 model (mean over samples)."""
        real = [self.base_interp.real_values(v) for v in self.base_values]
        cosines: dict[str, float] = {}
        for name in self.float_tensors[0]:
            if all(name in r for r in real):
                pairs = zip(real, self.float_tensors, strict=True)
                cosines[name] = float(
                    np.mean([cosine_similarity(r[name], f[name]) for r, f in pairs])
                )
        return cosines

    def layers(self) -> list[str]:
        """The layers a qtable could move to float, in graph order: the ops
        that run in INT8 (not data movement, not float fallbacks)."""
        from tpuc.passes.lowering.convert import op_modes

        ops = [o for o in self.module.walk() if isinstance(o, TensorOp)]
        ops = [o for o in ops if not isinstance(o, NOT_CANDIDATES)]
        modes, _ = op_modes(ops, "INT8", {}, self.chip)
        return [o.names[0] for o in ops if modes[o] == "INT8"]

    def candidates(self, min_layer_cos: float) -> list[str]:
        """Layers worth a float run: those whose own all-INT8 cosine is below
        `min_layer_cos` (every layer when none is)."""
        layers = self.layers()
        cosines = self.layer_cosines()
        low = [name for name in layers if cosines.get(name, 1.0) < min_layer_cos]
        return low or layers

    def layer_losses(
        self, layers: Sequence[str], fp_mode: str, progress: Progress
    ) -> list[tuple[str, float]]:
        """(layer, loss) with only that layer in `fp_mode`, best first."""
        start = time.perf_counter()
        losses = [
            (name, 1.0 - self.evaluate({name: fp_mode})) for name in progress(layers, "layers")
        ]
        self.stats.seconds["layers"] = time.perf_counter() - start
        return sorted(losses, key=lambda item: (item[1], item[0]))

    def select(
        self, losses: Sequence[tuple[str, float]], fp_mode: str, expected_cos: float
    ) -> tuple[dict[str, str], float]:
        """Greedy: add layers in order of gain (only those that gain) until the
        output cosine reaches `expected_cos`; the qtable and its cosine."""
        chosen: dict[str, str] = {}
        cos = self.base_cos
        base_loss = 1.0 - self.base_cos
        for name, loss in losses:
            if cos >= expected_cos or loss >= base_loss:
                break
            chosen[name] = fp_mode
            cos = self.evaluate(chosen)
        return chosen, cos


def loss_table_text(losses: Sequence[tuple[str, float]], header: Sequence[str]) -> str:
    """TPU-MLIR's full_loss_table.txt: the header, then `No.i : Layer: name
    Loss: value` lines, best first."""
    lines = [f"# {h}" for h in header] + ["###"]
    lines += [
        f"No.{i:<4}: Layer: {name:<50}\t\tLoss: {loss!r}" for i, (name, loss) in enumerate(losses)
    ]
    return "\n".join(lines) + "\n"
