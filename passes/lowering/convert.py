"""convert-top-to-tpu: TOP (F32 or calibrated) → TPU_LOWERED for one chip.

Each op runs in the module's mode unless the quantize table names another
for it; an INT8 op without an accurate integer form on this chip runs in
the chip's float fallback mode instead (docs/lowering.md lists them). Rules
come from the registry; casts appear wherever precision changes; outputs
return as f32 under their TOP names.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType, f32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from tpuc.base.errors import TpucError, UnsupportedOpsError
from tpuc.dialects import top, tpu
from tpuc.dialects.base import TensorOp
from tpuc.dialects.quant import CalibratedQuantizedType
from tpuc.dialects.traits import Leaf
from tpuc.ir.core import element_of
from tpuc.passes.lowering.context import Lowering, LoweringState, type_tag
from tpuc.passes.lowering.registry import PREPARERS, Rule, fallback_mode, find_rule
from tpuc.passes.shape_infer import set_type
from tpuc.target.chips import Chip, get_chip


def op_modes(
    ops: list[TensorOp], default: str, qtable: dict[str, str], chip: Chip
) -> tuple[dict[TensorOp, str], dict[TensorOp, Rule]]:
    """The mode each op runs in (the qtable's, else the default; INT8 falls
    back to the chip's float mode where no INT8 rule exists) and its rule,
    chosen before any type changes: a rule's `when=` may read the calibrated
    types of its operands, which lowering replaces. Data movement the qtable
    does not name runs in its neighbours' precision (`_moves_follow`)."""
    modes, rules = {}, {}
    unsupported: dict[str, list[str]] = {}
    for op in ops:
        mode = qtable.get(op.names[0], default)
        chip.check_mode(mode)
        rule = find_rule(op, mode, chip)
        fallback = fallback_mode(mode, chip)
        if rule is None and fallback is not None:
            mode = fallback
            rule = find_rule(op, mode, chip)
        if rule is None:
            unsupported.setdefault(op.name, []).append(op.names[0])
        modes[op], rules[op] = mode, rule
    if unsupported:
        raise UnsupportedOpsError(f"convert-top-to-tpu ({chip.name})", unsupported)
    _moves_follow(ops, modes, rules, qtable, chip)
    return modes, rules


def _moves_follow(
    ops: list[TensorOp],
    modes: dict[TensorOp, str],
    rules: dict[TensorOp, Rule],
    qtable: dict[str, str],
    chip: Chip,
) -> None:
    """A value move (reshape, permute, slice …) the qtable does not name
    takes its producer's float mode, and an INT8 one whose readers all run
    in one float mode takes theirs: it changes no value, so in INT8 between
    float layers it would only round the tensor to its INT8 grid, losing at
    the boundary what neither neighbour loses (and an INT8 conv before it
    could not hand its accumulator to the float reader directly). A move
    that followed a float producer but whose readers all run INT8 goes back
    to INT8 (`_int8_readers`)."""
    free = [op for op in ops if isinstance(op, top.VALUE_MOVES) and op.names[0] not in qtable]
    own = {op: (modes[op], rules[op]) for op in free}
    for op in free:  # graph order: a chain of moves follows its first producer
        producer = op.operands[0].owner if op.operands else None
        _follow(op, modes.get(producer), modes, rules, chip)
    for op in reversed(free):  # readers first: a chain follows its last reader
        readers = {modes.get(use.operation) for r in op.results for use in r.uses}
        if modes[op] == "INT8" and len(readers) == 1:
            _follow(op, readers.pop(), modes, rules, chip)
        elif readers == {"INT8"} and own[op][0] == "INT8":
            _int8_readers(op, own[op][1], modes, rules)
    _elementwise_follow(ops, modes, rules, qtable, chip)


def _int8_readers(op: TensorOp, rule: Rule, modes: dict, rules: dict) -> None:
    """Run a move between a float producer and INT8 readers in INT8: the
    cast to int8 then comes before it, and it moves a quarter of the bytes
    (ppocr_rec's transpose_50 after its f32 LayerNorm, [40, 120] -> [120, 40],
    as TPU-MLIR does; a move keeps its input's type, and calibration gives a
    move the range of its input, so the same integers reach the readers)."""
    modes[op], rules[op] = "INT8", rule


ELEMENTWISE = (*top.ELEMENTWISE_UNARY, top.AddOp, top.SubOp, top.MulOp, top.MaxOp, top.MinOp,
               top.DivOp)  # fmt: skip
"""Ops an INT8 elementwise region (int8_region.py) is made of."""


def _elementwise_follow(
    ops: list[TensorOp],
    modes: dict[TensorOp, str],
    rules: dict[TensorOp, Rule],
    qtable: dict[str, str],
    chip: Chip,
) -> None:
    """An elementwise op the qtable does not name, whose readers all run in
    one float mode *by choice* (the qtable's, or by following), takes it.
    In INT8 its result would be rounded to an INT8 grid only to be read in
    float, a rounding neither pure mode has: in INT8 the whole chain
    (x·clip(x+3, 0, 6)/6) is one table with one rounding at its end, in
    F16 none; with its last op alone in F16 the rest became a table that
    rounds the gate clip(x+3, 0, 6)/6 to steps of 1/127 (PP-PicoDet's
    decomposed HardSwish). Readers first, so a chain follows its end; a
    float fallback reader (the chip's, not a choice) changes nothing."""
    chosen = {op for op in ops if qtable.get(op.names[0], "INT8") != "INT8"}
    chosen.update(op for op in ops if isinstance(op, top.VALUE_MOVES) and modes[op] != "INT8")
    for op in reversed(ops):
        if not isinstance(op, ELEMENTWISE) or op.names[0] in qtable or modes[op] != "INT8":
            continue
        readers = [use.operation for r in op.results for use in r.uses]
        if not readers or not all(r in chosen for r in readers):
            continue
        wanted = {modes[r] for r in readers}
        if len(wanted) == 1:
            _follow(op, wanted.pop(), modes, rules, chip)
            if modes[op] != "INT8":
                chosen.add(op)


def _follow(op: TensorOp, mode: str | None, modes: dict, rules: dict, chip: Chip) -> None:
    """Run `op` in float `mode` when it has a rule for it."""
    if mode is None or mode == "INT8" or mode == modes[op]:
        return
    rule = find_rule(op, mode, chip)
    if rule is not None:
        modes[op], rules[op] = mode, rule


def _calibrated(ops: list[TensorOp]) -> dict[str, CalibratedQuantizedType]:
    ranges = {}
    for op in ops:
        for name, value in zip(op.names, op.results, strict=True):
            element = element_of(value)
            if isinstance(element, CalibratedQuantizedType):
                ranges[name] = element
    return ranges


def _strip_calibration(op: TensorOp) -> None:
    """Input results return to their float type (the Cast after them
    carries the quantization)."""
    for value in op.results:
        element = element_of(value)
        if isinstance(element, CalibratedQuantizedType):
            set_type(value, TensorType(element.expressed_type, value.type.get_shape()))


@dataclass(frozen=True)
class ConvertTopToTpuPass(ModulePass):
    """Lower every TOP op for `module.chip` in `module.mode`."""

    name = "convert-top-to-tpu"

    qtable: str = ""
    asymmetric: bool = False
    float_epilogue: bool = True
    """An INT8 conv/matmul that only float layers read may hand them its
    dequantized accumulator (on a chip with `float_epilogue`); false: a
    convolution requantizes to int8 and a Cast dequantizes, as TPU-MLIR
    lowers it (the native target, where the epilogue is an int32 result and
    two more DDR passes the layer groups cannot hold); a matmul keeps the
    epilogue (an fc's few values: cheaper than its int8 result and Cast)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.base.module_state import ModuleState, advance_state, require_state
        from tpuc.ir.module_io import module_attr, set_module_attr
        from tpuc.ir.weights import weights_of

        require_state(op, self.name, ModuleState.TOP_F32, ModuleState.TOP_CALIBRATED)
        chip_name, mode = module_attr(op, "chip", "ALL"), module_attr(op, "mode")
        if chip_name == "ALL" or mode is None:
            raise TpucError(f"{self.name}: no chip/mode assigned; run processor-assign first")
        chip = get_chip(chip_name)
        if self.asymmetric and not chip.asymmetric:
            raise TpucError(f"chip {chip.name} does not support asymmetric INT8")
        qtable = _read_qtable(self.qtable, op)
        funcs = [f for f in op.ops if isinstance(f, FuncOp)]
        for func in funcs:
            ops = [o for o in func.body.block.ops if isinstance(o, TensorOp)]
            lowered = [o for o in ops if not o.has_trait(Leaf)]
            modes, rules = op_modes(lowered, mode, qtable, chip)
            calibrated = _calibrated(ops)
            if "INT8" in modes.values() and not calibrated:
                raise TpucError(
                    f"{self.name}: INT8 needs calibrated tensors; "
                    "give model_deploy.py --calibration_table"
                )
            names = {n for o in ops for n in o.names}
            state = LoweringState(
                chip,
                self.asymmetric,
                weights_of(op),
                calibrated,
                names,
                modes=modes,
                float_epilogue=self.float_epilogue,
            )
            for leaf in ops:
                if isinstance(leaf, top.InputOp):
                    _strip_calibration(leaf)
            for prepare in PREPARERS:
                prepare(state, lowered, modes)
            for top_op in lowered:
                _lower_one(state, top_op, modes[top_op], rules[top_op])
            _return_f32(state, func)
            _erase_dead_ops(func)
            func.update_function_type()
        set_module_attr(op, "asymmetric", bool(self.asymmetric))
        advance_state(op, ModuleState.TPU_LOWERED, skip=True)
        op.attributes["module.mode"] = StringAttr(mode)


def _read_qtable(path: str, module: ModuleOp) -> dict[str, str]:
    if not path:
        return {}
    from tpuc.ir.qtable import read_qtable

    return read_qtable(path, module)


def _lower_one(state: LoweringState, op: TensorOp, mode: str, rule: Rule) -> None:
    lw = Lowering(state, op, mode)
    built = rule(lw)
    last = built[-1] if isinstance(built, list | tuple) else built
    for old, new in zip(op.results, last.results, strict=True):
        old.replace_all_uses_with(new)
        state.replaced[old] = new
    Rewriter.erase_op(op)


def _return_f32(state: LoweringState, func: FuncOp) -> None:
    """Outputs leave in f32 under their TOP names; a quantized or half
    producer is renamed `<name>_<type>` and a Cast takes its name."""
    ret = func.body.block.last_op
    if not isinstance(ret, ReturnOp):
        return
    for i, value in enumerate(ret.operands):
        if element_of(value) == f32 or not isinstance(value.owner, TensorOp):
            continue
        owner = value.owner
        name = owner.names[value.index]
        renamed = state.fresh_name(f"{name}_{type_tag(element_of(value))}")
        _rename(owner, value.index, renamed)
        cast = tpu.CastOp.make(
            [value], name, result_types=[TensorType(f32, value.type.get_shape())]
        )
        Rewriter.insert_op(cast, _before_return(ret))
        ret.operands = [*ret.operands[:i], cast.results[0], *ret.operands[i + 1 :]]


def _rename(op: TensorOp, index: int, name: str) -> None:
    names = op.names
    names[index] = name
    if op.result_names is not None:
        op.set_value("result_names", names)
    if index == 0:
        op.attributes["name"] = StringAttr(name)


def _before_return(ret: ReturnOp):
    from xdsl.rewriter import InsertPoint

    return InsertPoint.before(ret)


def _erase_dead_ops(func: FuncOp) -> None:
    """Ops nothing reads any more (region members, weights replaced by
    quantized copies), last first so their operands die too."""
    for op in reversed(list(func.body.block.ops)):
        if isinstance(op, ReturnOp | top.InputOp) or any(r.uses for r in op.results):
            continue
        Rewriter.erase_op(op)


__all__ = ["ConvertTopToTpuPass", "op_modes"]
