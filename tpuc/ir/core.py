"""Small helpers over tpuc's IR that every layer above the dialects uses.

Finding `func @main`, naming tensors, reading an SSA value's element type,
telling integer ops from float ones, and decoding tiny inline weights: the
passes, the interpreters, codegen and the tools all need these, so they
live here rather than in one of them (which would make the others import
it against the layer order).
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    IntegerType,
    ModuleOp,
    TensorType,
    UnrankedTensorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from tpuc.base.errors import TpucError
from tpuc.base.numerics import bf16_bits
from tpuc.dialects.base import TensorOp
from tpuc.dialects.quant import QuantizedType, UniformQuantizedType


def main_function(module: ModuleOp) -> func.FuncOp:
    """`func @main`, or the module's only function."""
    funcs = [op for op in module.ops if isinstance(op, func.FuncOp)]
    for f in funcs:
        if f.sym_name.data == "main":
            return f
    if len(funcs) == 1:
        return funcs[0]
    raise TpucError("module has no func @main to run")


def tensor_names(op: Operation) -> list[str]:
    """The tensor names of an op's results (`name` / `result_names`, else made up)."""
    if isinstance(op, TensorOp):
        return op.names
    return [f"{op.name}_{i}" for i in range(len(op.results))]


def body_ops(block: Block) -> list[Operation]:
    """The ops of a function body in graph order, without its return."""
    return [op for op in block.ops if not isinstance(op, func.ReturnOp)]


def last_uses(block: Block) -> dict[SSAValue, int]:
    """Index of the last op reading each value; returned values: len(ops)
    (never freed). Memory planning (address-assign) and the interpreters
    (freeing arrays) share this one definition."""
    ops = body_ops(block)
    last: dict[SSAValue, int] = {}
    for i, op in enumerate(ops):
        for value in op.operands:
            last[value] = i
    ret = block.last_op
    if isinstance(ret, func.ReturnOp):
        for value in ret.operands:
            last[value] = len(ops)
    return last


def output_names(module: ModuleOp) -> list[str]:
    """Tensor names returned by func @main, in order."""
    ret = main_function(module).body.block.last_op
    if not isinstance(ret, func.ReturnOp):
        return []
    return [tensor_names(v.owner)[v.index] for v in ret.operands]


FLOAT_DTYPES: dict[type[Attribute], str] = {
    Float32Type: "f32",
    Float16Type: "f16",
    BFloat16Type: "bf16",
}
"""IR float element type -> its name in `tpuc.base.dtypes.ELEMENT_TYPES`."""


def element_of(value: SSAValue) -> Attribute:
    """The element type of a tensor value (the type itself for scalars)."""
    t = value.type
    if isinstance(t, TensorType | UnrankedTensorType):
        return t.element_type
    return t


def kind_of(op: Operation) -> str:
    """ "int" when the op's first result or first operand is quantized (an
    integer op, possibly with a float epilogue), else "float"."""
    firsts = [*op.results[:1], *op.operands[:1]]
    quantized = any(isinstance(element_of(v), UniformQuantizedType) for v in firsts)
    return "int" if quantized else "float"


def int_width(element: Attribute) -> int | None:
    """Bit width of an integer or quantized element type (None for floats)."""
    if isinstance(element, IntegerType):
        return element.width.data
    if isinstance(element, QuantizedType):
        return element.storage_width
    return None


def inline_weight(op: Operation, element: Attribute) -> np.ndarray | None:
    """A `top.Weight`'s inline `value` (tiny test modules) as npz would hold it."""
    inline = op.attributes.get("value")
    if not isinstance(inline, DenseIntOrFPElementsAttr):
        return None
    shape = tuple(inline.get_shape() or ())
    values = inline.get_values()
    if int_width(element) is not None:
        return np.asarray(values, np.int64).reshape(shape)
    array = np.asarray(values, np.float32).reshape(shape)
    if isinstance(element, Float16Type):
        return array.astype(np.float16)
    if isinstance(element, BFloat16Type):
        return bf16_bits(array)
    return array
