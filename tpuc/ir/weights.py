"""Weights live outside the IR: a name -> ndarray store attached to a module.

`top.Weight` ops carry only a name and a type. Passes that fold constants
(BatchNorm into Conv, Mul by a constant into Scale, ...) read and create
weights through this module, so the bytes never travel through attributes.
Tiny test modules may instead give a `top.Weight` an inline `value`
attribute (a dense elements attribute); `read_weight` accepts both.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import numpy as np
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    IntegerType,
    ModuleOp,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute, Operation

from tpuc.base.dtypes import ELEMENT_TYPES
from tpuc.base.errors import TpucError
from tpuc.dialects.base import tensor_type
from tpuc.dialects.quant import QuantizedType
from tpuc.dialects.top import WeightOp
from tpuc.ir.core import FLOAT_DTYPES


class WeightStore(dict[str, np.ndarray]):
    """Weights by tensor name; `add` picks a name no other weight uses."""

    def unique_name(self, base: str) -> str:
        if base not in self:
            return base
        index = 1
        while f"{base}_{index}" in self:
            index += 1
        return f"{base}_{index}"

    def add(self, base: str, array: np.ndarray) -> str:
        name = self.unique_name(base)
        self[name] = np.require(array, requirements="C")  # 0-d stays 0-d
        return name


_STORES: weakref.WeakKeyDictionary[ModuleOp, WeightStore] = weakref.WeakKeyDictionary()


def module_of(op: Operation) -> ModuleOp:
    """The outermost builtin.module holding `op` (or `op` itself)."""
    top: Operation = op
    while top.parent_op() is not None:
        top = top.parent_op()  # type: ignore[assignment]
    if not isinstance(top, ModuleOp):
        raise TpucError(f"{op.name} is not inside a module")
    return top


def attach_weights(module: ModuleOp, store: WeightStore) -> None:
    """Make `store` the weight store that passes see for `module`."""
    _STORES[module] = store


def weights_of(op: Operation) -> WeightStore:
    """The store of the module holding `op`; an empty one if none was attached."""
    module = module_of(op)
    store = _STORES.get(module)
    if store is None:
        store = WeightStore()
        _STORES[module] = store
    return store


def read_weight(op: WeightOp) -> np.ndarray:
    """The float data of a `top.Weight`, from its inline value or the store."""
    inline = op.attributes.get("value")
    if isinstance(inline, DenseIntOrFPElementsAttr):
        shape = tuple(inline.get_shape() or ())
        return np.asarray(inline.get_values(), dtype=np.float32).reshape(shape)
    name = op.tensor_name.data
    store = weights_of(op)
    if name not in store:
        raise TpucError(f"weight '{name}' has no data (inline value or weight file)")
    return store[name]


def create_weight(anchor: Operation, base: str, array: np.ndarray) -> WeightOp:
    """A new `top.Weight` (not yet inserted) whose data is registered in the
    store of `anchor`'s module under a fresh name derived from `base`."""
    array = np.require(array, np.float32, "C")
    name = weights_of(anchor).add(base, array)
    return WeightOp.make([], name, result_types=[tensor_type(array.shape)])


def live_weights(module: ModuleOp, store: WeightStore) -> WeightStore:
    """Only the weights the module still references, in IR order."""
    kept = WeightStore()
    for op in module.walk():
        if isinstance(op, WeightOp) and "value" not in op.attributes:
            name = op.tensor_name.data
            if name not in store:
                raise TpucError(f"weight '{name}' is referenced but missing from the weight file")
            kept[name] = store[name]
    return kept


def _stored_name(op, store: WeightStore) -> str | None:
    """A `top.Weight`'s name if its weight is in `store` (None for other ops,
    and for a damaged Weight without a string name: the verifier reports it)."""
    if not isinstance(op, WeightOp):
        return None
    name = op.attributes.get("name")
    data = getattr(name, "data", None)
    return data if isinstance(data, str) and data in store else None


def weight_shape_mismatches(module: ModuleOp, store: WeightStore) -> Iterable[str]:
    """Names of weights whose stored shape differs from their IR type."""
    for op in module.walk():
        name = _stored_name(op, store)
        if name is None:
            continue
        t = op.output.type
        if isinstance(t, TensorType) and tuple(t.get_shape()) != store[name].shape:
            yield name


_INT_KINDS = {Signedness.SIGNED: ("int",), Signedness.UNSIGNED: ("uint",)}


def stored_dtypes(element: Attribute) -> tuple[np.dtype, ...] | None:
    """The numpy dtypes a weight file may hold for a weight of this element
    type (the ones TPU-MLIR writes and reads: bf16 as its uint16 bits, a
    signless integer as either signedness); None for types not checked."""
    name = FLOAT_DTYPES.get(type(element))
    if name is not None:
        return (np.dtype(ELEMENT_TYPES[name].storage),)
    if isinstance(element, QuantizedType):
        return (np.dtype(element.storage_dtype),)
    if not isinstance(element, IntegerType) or element.width.data not in (8, 16, 32, 64):
        return None
    bits = element.width.data
    kinds = _INT_KINDS.get(element.signedness.data, ("int", "uint"))  # signless: either
    return tuple(np.dtype(f"{kind}{bits}") for kind in kinds)


def check_weight_file(module: ModuleOp, store: WeightStore, source: str) -> None:
    """Every stored weight has the shape and the dtype its `top.Weight`
    declares: kernels reshape what they read, so a 16x144 array would pass
    as 16x16x3x3, and compute in whatever dtype they get, so int64 data
    would pass as f32 (TPU-MLIR's reader refuses both)."""
    for op in module.walk():
        name = _stored_name(op, store)
        if name is None:
            continue
        declared = op.output.type
        if not isinstance(declared, TensorType):
            continue
        stored = store[name]
        if tuple(declared.get_shape()) != stored.shape:
            raise TpucError(
                f"{source}: weight '{name}' has shape {list(stored.shape)}, "
                f"the module declares {list(declared.get_shape())}"
            )
        allowed = stored_dtypes(declared.element_type)
        if allowed is not None and stored.dtype not in allowed:
            raise TpucError(
                f"{source}: weight '{name}' holds {stored.dtype} values, the module declares "
                f"{declared.element_type} (stored as {' or '.join(map(str, allowed))})"
            )
