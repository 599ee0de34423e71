"""Shared machinery of tpuc's op dialects: the tensor-name convention and
plain-Python access to attributes.

Every tensor-producing op carries its tensor name in a `name` attribute
(xDSL drops `loc(...)`); multi-result ops add `result_names`. Frontends,
kernels and passes read and write attributes as Python values through
`TensorOp.value` / `TensorOp.make`, so the conversion lives here only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    NoneType,
    StringAttr,
    TensorType,
    UnrankedTensorType,
    f32,
    f64,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, attr_def, base, opt_attr_def

AnyTensor = base(TensorType) | base(UnrankedTensorType)
TensorOrNone = base(TensorType) | base(UnrankedTensorType) | base(NoneType)

PyValue = bool | int | float | str | Sequence[Any] | None


def to_attr(value: PyValue) -> Attribute:
    """Python value -> builtin attribute, in the forms TPU-MLIR prints."""
    if isinstance(value, Attribute):
        return value
    if isinstance(value, bool):
        return BoolAttr.from_bool(value)
    if isinstance(value, int):
        return IntegerAttr(value, i64)
    if isinstance(value, float):
        return FloatAttr(value, f64)
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, Sequence):
        items = [_scalar(v) for v in value]
        if len(items) >= _INT_LISTS.shortest and all(type(v) is int for v in items):
            return _INT_LISTS.get(items)
        return ArrayAttr([to_attr(v) for v in items])
    raise TypeError(f"cannot store {type(value).__name__} as an attribute")


class _IntListCache:
    """Long int lists (per-channel multipliers and shifts) -> ArrayAttr,
    kept while they hold at most `limit` elements in all. Building an
    IntegerAttr costs ~10 µs; a lowering builds tens of thousands and
    lowering the same module again (run_qtable's candidates) builds the same
    lists. Attributes are immutable, so ops may share them."""

    shortest = 16

    def __init__(self, limit: int):
        self.limit = limit
        self.size = 0
        self.lists: dict[tuple[int, ...], ArrayAttr] = {}
        self.keys: dict[int, tuple[ArrayAttr, tuple[int, ...]]] = {}  # by id(attr)

    def get(self, items: list[int]) -> ArrayAttr:
        key = tuple(items)
        attr = self.lists.pop(key, None)  # re-inserted: most recent last
        if attr is None:
            attr = ArrayAttr([IntegerAttr(v, i64) for v in items])
            self.keys[id(attr)] = (attr, key)
            self.size += len(key)
            while self.size > self.limit and self.lists:
                oldest = next(iter(self.lists))
                del self.keys[id(self.lists.pop(oldest))]
                self.size -= len(oldest)
        self.lists[key] = attr
        return attr

    def values(self, attr: ArrayAttr) -> list[int] | None:
        """The ints of an ArrayAttr this cache made (None for others):
        kernels read multipliers on every run."""
        known = self.keys.get(id(attr))
        return list(known[1]) if known is not None and known[0] is attr else None


_INT_LISTS = _IntListCache(limit=1 << 18)


def _scalar(v: Any) -> Any:
    """numpy scalars -> Python scalars so `to_attr` picks the right kind."""
    return v.item() if hasattr(v, "item") and not isinstance(v, Attribute) else v


def from_attr(attr: Attribute) -> Any:
    """Builtin attribute -> Python value (the inverse of `to_attr`)."""
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        width = attr.type.width.data if isinstance(attr.type, IntegerType) else 64
        return bool(value) if width == 1 else value
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, ArrayAttr):
        values = _INT_LISTS.values(attr)
        return values if values is not None else [from_attr(a) for a in attr.data]
    return attr


def tensor_type(shape: Sequence[int] | None, element: Attribute = f32) -> Attribute:
    """`tensor<AxBxf32>`, or `tensor<*xf32>` when the shape is not known yet."""
    if shape is None:
        return UnrankedTensorType(element)
    return TensorType(element, [int(d) for d in shape])


def shape_of(value: SSAValue) -> tuple[int, ...] | None:
    """Static shape of a tensor value, None if unranked or not a tensor."""
    t = value.type
    if isinstance(t, TensorType):
        return tuple(t.get_shape())
    return None


class TensorOp(IRDLOperation):
    """Base of every op that produces named tensors."""

    tensor_name = attr_def(StringAttr, attr_name="name")
    result_names = opt_attr_def(ArrayAttr[StringAttr], attr_name="result_names")

    @classmethod
    def make(
        cls,
        operands: Sequence[SSAValue],
        name: str,
        attrs: Mapping[str, PyValue] | None = None,
        result_types: Sequence[Attribute] | None = None,
        result_names: Sequence[str] | None = None,
    ) -> Self:
        """Build the op from Python attribute values; results default to
        `tensor<*xf32>` so shape-infer can fill them."""
        attributes = {"name": StringAttr(name)}
        for key, value in (attrs or {}).items():
            if value is not None:
                attributes[key] = to_attr(value)
        if result_names is not None:
            attributes["result_names"] = to_attr(list(result_names))
        if result_types is None:
            count = len(result_names) if result_names else len(cls.get_irdl_definition().results)
            result_types = [UnrankedTensorType(f32)] * count
        results: list[Any] = list(result_types)
        if _is_variadic_result(cls):
            results = [results]
        return cls.build(
            operands=_group_operands(cls, operands),
            result_types=results,
            attributes=attributes,
        )

    def value(self, key: str) -> Any:
        """Python value of an attribute, falling back to the op's declared
        default (None when absent and undeclared)."""
        attr = self.attributes.get(key)
        if attr is None:
            definition = self.get_irdl_definition().attributes.get(key)
            attr = getattr(definition, "default_value", None)
        return None if attr is None else from_attr(attr)

    def set_value(self, key: str, value: PyValue) -> None:
        """Store a Python value as the attribute `key` (None removes it)."""
        if value is None:
            self.attributes.pop(key, None)
            return
        self.attributes[key] = to_attr(value)

    @property
    def names(self) -> list[str]:
        """Tensor name of each result, in result order."""
        if self.result_names is not None:
            return [a.data for a in self.result_names.data]
        return [self.tensor_name.data]


def _is_variadic_result(cls: type[IRDLOperation]) -> bool:
    from xdsl.irdl import VarResultDef

    return isinstance(cls.get_irdl_definition().results[0][1], VarResultDef)


def _group_operands(cls: type[IRDLOperation], operands: Sequence[SSAValue]) -> list[Any]:
    """Fit a flat operand list onto the op's operand definitions: a single
    variadic definition takes all that the fixed ones leave."""
    from xdsl.irdl import OptOperandDef, VarOperandDef

    defs = [d for _, d in cls.get_irdl_definition().operands]
    if not any(isinstance(d, VarOperandDef) for d in defs):
        return list(operands)
    fixed = sum(not isinstance(d, VarOperandDef) for d in defs)
    extra = len(operands) - fixed
    grouped: list[Any] = []
    it = iter(operands)
    for d in defs:
        if isinstance(d, OptOperandDef):
            grouped.append([next(it)] if extra > 0 else [])
            extra -= 1
        elif isinstance(d, VarOperandDef):
            grouped.append([next(it) for _ in range(extra)])
        else:
            grouped.append(next(it))
    return grouped
