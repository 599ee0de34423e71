"""shape-infer: give every TOP result its static shape.

The frontends build ops with `tensor<*xf32>` results and call
`infer_op_shapes` on each op as they go; the pass does the same over a
whole module (e.g. after an edit by hand) and then brings each function's
type in line with what it returns. The rules live in `shape_rules*.py`,
one per op class.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, NoneType, TensorType, UnrankedTensorType, f32
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from tpuc.dialects import top
from tpuc.dialects.quant import CalibratedQuantizedType
from tpuc.errors import TpucError
from tpuc.passes import shape_rules_data, shape_rules_nn  # noqa: F401  (they register rules)
from tpuc.passes.shape_rules import SHAPE_RULES, Shape, ShapeError, ShapeRule, fmt, shape_rule

__all__ = [
    "SHAPE_RULES",
    "ShapeError",
    "ShapeInferPass",
    "infer_op_shapes",
    "shape_rule",
    "shape_rule_of",
]


def describe(op: Operation) -> str:
    """`top.Conv 'conv1'`: the op kind and its tensor name, for messages."""
    name = op.attributes.get("name")
    label = getattr(name, "data", None)
    return op.name if label is None else f"{op.name} '{label}'"


def operand_shapes(op: Operation) -> tuple[Shape | None, ...] | None:
    """Static operand shapes (None for a `none` operand), or None when some
    operand has no static shape yet."""
    shapes: list[Shape | None] = []
    for operand in op.operands:
        kind = operand.type
        if isinstance(kind, NoneType):
            shapes.append(None)
            continue
        if not isinstance(kind, TensorType):
            return None
        shape = tuple(kind.get_shape())
        if any(d < 0 for d in shape):
            return None
        shapes.append(shape)
    return tuple(shapes)


def _element_type(op: Operation, old: Attribute) -> Attribute:
    """Keep the element type a result already has (f32 by default); a
    top.Input result takes its operand's type whole."""
    if isinstance(op, top.InputOp):
        if isinstance(old, TensorType) and isinstance(old.element_type, CalibratedQuantizedType):
            return old.element_type  # its calibrated range, set by import-calibration-table
        return op.operands[0].type.element_type  # static: the rule ran
    if isinstance(old, TensorType | UnrankedTensorType):
        return old.element_type
    return f32


def set_type(value: SSAValue, new_type: Attribute) -> None:
    """Retype `value` in place. xDSL's `replace_value_with_new_type` makes a
    new SSA value instead, which would leave stale the values a frontend
    holds while it builds the graph; the type is the only thing changing."""
    value._type = new_type  # pyright: ignore[reportPrivateUsage]


def shape_rule_of(op_class: type[Operation]) -> ShapeRule | None:
    """The shape rule of an op class (None: its results keep their types)."""
    return SHAPE_RULES.get(op_class)


def infer_op_shapes(op: Operation) -> None:
    """Set the result types of `op` from its operand shapes.

    Ops without a rule (top.Weight, top.None, non-TOP ops) and ops with an
    operand of unknown shape keep their result types. Raises TpucError
    when the operands or attributes do not fit together."""
    rule = shape_rule_of(type(op))
    if rule is None:
        return
    shapes = operand_shapes(op)
    if shapes is None:
        return
    if shapes and shapes[0] is None:
        raise TpucError(f"shape-infer: {describe(op)}: its first operand is none")
    try:
        results = rule(op, shapes)
    except ShapeError as exc:
        raise TpucError(f"shape-infer: {describe(op)}: {exc}") from None
    if len(results) != len(op.results):
        raise TpucError(
            f"shape-infer: {describe(op)}: has {len(op.results)} results, "
            f"its rule gives {len(results)}"
        )
    for result, shape in zip(op.results, results, strict=True):
        if any(d < 0 for d in shape):
            raise TpucError(f"shape-infer: {describe(op)}: negative result shape {fmt(shape)}")
        set_type(result, TensorType(_element_type(op, result.type), shape))


def infer_function(func: FuncOp) -> None:
    """Infer every op of `func` in order, then update its function type."""
    for op in func.walk():
        infer_op_shapes(op)
    if not func.is_declaration:
        func.update_function_type()


@dataclass(frozen=True)
class ShapeInferPass(ModulePass):
    """Fill in the shape of every TOP result and each function's type."""

    name = "shape-infer"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.module_state import ModuleState, require_state

        require_state(op, "shape-infer", ModuleState.TOP_F32, ModuleState.TOP_CALIBRATED)
        for func in op.walk():
            if isinstance(func, FuncOp):
                infer_function(func)
