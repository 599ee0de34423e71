"""TPU ops that mirror a TOP op: same operands, results and attributes.

A lowered op keeps the meaning of its TOP source (pads, axes, fused relu …),
so the float kernels run it unchanged and the lowering copies attributes
one to one; the TPU op only adds what the chip needs (requant parameters).
The mirror is built from the TOP op's IRDL definition, not by subclassing,
so `isinstance(op, top.ConvOp)` never matches a TPU op. `tpu_op` is the
class decorator every TPU op (`ops`, `mirrored`) is written with, so each
op is a named class in source while its mirrored fields cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from xdsl.irdl import (
    AttributeDef,
    IRDLOperation,
    OperandDef,
    OptAttributeDef,
    OptOperandDef,
    VarOperandDef,
    VarResultDef,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.irdl.constraints import RangeLengthConstraint, RangeOf
from xdsl.traits import OpTrait, Pure

from tpuc.dialects.traits import Mirrors

OpT = TypeVar("OpT", bound=IRDLOperation)

INHERITED = ("name", "result_names")  # declared by TensorOp itself


def _single(constr: Any) -> Any:
    """The element constraint of a single operand/result definition."""
    if isinstance(constr, RangeLengthConstraint):
        constr = constr.constraint
    return constr.constr if isinstance(constr, RangeOf) else constr


def _operand_field(definition: Any) -> Any:
    if isinstance(definition, VarOperandDef) and not isinstance(definition, OptOperandDef):
        return var_operand_def(_single(definition.constr))
    if isinstance(definition, OptOperandDef):
        return opt_operand_def(_single(definition.constr))
    assert isinstance(definition, OperandDef)
    return operand_def(_single(definition.constr))


def _result_field(definition: Any) -> Any:
    if isinstance(definition, VarResultDef):
        return var_result_def(_single(definition.constr))
    return result_def(_single(definition.constr))


def _attribute_field(definition: AttributeDef) -> Any:
    default = getattr(definition, "default_value", None)
    return opt_attr_def(definition.constr, default)


def mirror_fields(source: type[IRDLOperation]) -> dict[str, Any]:
    """Field definitions (operands, results, attributes) of a TOP op, as a
    class body for a new op. Every attribute becomes optional with the
    source's default."""
    definition = source.get_irdl_definition()
    fields: dict[str, Any] = {}
    for key, operand in definition.operands:
        fields[key] = _operand_field(operand)
    for key, result in definition.results:
        fields[key] = _result_field(result)
    for key, attribute in definition.attributes.items():
        if key in INHERITED:
            continue
        assert isinstance(attribute, AttributeDef | OptAttributeDef)
        fields[key] = _attribute_field(attribute)
    return fields


_CLASS_ONLY = ("__dict__", "__weakref__")


def tpu_op(
    mirror: type[IRDLOperation] | None = None,
    *,
    fields_from: type[IRDLOperation] | None = None,
) -> Callable[[type[OpT]], type[OpT]]:
    """Class decorator defining a TPU op: the fields of `mirror` (a TOP op;
    the op also gets the `Mirrors` trait) or of `fields_from` (fields only),
    followed by those of the class body, with the `Pure` trait and any the
    body declares. The class is rebuilt so the copied fields come first, as
    the TOP op orders its operands."""
    source = mirror or fields_from

    def define(cls: type[OpT]) -> type[OpT]:
        fields = mirror_fields(source) if source is not None else {}
        body = {k: v for k, v in cls.__dict__.items() if k not in _CLASS_ONLY}
        declared = body.pop("traits", None)
        fields.update(body)
        traits: list[OpTrait] = [Pure()]
        if mirror is not None:
            traits.append(Mirrors(mirror))
        if declared is not None:
            traits.extend(declared)
        fields["traits"] = traits_def(*traits)
        return irdl_op_definition(type(cls.__name__, cls.__bases__, fields))

    return define
