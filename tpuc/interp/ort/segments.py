"""Runs of consecutive TOP ops with ONNX forms, each one onnxruntime
session: the partition of a function body, the graphs and the sessions.

Every result of a run is a graph output when tensors are observed (the
session computes each TOP tensor, nothing fused across them that would
change its bits); otherwise only those read after the run. A run is cut
where its results pass MAX_RUN_BYTES, so observing every tensor holds at
most that much beyond what the numpy path keeps alive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpuc.dialects import top
from tpuc.dialects.base import shape_of
from tpuc.interp.ort import rules  # noqa: F401  (registers the rules)
from tpuc.interp.ort.graph import EXPORTS, OPSET, GraphBuilder, Tensor
from tpuc.interp.top_ops.registry import LIBRARY
from tpuc.ir.core import tensor_names

MAX_RUN_BYTES = 256 << 20
"""A run's results together stay under this (when the steps allow)."""


@dataclass
class Run:
    """Consecutive steps run by one session."""

    steps: list[int]
    nodes: list = field(default_factory=list)
    initializers: dict[str, np.ndarray] = field(default_factory=dict)  # small constants
    weights: dict[str, np.ndarray] = field(default_factory=dict)  # shared, not copied
    inputs: list[SSAValue] = field(default_factory=list)  # activations from before
    results: list[SSAValue] = field(default_factory=list)  # every result, in order
    live_out: list[SSAValue] = field(default_factory=list)  # read after the run
    sessions: dict[tuple[bool, int], Any] = field(default_factory=dict)
    handed: list = field(default_factory=list)  # OrtValues over `weights`, kept with the sessions

    def outputs(self, every: bool) -> list[SSAValue]:
        """What a session returns: every result, or those read after the run."""
        return self.results if every else self.live_out


