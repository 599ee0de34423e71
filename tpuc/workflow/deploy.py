"""The reusable steps of model_deploy.py: lower a TOP module for a chip, and
verify the TPU module against TOP results.

`lower` runs TPU-MLIR's lowering pipeline in place —
import-calibration-table (when a table is given), processor-assign,
convert-top-to-tpu, canonicalize — after checking the request against the
chip's data, so a bad combination fails before any work. `verify` runs the
TPU interpreter, compares its real values with a reference by tensor name
and, when they differ, finds the first layer in graph order whose tensor
falls below the tolerance (comparing every TPU tensor with TOP's).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tpuc.base.compare import CompareResult, TensorResult, Tolerance, Verdict
from tpuc.base.errors import TpucError
from tpuc.target.chips import Chip, get_chip

STEP = "model_deploy.py"


# --- lowering --------------------------------------------------------------------------


def check_target(
    chip_name: str, mode: str, asymmetric: bool, has_table: bool, qtable: Mapping[str, str]
) -> tuple[Chip, str]:
    """The chip and the upper-case default mode, once the chip's data says it
    can run them (and every mode of the quantize table); INT8 anywhere needs
    a calibration table."""
    chip = get_chip(chip_name)
    mode = mode.upper()
    chip.check_mode(mode)
    for layer_mode in sorted(set(qtable.values())):
        chip.check_mode(layer_mode)
    if asymmetric and not chip.asymmetric:
        raise TpucError(f"chip {chip.name} does not support asymmetric INT8 (--asymmetric)")
    if not has_table and (mode == "INT8" or "INT8" in qtable.values()):
        where = "--quantize INT8" if mode == "INT8" else "INT8 layers in the quantize table"
        raise TpucError(f"{where} need a calibration table (--calibration_table)")
    return chip, mode


def check_state(module: ModuleOp, source: str) -> None:
    """Only a TOP_F32 module (model_transform.py's) can be deployed."""
    from tpuc.base.module_state import ModuleState, state_of

    state = state_of(module)
    if state not in (None, ModuleState.TOP_F32):
        raise TpucError(
            f"{source}: module is in state {state}; {STEP} needs a TOP_F32 module "
            "(the --mlir written by model_transform.py)"
        )


def lower(
    module: ModuleOp,
    chip: str,
    mode: str,
    asymmetric: bool = False,
    cali_table: str | os.PathLike[str] | None = None,
    qtable: str | os.PathLike[str] | None = None,
    *,
    source: str = "module",
    before: Callable[[list[ModulePass]], None] | None = None,
    float_epilogue: bool = True,
) -> None:
    """Lower a TOP_F32 module (weights attached) in place to TPU_LOWERED.

    `before(passes)` is called once the request is checked, before the
    first pass runs (the tool prints the pipeline). `float_epilogue`: see
    ConvertTopToTpuPass (false for the native target)."""
    from tpuc.ir.qtable import read_qtable
    from tpuc.workflow.pipeline import deploy_passes, run_passes

    check_state(module, source)
    table = read_qtable(qtable, module) if qtable is not None else {}
    target, mode = check_target(chip, mode, asymmetric, cali_table is not None, table)
    passes = deploy_passes(target.name, mode, asymmetric, cali_table, qtable, float_epilogue)
    if before is not None:
        before(passes)
    run_passes(module, passes)


def deploy_prefix(name: str, chip: str, mode: str, asymmetric: bool) -> str:
    """TPU-MLIR's file prefix `<name>_<chip>_<mode>[_sym|_asym]` (INT8 only)."""
    prefix = f"{name}_{chip.lower()}_{mode.lower()}"
    if mode.upper() == "INT8":
        prefix += "_asym" if asymmetric else "_sym"
    return prefix


# --- matching TPU tensors with TOP tensors ----------------------------------------------

_TYPE_SUFFIX = re.compile(r"^(?P<base>.+)_(i8|u8|f16|bf16|f32)(_\d+)?$")
"""`<name>_<type>[_n]`: an output producer renamed by convert-top-to-tpu."""


def layer_names(module: ModuleOp, top_names: Iterable[str]) -> list[tuple[str, str]]:
    """(TPU tensor, TOP tensor) for every layer of the TPU module, in graph
    order: a TPU op keeps its TOP op's name, except an output producer
    renamed `<name>_<type>` (its f32 Cast took the name). Casts inserted
    between precisions are conversions, not layers, and are left out."""
    from tpuc.dialects import top, tpu
    from tpuc.dialects.base import TensorOp
    from tpuc.ir.core import main_function

    known = set(top_names)
    seen: set[str] = set()
    pairs = []
    for op in main_function(module).body.block.ops:
        if not isinstance(op, TensorOp) or isinstance(op, top.InputOp | top.WeightOp | top.NoneOp):
            continue
        for name in op.names:
            match = _TYPE_SUFFIX.match(name)
            if name in known:
                top_name = name
            elif match and match["base"] in known and not isinstance(op, tpu.CastOp):
                top_name = match["base"]
            else:
                continue
            if top_name not in seen:
                seen.add(top_name)
                pairs.append((name, top_name))
    return pairs


@dataclass(frozen=True)
class Layer:
    """The comparison of one layer's TPU tensor with its TOP tensor."""

    tpu_name: str
    top_name: str
    result: TensorResult

    def describe(self) -> str:
        s = self.result.similarity
        shown = f"'{self.top_name}'"
        if self.tpu_name != self.top_name:
            shown += f" (as '{self.tpu_name}')"
        if self.result.verdict is Verdict.NOT_MATCH:
            return f"{shown} (shape {list(self.result.shape)} vs {list(self.result.ref_shape)})"
        return f"{shown} (cos {s.cosine:.6f}, euclid {s.euclid:.6f})"


def first_failing_layer(
    layers: list[tuple[str, str]],
    tpu_values: Mapping[str, np.ndarray],
    top_values: Mapping[str, np.ndarray],
    tolerance: Tolerance,
    excepts: Iterable[str] = (),
) -> Layer | None:
    """The first layer, in graph order, whose tensor is below tolerance."""
    from tpuc.base.compare import compare_tensors

    skip = set(excepts)
    for tpu_name, top_name in layers:
        if top_name in skip or tpu_name not in tpu_values or top_name not in top_values:
            continue
        result = compare_tensors(top_name, tpu_values[tpu_name], top_values[top_name], tolerance)
        if not result.passed:
            return Layer(tpu_name, top_name, result)
    return None


# --- verification ---------------------------------------------------------------------


@dataclass
class Verification:
    """What `verify` found: the TPU real values to save, the comparison,
    and on failure the first layer below tolerance."""

    values: dict[str, np.ndarray]
    result: CompareResult
    layer: Layer | None = None
    searched: bool = False  # whether the layer search ran
    timings: dict[str, float] = field(default_factory=dict)
    stored: dict[str, np.ndarray] = field(default_factory=dict)  # `keep`: stored values

    @property
    def passed(self) -> bool:
        return self.result.passed

    def failure(self, label: str) -> str:
        """One line: where the comparison failed and the first layer below
        tolerance (`label` says what was deployed, e.g. "INT8")."""
        first = self.result.failures[0]
        why = _why(first, self.result.tolerance)
        line = f"{label} result differs from TOP ({why} at '{first.name}')"
        if self.layer is not None:
            return f"{line}; first layer below tolerance: {self.layer.describe()}"
        if self.searched:
            return f"{line}; no single layer falls below tolerance"
        return line


def _why(row: TensorResult, tol: Tolerance) -> str:
    s = row.similarity
    if row.verdict is Verdict.NOT_MATCH:
        return f"shape {list(row.shape)} vs reference {list(row.ref_shape or ())}"
    if not s.cosine > tol.cosine:
        return f"cos {_below(s.cosine, tol.cosine)} {_op(s.cosine, tol.cosine)} {tol.cosine!r}"
    return f"euclid {_below(s.euclid, tol.euclid)} {_op(s.euclid, tol.euclid)} {tol.euclid!r}"


def _op(value: float, limit: float) -> str:
    return "<" if value < limit else "<="


def _below(value: float, limit: float) -> str:
    """`value` with 6 decimals, or as many more as it takes to show that it
    does not exceed `limit` (0.99999996 must not print as 1.000000)."""
    for digits in range(6, 13):
        text = f"{value:.{digits}f}"
        if float(text) <= limit:
            return text
    return repr(value)


class _Clock:
    """Seconds spent per stage, in the order the stages first ran."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    def stage(self, name: str, fn: Callable[[], object]):
        start = time.perf_counter()
        try:
            return fn()
        finally:
            spent = time.perf_counter() - start
            self.timings[name] = self.timings.get(name, 0.0) + spent


def verify(
    tpu_module: ModuleOp,
    weights: Mapping[str, np.ndarray],
    inputs: Mapping[str, np.ndarray],
    tolerance: Tolerance,
    *,
    reference: Mapping[str, np.ndarray] | None = None,
    top_module: ModuleOp | None = None,
    excepts: Iterable[str] = (),
    compare_all: bool = False,
    progress: bool = False,
    keep: Collection[str] = (),
) -> Verification:
    """Run the TPU module on `inputs` and compare its real values (every
    tensor with `compare_all`, else the outputs) with `reference` (default:
    the TOP module run on the same inputs). On failure, compare layer by
    layer with TOP (the reference when it holds every layer, else a TOP run)
    to find the first one below tolerance. `weights` holds both modules'
    weights (lowering adds to the TOP store). The tensors named in `keep`
    are returned too: their stored values in `stored`, their real values
    with the others (the bmodel check of --quant_input/--quant_output)."""
    from tpuc.base.compare import compare_arrays
    from tpuc.interp.tpu_interpreter import TpuInterpreter

    if reference is None and top_module is None:
        raise TpucError("verify needs a reference or the TOP module")
    clock = _Clock()
    interp = TpuInterpreter(tpu_module)

    kept: dict[str, np.ndarray] = {}

    def observe(step, _args, results) -> None:
        for name, result in zip(step.names, results, strict=True):
            if name in keep:
                kept[name] = np.array(result, np.float32)

    def run_tpu(dump_all: bool) -> dict[str, np.ndarray]:
        watch = observe if keep and not kept else None
        stored = interp.run(weights, inputs, dump_all=dump_all, progress=progress, observe=watch)
        return interp.real_values(stored)

    values = clock.stage("TPU interpreter", lambda: run_tpu(compare_all))
    if reference is None:
        reference = clock.stage(
            "TOP interpreter", lambda: _run_top(top_module, weights, inputs, compare_all, progress)
        )
    skip = set(excepts) | set(inputs)
    result = clock.stage(
        "compare",
        lambda: compare_arrays(values, reference, tolerance, excepts=skip, order=list(values)),
    )
    if not result.rows:
        raise TpucError("no tensor of the TPU interpreter matches a reference tensor by name")
    check = Verification(values, result, timings=clock.timings, stored=kept)
    values.update({k: v for k, v in interp.real_values(kept).items() if k not in values})
    if result.passed:
        return check

    def search() -> Layer | None:
        tpu_all = values if compare_all else run_tpu(True)
        layers = layer_names(tpu_module, _top_tensor_names(top_module, reference))
        top_all = reference
        if top_module is not None and any(top not in reference for _, top in layers):
            top_all = _run_top(top_module, weights, inputs, True, progress)
        return first_failing_layer(layers, tpu_all, top_all, tolerance, skip)

    check.layer = clock.stage("layer search", search)
    check.searched = True
    return check


def _top_tensor_names(top_module: ModuleOp | None, reference: Mapping[str, np.ndarray]):
    """Every tensor name of the TOP module (the reference's when none)."""
    if top_module is None:
        return set(reference)
    from tpuc.dialects.base import TensorOp

    return {name for op in top_module.walk() if isinstance(op, TensorOp) for name in op.names}


def _run_top(module, weights, inputs, dump_all: bool, progress: bool) -> dict[str, np.ndarray]:
    from tpuc.interp.accelerator import accelerated
    from tpuc.interp.top_interpreter import run_top

    native = accelerated("model_deploy")
    return run_top(module, weights, inputs, dump_all=dump_all, progress=progress, native=native)
