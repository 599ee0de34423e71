"""strip-io-quant: keep a network's quantized inputs and outputs (TPU-MLIR's
StripIOQuant; model_deploy.py --quant_input / --quant_output).

Lowering converts at the edges: a tpu.Cast after each f32 input (real ->
stored, e.g. i8) and one before each output (stored -> f32). A board that
already holds the stored values (a camera pipeline writing int8, the next
network reading them) pays for those conversions on its CPU. This pass
removes them, as TPU-MLIR does:

- input i (1-based; every input when the list is empty): when its top.Input
  has one user, a plain tpu.Cast to a quantized type (or f32 -> f16/bf16),
  the Input and the function argument take the Cast's type and the Cast goes;
- output j: when it is a plain tpu.Cast from a quantized type (or
  f16/bf16 -> f32) used only by the return, the return takes its operand
  (its name, e.g. `logits_i8`, is then the network's output name).

"Plain": no `to` conversion and the default rounding (the one the runtimes
use to quantize a real input). What cannot be stripped stays as it is
(TPU-MLIR leaves it silently; `plan` says why, for model_deploy to warn).
An index beyond the network's inputs or outputs is an error. The module
stays TPU_LOWERED: TPU-MLIR runs this right before weight-reorder, after the
TPU module was checked with its casts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, ModuleOp
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from tpuc.base.errors import TpucError
from tpuc.dialects import top, tpu
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.dialects.top.shape_infer import set_type
from tpuc.ir.core import element_of, main_function

DEFAULT_ROUND = "HalfAwayFromZero"


@dataclass
class Edge:
    """One network input or output and what the pass does with it."""

    index: int  # 1-based, as the lists give it
    name: str  # the tensor's name now (an output: its Cast's)
    output: bool = False
    cast: Operation | None = None  # the Cast to remove (None: kept, see `why`)
    why: str = ""
    element: Attribute | None = None  # the kept tensor's element type, once stripped
    kept_name: str = ""  # the bmodel tensor's name once stripped (an output: e.g. `logits_i8`)
    stored_name: str = ""  # the TPU module's tensor of the stored values (`input_i8`, `logits_i8`)

    def take(self, cast: Operation, element: Attribute) -> Edge:
        """Mark `cast` for removal (names read now: the Cast goes later)."""
        self.cast, self.element = cast, element
        if self.output:
            operand = cast.operands[0]
            self.kept_name = self.stored_name = operand.owner.names[operand.index]  # type: ignore[union-attr]
        else:
            self.kept_name, self.stored_name = self.name, cast.names[0]  # type: ignore[attr-defined]
        return self


@dataclass
class Plan:
    """The inputs and outputs asked for, each strippable (cast set) or not."""

    inputs: list[Edge] = field(default_factory=list)
    outputs: list[Edge] = field(default_factory=list)

    def stripped(self) -> list[Edge]:
        return [e for e in self.inputs + self.outputs if e.cast is not None]

    def kept(self) -> list[Edge]:
        return [e for e in self.inputs + self.outputs if e.cast is None]


def parse_indices(text: str, flag: str) -> tuple[int, ...]:
    """'1,3' -> (1, 3): 1-based indices (empty: all)."""
    items = [s.strip() for s in text.split(",") if s.strip()]
    found = []
    for item in items:
        if not item.isdigit() or int(item) < 1:
            raise TpucError(f"{flag}: '{item}' is not an index (1-based, e.g. 1,3)")
        found.append(int(item))
    return tuple(found)


def check_indices(
    module: ModuleOp, inputs: Sequence[int], outputs: Sequence[int], dashes: str = ""
) -> None:
    """Every index names an input / output of func @main (1-based);
    `dashes`: '--' when the lists came as model_deploy.py flags."""
    body = main_function(module).body.block
    counts = {
        "quant_input_list": (inputs, sum(isinstance(o, top.InputOp) for o in body.ops), "input"),
        "quant_output_list": (outputs, len(_returned(module)), "output"),
    }
    for flag, (indices, count, what) in counts.items():
        bad = [i for i in indices if not 1 <= i <= count]
        if bad:
            raise TpucError(
                f"{dashes}{flag}: {', '.join(map(str, bad))} out of range; the network has "
                f"{count} {what}(s), numbered from 1"
            )


def _returned(module: ModuleOp) -> list[SSAValue]:
    ret = main_function(module).body.block.last_op
    return list(ret.operands) if isinstance(ret, func.ReturnOp) else []


def _plain(cast: Operation) -> str:
    """Why a Cast cannot go ('' when it can)."""
    if not isinstance(cast, tpu.CastOp):
        return f"no Cast to remove (its user is {cast.name})"
    if cast.value("to"):
        return f"its Cast converts values (to = {cast.value('to')})"
    mode = cast.value("round_mode")
    if mode and mode != DEFAULT_ROUND:
        return f"its Cast rounds {mode}"
    return ""


def _input_edge(index: int, op: top.InputOp) -> Edge:
    edge = Edge(index, op.names[0])
    uses = list(op.results[0].uses)
    if len(uses) != 1:
        edge.why = f"it has {len(uses)} users, not one Cast"  # TPU-MLIR's condition too
        return edge
    cast = uses[0].operation
    edge.why = _plain(cast)
    if edge.why:
        return edge
    before, after = element_of(cast.operands[0]), element_of(cast.results[0])
    quantized = isinstance(after, UniformQuantizedType)
    halved = isinstance(before, Float32Type) and isinstance(after, Float16Type | BFloat16Type)
    if not (quantized or halved):
        edge.why = f"its Cast gives {after}, not a quantized or f16/bf16 type"
        return edge
    return edge.take(cast, after)


def _output_edge(index: int, value: SSAValue, returned: list[SSAValue]) -> Edge:
    owner = value.owner
    name = owner.names[value.index] if hasattr(owner, "names") else f"output {index}"
    edge = Edge(index, name, output=True)
    if not isinstance(owner, tpu.CastOp):
        what = getattr(owner, "name", "an argument")
        edge.why = f"it is computed by {what} (no Cast to remove)"
        return edge
    edge.why = _plain(owner)
    if edge.why:
        return edge
    if len(list(value.uses)) != 1 or returned.count(value) != 1:
        edge.why = "its Cast has other users"
        return edge
    before, after = element_of(owner.operands[0]), element_of(value)
    quantized = isinstance(before, UniformQuantizedType)
    halved = isinstance(before, Float16Type | BFloat16Type) and isinstance(after, Float32Type)
    if not (quantized or halved):
        edge.why = f"its Cast reads {before}, not a quantized or f16/bf16 type"
        return edge
    return edge.take(owner, before)


def plan(
    module: ModuleOp,
    quant_input: bool,
    quant_output: bool,
    input_list: Sequence[int] = (),
    output_list: Sequence[int] = (),
) -> Plan:
    """What `strip` would do, without changing the module."""
    check_indices(module, input_list, output_list)
    found = Plan()
    body = main_function(module).body.block
    if quant_input:
        inputs = [o for o in body.ops if isinstance(o, top.InputOp)]
        for i, op in enumerate(inputs, 1):
            if not input_list or i in input_list:
                found.inputs.append(_input_edge(i, op))
    if quant_output:
        returned = _returned(module)
        for j, value in enumerate(returned, 1):
            if not output_list or j in output_list:
                found.outputs.append(_output_edge(j, value, returned))
    return found


def strip(module: ModuleOp, chosen: Plan) -> None:
    """Remove the planned Casts; the function's type follows."""
    main = main_function(module)
    for edge in chosen.inputs:
        if edge.cast is None:
            continue
        cast, op = edge.cast, edge.cast.operands[0].owner
        new_type = cast.results[0].type
        assert isinstance(op, top.InputOp)
        set_type(op.results[0], new_type)
        if isinstance(op.operands[0], BlockArgument):
            set_type(op.operands[0], new_type)
        cast.results[0].replace_all_uses_with(op.results[0])
        cast.detach()
        cast.erase()
    for edge in chosen.outputs:
        if edge.cast is None:
            continue
        cast = edge.cast
        cast.results[0].replace_all_uses_with(cast.operands[0])
        cast.detach()
        cast.erase()
    main.update_function_type()


@dataclass(frozen=True)
class StripIOQuantPass(ModulePass):
    """Remove the Casts at the network's edges (see the module docstring);
    `quant_input_list` / `quant_output_list`: 1-based indices, '1,3'."""

    name = "strip-io-quant"

    quant_input: bool = False
    quant_output: bool = False
    quant_input_list: str = ""
    quant_output_list: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.base.module_state import ModuleState, require_state

        require_state(op, self.name, ModuleState.TPU_LOWERED)
        inputs = parse_indices(self.quant_input_list, "quant_input_list")
        outputs = parse_indices(self.quant_output_list, "quant_output_list")
        strip(op, plan(op, self.quant_input, self.quant_output, inputs, outputs))


__all__ = ["Edge", "Plan", "StripIOQuantPass", "check_indices", "parse_indices", "plan", "strip"]