class NativeRuns:
    """The runs of one interpreter's steps for one set of weights, and
    their sessions (made on first use, per thread count and output set)."""

    def __init__(self, steps: Sequence, weights: Mapping[str, np.ndarray], returned, last_use):
        self.profile: str | None = None  # a file prefix: sessions made after this profile
        self.names: dict[SSAValue, str] = {}
        self.weights = weights
        self.weight_ids: dict[str, np.ndarray] = {}
        self.starts: dict[int, Run] = {}
        self.covered: set[int] = set()
        self.failures: list[str] = []  # runs left to numpy: why
        exported = [self._export(step) for step in steps]
        for run in self._group(steps, exported):
            self._close(run, steps, exported, returned, last_use)

    # --- partition -------------------------------------------------------------------

    def _name(self, value: SSAValue) -> str:
        found = self.names.get(value)
        if found is None:
            found = self.names[value] = f"v{len(self.names)}"
        return found

    def _operand(self, value: SSAValue, shape) -> Tensor | None:
        owner = value.owner
        if isinstance(owner, top.NoneOp):
            return None
        if isinstance(owner, top.WeightOp):
            name = owner.names[0]
            array = self.weights.get(name)
            if array is None:
                raise KeyError(name)
            self.weight_ids[name] = array
            const = np.ascontiguousarray(array, dtype=np.float32).reshape(shape)
            return Tensor(f"w:{name}", shape, const)
        return Tensor(self._name(value), shape)

    def _export(self, step) -> tuple[list, dict, dict] | None:
        """The step's ONNX nodes, constants and weights, or None (it runs in
        numpy, which also names any error in its attributes or weights)."""
        entry = LIBRARY.get(type(step.op))
        rule = EXPORTS.get(entry[1]) if entry else None
        if step.leaf or rule is None or any(s is None for s in step.shapes):
            return None
        shapes = [shape_of(v) for v in step.operands]
        if any(s is None and not _none(v) for v, s in zip(step.operands, shapes, strict=True)):
            return None
        try:
            operands = [self._operand(v, s) for v, s in zip(step.operands, shapes, strict=True)]
        except (KeyError, ValueError):
            return None  # a missing or misshapen weight: numpy names it
        outs = [self._name(v) for v in step.results]
        g = GraphBuilder(step.names[0], dict(zip(outs, step.shapes, strict=True)))
        try:
            record = entry[0](step.op)
        except Exception:  # noqa: BLE001  (the numpy kernel reports it with the op's name)
            return None
        if not rule(record, g, operands, outs):
            return None
        read = {name for node in g.nodes for name in node.input}
        weights = {
            t.name: t.const
            for t in operands
            if t is not None and t.const is not None and t.name in read
        }
        return g.nodes, g.initializers, weights

    @staticmethod
    def _group(steps, exported) -> list[Run]:
        """Maximal runs of exported steps (weights inside are skipped over),
        cut where their result bytes pass MAX_RUN_BYTES."""
        runs: list[Run] = []
        current: Run | None = None
        size = 0
        for i, step in enumerate(steps):
            if exported[i] is None:
                if not isinstance(step.op, top.WeightOp | top.NoneOp):
                    current = None  # a run reads inputs computed before it
                continue
            nbytes = sum(4 * math.prod(s) for s in step.shapes)
            if current is None or (size + nbytes > MAX_RUN_BYTES and current.steps):
                current, size = Run([]), 0
                runs.append(current)
            current.steps.append(i)
            size += nbytes
        return runs

    def _close(self, run: Run, steps, exported, returned, last_use) -> None:
        inside = set(run.steps)
        produced: set[SSAValue] = set()
        last = run.steps[-1]
        for i in run.steps:
            nodes, inits, weights = exported[i]
            run.nodes += nodes
            run.initializers.update(inits)
            run.weights.update(weights)
            for value in steps[i].operands:
                if value in produced or value in run.inputs:
                    continue
                owner = value.owner
                if isinstance(owner, top.WeightOp | top.NoneOp):
                    continue
                run.inputs.append(value)
            run.results += steps[i].results
            produced.update(steps[i].results)
        run.live_out = [v for v in run.results if v in returned or last_use.get(v, -1) > last]
        self.starts[run.steps[0]] = run
        self.covered |= inside

    # --- execution -------------------------------------------------------------------

    def valid_for(self, weights: Mapping[str, np.ndarray]) -> bool:
        """Whether these runs were made from the same weight arrays (arrays
        changed in place are not noticed: sessions keep packed copies)."""
        return all(weights.get(name) is array for name, array in self.weight_ids.items())

    def run(self, run: Run, env: Mapping[SSAValue, np.ndarray], every: bool, threads: int):
        """The run's results (all of them when `every`) by value; None when
        onnxruntime would not load it: it is dropped, its ops go to numpy."""
        key = (every, threads)
        session = run.sessions.get(key)
        if session is None:
            session = self._make_session(run, every, threads)
            if session is None:
                self.drop(run)
                return None
            run.sessions[key] = session
        wanted = run.outputs(every)
        feeds = {self.names[v]: np.ascontiguousarray(env[v]) for v in run.inputs}
        outputs = session.run([self.names[v] for v in wanted], feeds)
        return dict(zip(wanted, outputs, strict=True))

    def _make_session(self, run: Run, every: bool, threads: int):
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper

        def info(value: SSAValue):
            shape = list(shape_of(value) or [])
            return helper.make_tensor_value_info(self.names[value], TensorProto.FLOAT, shape)

        graph = helper.make_graph(
            run.nodes,
            "native_run",
            [info(v) for v in run.inputs],
            [info(v) for v in run.outputs(every)],
            [numpy_helper.from_array(a, n) for n, a in run.initializers.items()]
            + [_external(name, array) for name, array in run.weights.items()],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # no arena or planned buffers kept between runs: numbers from resnet50
        # with every tensor observed, 60 MB less at the same speed
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        if self.profile:
            options.enable_profiling = True
            options.profile_file_prefix = self.profile
        if not run.handed:  # onnxruntime reads these buffers for the sessions' life
            run.handed = [ort.OrtValue.ortvalue_from_numpy(a) for a in run.weights.values()]
        options.add_external_initializers(list(run.weights), run.handed)
        try:
            return ort.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # noqa: BLE001  (an export rule's bug: its ops run in numpy)
            self.failures.append(_failure(run, exc))
            return None

    def end_profiling(self) -> list[str]:
        """The profile files of the sessions made with `profile` set (nodes
        are named '<TOP tensor>#<k>')."""
        return [
            session.end_profiling()
            for run in self.starts.values()
            for session in run.sessions.values()
            if session.get_session_options().enable_profiling
        ]

    def drop(self, run: Run) -> None:
        """Leave `run`'s steps to the numpy kernels from now on."""
        self.starts.pop(run.steps[0], None)
        self.covered -= set(run.steps)


def _external(name: str, array: np.ndarray):
    """A weight initializer whose data the session options hand over in
    memory (no copy into the serialized model)."""
    from onnx import TensorProto

    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=array.shape)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "tpuc-memory"), ("offset", "0"), ("length", str(array.nbytes))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def _failure(run: Run, exc: Exception) -> str:
    """One line: the run's first tensor, its ops, onnxruntime's reason."""
    ops = list(dict.fromkeys(_op_of(v) for v in run.results))
    kinds = ", ".join(dict.fromkeys(op.name for op in ops))
    reason = " ".join(str(exc).split())[:200]
    return (
        f"onnxruntime would not load the run of {len(ops)} ops from "
        f"'{tensor_names(ops[0])[0]}' ({kinds}): they run in tpuc's kernels ({reason})"
    )


def _none(value: SSAValue) -> bool:
    return isinstance(value.owner, top.NoneOp)


def _op_of(value: SSAValue) -> Operation:
    owner = value.owner
    assert isinstance(owner, Operation)
    return owner
