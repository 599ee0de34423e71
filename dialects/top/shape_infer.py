"""Shape inference on one op: the rule its class declares, applied to its
operand shapes.

Frontends build ops with `tensor<*xf32>` results and call `infer_op_shapes`
on each op as they go; the `shape-infer` pass does the same over a whole
module. The rules live in `shape_rules*.py`; each TOP op names its own
(`HasShapeRule`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import NoneType, TensorType, UnrankedTensorType, f32
from xdsl.ir import Attribute, Operation, SSAValue

from tpuc.base.errors import TpucError
from tpuc.dialects import top
from tpuc.dialects.quant import CalibratedQuantizedType
from tpuc.dialects.top.shape_rules import Shape, ShapeError, ShapeRule, fmt
from tpuc.dialects.traits import HasShapeRule

__all__ = ["ShapeError", "infer_op_shapes", "set_type", "shape_rule_of"]


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
    """The shape rule an op class declares (its `HasShapeRule` trait; None:
    its results keep their types)."""
    trait = op_class.get_trait(HasShapeRule)
    return trait.rule if trait is not None else None


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
