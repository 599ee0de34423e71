"""The TOP float interpreter: runs `func @main` of a TOP module with numpy.

A plain walk over the function body with a dict from SSA value to array;
each intermediate is dropped right after its last use (unless every tensor
is wanted), so peak memory stays near the widest point of the network. Its
memory goes back to the executor's arena, which hands it to later kernels
(and lets elementwise kernels overwrite an operand read for the last time).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Collection, Generator, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from tpuc.base.errors import TpucError
from tpuc.dialects import top
from tpuc.dialects.base import shape_of
from tpuc.dialects.traits import Leaf
from tpuc.interp.top_ops import KERNELS
from tpuc.interp.top_ops.registry import Kernel
from tpuc.ir.core import body_ops, last_uses, main_function, tensor_names
from tpuc.kernels.executor import Executor


def activation_name(value: SSAValue) -> str | None:
    """Tensor name of an operand computed by the network (None for weights,
    None values and block arguments)."""
    owner = value.owner
    if not isinstance(owner, Operation) or isinstance(owner, top.WeightOp | top.NoneOp):
        return None
    return tensor_names(owner)[value.index]


class Step:
    """One op with what the interpreter needs to know about it, resolved once:
    result names and declared shapes, and which values stop being needed."""

    __slots__ = (
        "op",
        "operands",
        "results",
        "names",
        "shapes",
        "dying",
        "unused",
        "leaf",
        "kernel",
    )

    def __init__(self, op: Operation, index: int, last_use: dict[SSAValue, int]):
        self.op = op
        self.operands = list(op.operands)
        self.results = list(op.results)
        self.names = tensor_names(op)
        self.shapes = [shape_of(v) for v in self.results]
        self.leaf = isinstance(op, top.InputOp | top.WeightOp | top.NoneOp)
        # operands read for the last time here, and results nobody reads
        self.dying = list(dict.fromkeys(v for v in self.operands if last_use[v] == index))
        self.unused = [v for v in self.results if last_use.get(v, -1) <= index]
        self.kernel: Kernel | None = None  # bound by the interpreter

    def donors(self) -> list[SSAValue]:
        """Dying operands a kernel produced (others are caller-owned arrays)."""
        return [v for v in self.dying if isinstance(v.owner, Operation) and not _leaf(v.owner)]


def _leaf(op: Operation) -> bool:
    return op.has_trait(Leaf)


Observer = Callable[[Step, list, list[np.ndarray]], None]
"""Called after each op with its operand and result arrays (see `run`)."""


def _ignore(step: Step, args: list, results: list) -> None:
    """The observer of a `stream`: every result is wanted, none is kept."""


Placement = tuple[int, tuple[slice, ...]]  # the Concat's step, the part of its result


def concat_placements(steps: list[Step], returned: list[SSAValue]) -> dict[int, Placement]:
    """Results that kernels can write straight into the result of the Concat
    that is their only reader (by step index), making that Concat a no-op:
    those whose place there is contiguous (all dims before the axis are 1)."""
    index = {step.op: i for i, step in enumerate(steps)}
    places: dict[int, Placement] = {}
    for i, step in enumerate(steps):
        shape = step.shapes[0]
        if not isinstance(step.op, top.ConcatOp) or shape is None:
            continue
        axis = step.op.value("axis") % len(shape)
        if any(d != 1 for d in shape[:axis]):
            continue
        start = 0
        for value in step.operands:
            size = (shape_of(value) or (None,) * len(shape))[axis]
            if size is None:
                break
            owner = value.owner
            if (
                isinstance(owner, Operation)
                and not _leaf(owner)
                and len(owner.results) == 1
                and value.has_one_use()
                and value not in returned
            ):
                places[index[owner]] = (i, (slice(None),) * axis + (slice(start, start + size),))
            start += size
    return places


class TopInterpreter:
    """A TOP module prepared for repeated runs (e.g. over a calibration set):
    the op order, kernels and last uses are resolved once; the executor keeps
    scratch and recycled memory from one run to the next.

    `threads`: None uses as many kernel threads as BLAS has, BLAS pinned to
    one (the same float sums on any load: see `executor`); executor.AUTO
    picks, run by run, whichever of that and BLAS threading has been faster;
    0 always lets BLAS thread; N >= 1 uses N kernel threads.

    `native`: run exportable ops as onnxruntime sessions (the accelerator;
    callers ask `accelerator.accelerated` whether they may), else every op
    in tpuc's own kernels, which define TOP's float semantics.

    `executor`: the threads and memory to run on, when not its own (e.g.
    another interpreter's `Executor.sibling`; `threads` is then its)."""

    title = "TOP interpreter"  # the progress bar's label

    def __init__(
        self,
        module: ModuleOp,
        threads: int | None = None,
        native: bool = False,
        executor: Executor | None = None,
    ):
        self.executor = executor or Executor(threads)
        self.native = native
        self._native: Any = None  # NativeRuns of the last weights
        body = main_function(module).body.block
        self.ops: list[Operation] = body_ops(body)
        ret = body.last_op
        self.returned: list[SSAValue] = list(ret.operands) if isinstance(ret, func.ReturnOp) else []
        self.last_use = last_uses(body)
        self.steps = [Step(op, i, self.last_use) for i, op in enumerate(self.ops)]
        self.donors = [step.donors() for step in self.steps]
        self.placements = concat_placements(self.steps, self.returned)
        self.inputs = [op for op in self.ops if isinstance(op, top.InputOp)]
        self._bind_kernels()

    def _bind_kernels(self) -> None:
        """Give each computing step its kernel; one error names every op
        without one (subclasses pick kernels from their own registries)."""
        missing = sorted({op.name for op in self.ops if not _leaf(op) and type(op) not in KERNELS})
        if missing:
            raise TpucError(f"the TOP interpreter has no kernel for: {', '.join(missing)}")
        for step in self.steps:
            if not step.leaf:
                step.kernel = KERNELS[type(step.op)]

    def run(
        self,
        weights: Mapping[str, np.ndarray],
        inputs: Mapping[str, np.ndarray],
        *,
        dump_all: bool = False,
        progress: bool = False,
        observe: Observer | None = None,
        operands: bool = True,
        given: Mapping[str, np.ndarray] | None = None,
        reuse: Collection[int] = (),
    ) -> dict[str, np.ndarray]:
        """Outputs by tensor name (every tensor, inputs included, with dump_all).

        `observe(step, args, results)` is called after each op other than
        Weight and None (Input included), while its operands and results are
        still alive: calibration streams statistics through it instead of
        keeping every tensor. It must not write into the arrays. With
        `operands` False it gets no operands (an empty list), and kernels may
        write their results over operands that die there, as in a plain run.

        Steps whose index is in `reuse` are not computed: their results are
        taken, by tensor name, from `given` (a dump_all of an earlier run),
        which is never written into."""
        # inf/nan propagate silently, as in onnxruntime
        with np.errstate(all="ignore"), self.executor.active():
            try:
                watch = (observe, operands)
                walk = self._walk(weights, inputs, dump_all, progress, watch, given, reuse)
                while True:
                    try:
                        next(walk)
                    except StopIteration as done:
                        return done.value
            finally:
                self.executor.arena.finish()

    def stream(
        self, weights: Mapping[str, np.ndarray], inputs: Mapping[str, np.ndarray]
    ) -> Iterator[tuple[Step, list[np.ndarray]]]:
        """A run op by op: (step, its results) for each op other than Weight
        and None (Input included), computed only when the caller asks for
        the next one. Two interpreters can so run one sample in lock step
        and be compared tensor by tensor without either keeping every tensor
        (a dump_all): each step runs inside this interpreter's own executor
        (its arena and thread setting), whatever the other does between.
        Results the caller keeps are never written into (the arena recycles
        and donates only buffers nothing else references); the values are
        those of `run`."""
        walk = self._walk(weights, inputs, False, False, (_ignore, False), None, ())
        try:
            while True:
                with np.errstate(all="ignore"), self.executor.active():
                    item = next(walk, None)
                    while item is not None and isinstance(item[0].op, top.WeightOp | top.NoneOp):
                        item = next(walk, None)
                if item is None:
                    return
                yield item
                item = None  # the caller's references only, while the run goes on
        finally:
            walk.close()
            self.executor.arena.finish()

    def _walk(
        self, weights, inputs, dump_all: bool, progress: bool, watch, given, reuse
    ) -> Generator[tuple[Step, list], None, dict[str, np.ndarray]]:
        """The run itself: yields each step with its results once they are
        in the environment (see `stream`), returns what `run` returns."""
        observe, operands = watch
        env: dict[SSAValue, Any] = {}
        native = self._native_runs(weights) if not reuse else None
        every = dump_all or observe is not None
        pending: dict[SSAValue, np.ndarray] = {}  # results of the current native run
        dumped: dict[str, np.ndarray] = {}
        arena = self.executor.arena
        concats: dict[int, np.ndarray] = {}  # Concat results that parts were placed in
        in_place = not dump_all and not reuse  # given parts are not in a Concat's buffer
        # an observer reads each op's operands next to its results: no kernel
        # may write its result over an operand that dies there
        donate = in_place and (observe is None or not operands)
        for i, step in enumerate(_progress(self.steps, progress, self.title)):
            if in_place:
                arena.place(self._place(i, step, concats))
            if donate:
                arena.pick_donors(env, self.donors[i])
            results = None
            if native is not None and i in native.covered:  # None: its run was dropped
                results = self._native_step(native, i, step, env, pending, every)
            if results is None:
                if i in reuse:
                    results = [given[name] for name in step.names]
                else:
                    results = self._execute(step, env, weights, inputs)
            arena.place(None)
            arena.pick_donors(env, ())
            env.update(zip(step.results, results, strict=True))
            if observe is not None and not isinstance(step.op, top.WeightOp | top.NoneOp):
                args = [env[v] for v in step.operands] if operands and not step.leaf else []
                observe(step, args, results)
            yield step, results
            if dump_all:
                if not isinstance(step.op, top.WeightOp | top.NoneOp):
                    dumped.update(zip(step.names, results, strict=True))
                continue
            if step.unused or step.dying:
                for value in step.unused:
                    del env[value]
                for value in step.dying:
                    env.pop(value, None)
                results = None  # drop our references before collecting
                arena.collect()
        outputs = {name: env[v] for v, name in self._returned_names()}
        return {**dumped, **outputs} if dump_all else outputs

    def _native_runs(self, weights: Mapping[str, np.ndarray]):
        """The native runs for these weights (made again when they change)."""
        if not self.native:
            return None
        from tpuc.interp.ort.segments import NativeRuns

        if self._native is None or not self._native.valid_for(weights):
            self._native = NativeRuns(self.steps, weights, set(self.returned), self.last_use)
        return self._native

    def _native_step(self, native, i: int, step: Step, env, pending, every: bool) -> list | None:
        """Step i's results from its native run (run when i starts it); None
        for results nobody reads when not every tensor is wanted. None when
        onnxruntime would not load the run: it is dropped, numpy runs it."""
        run = native.starts.get(i)
        if run is not None:
            try:
                results = native.run(run, env, every, max(1, self.executor.threads))
            except Exception as exc:  # onnxruntime names the node: the TOP tensor
                raise TpucError(f"{step.op.name} '{step.names[0]}' failed: {exc}") from exc
            if results is None:  # dropped: the caller runs the step in numpy
                _warn_once(native.failures[-1])
                return None
            pending.update(results)
        return [
            self._checked(step, k, pending.pop(v)) if v in pending else None
            for k, v in enumerate(step.results)
        ]

    def _place(self, i: int, step: Step, concats: dict[int, np.ndarray]) -> np.ndarray | None:
        """Where step i's kernel should write its result: its part of a
        Concat's result (allocated by the first part), or for that Concat the
        buffer its parts are already in."""
        if i in concats:
            return concats.pop(i)
        placement = self.placements.get(i)
        if placement is None:
            return None
        concat, part = placement
        whole = concats.get(concat)
        if whole is None:
            whole = concats[concat] = self.executor.arena.empty(self.steps[concat].shapes[0])
        return whole[part]

    def _returned_names(self) -> Iterable[tuple[SSAValue, str]]:
        for value in self.returned:
            owner = value.owner
            if not isinstance(owner, Operation):
                raise TpucError("func @main returns a block argument, not a TOP tensor")
            yield value, tensor_names(owner)[value.index]

    def _execute(self, step: Step, env, weights, inputs) -> list[np.ndarray | None]:
        op = step.op
        if step.leaf:
            if isinstance(op, top.NoneOp):
                return [None]
            if isinstance(op, top.WeightOp):
                return [self._weight(op, step.shapes[0], weights)]
            return [self._input(op, step.shapes[0], inputs)]
        args = [env[v] for v in step.operands]
        try:
            result = step.kernel(op, args)
        except TpucError:
            raise
        except Exception as exc:  # a numpy error inside a kernel: name the op
            raise TpucError(f"{op.name} '{step.names[0]}' failed: {exc}") from exc
        results = list(result) if isinstance(result, tuple) else [result]
        if len(results) != len(step.results):
            raise TpucError(
                f"{op.name} '{step.names[0]}': kernel gave {len(results)} results, "
                f"op has {len(step.results)}"
            )
        return [self._checked(step, i, r) for i, r in enumerate(results)]

    @staticmethod
    def _checked(step: Step, index: int, result: Any) -> np.ndarray:
        array = result if type(result) is np.ndarray and result.dtype == np.float32 else None
        if array is None:
            array = np.asarray(result, dtype=np.float32)
        expected = step.shapes[index]
        if expected is not None and array.shape != expected:
            raise TpucError(
                f"{step.op.name} '{step.names[index]}': computed shape {list(array.shape)} "
                f"but the IR declares {list(expected)}"
            )
        return array

    @staticmethod
    def _weight(op: top.WeightOp, expected, weights: Mapping[str, np.ndarray]) -> np.ndarray:
        name = op.names[0]
        if name not in weights:
            raise TpucError(f"weight '{name}' is missing from the weight file")
        return fit_weight(name, np.asarray(weights[name], dtype=np.float32), expected)

    @staticmethod
    def _input(op: top.InputOp, expected, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        name = op.names[0]
        shown = list(expected) if expected is not None else "any"
        if name not in inputs:
            raise TpucError(f"input '{name}' (shape {shown}) is missing from the inputs")
        array = np.asarray(inputs[name], dtype=np.float32)
        if expected is not None and array.shape != expected:
            raise TpucError(
                f"input '{name}' has shape {list(array.shape)}, expected {list(expected)}"
            )
        return array


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    """One stderr line per distinct fallback in this process (a model_eval
    over many samples, or new weights, would otherwise repeat it)."""
    if message in _WARNED:
        return
    _WARNED.add(message)
    print(f"warning: {message}", file=sys.stderr, flush=True)


def fit_weight(name: str, array: np.ndarray, expected) -> np.ndarray:
    """A weight in its declared shape (npz files may hold it flattened)."""
    if expected is None or array.shape == expected:
        return array
    if array.size != math.prod(expected):
        raise TpucError(
            f"weight '{name}' has shape {list(array.shape)}, the IR declares {list(expected)}"
        )
    return array.reshape(expected)


def _progress(steps: list[Step], enabled: bool, title: str = "TOP interpreter") -> Iterable[Step]:
    if not enabled:
        return steps
    from tqdm import tqdm

    return tqdm(steps, desc=title, unit="op", leave=False)


def run_top(
    module: ModuleOp,
    weights: Mapping[str, np.ndarray],
    inputs: Mapping[str, np.ndarray],
    *,
    dump_all: bool = False,
    progress: bool = False,
    native: bool = False,
) -> dict[str, np.ndarray]:
    """Run `func @main` of a TOP module; return its outputs by tensor name
    (with `dump_all`, every tensor: inputs and each op's results). Every op
    runs in tpuc's kernels unless `native` (see `accelerator`)."""
    interp = TopInterpreter(module, native=native)
    return interp.run(weights, inputs, dump_all=dump_all, progress=progress)
