"""Helpers shared by the TOP canonicalization patterns.

They answer the questions every fusion asks first (who produces this value,
is it used only here, is it a function output, is it a constant) and do the
one edit every fusion ends with: the surviving op takes over the name and
the uses of the op it absorbs, so compare-by-name still finds the tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, NoneType, TensorType, f32
from xdsl.dialects.func import ReturnOp
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from tpuc.dialects.base import TensorOp, from_attr, shape_of
from tpuc.dialects.top import AddConstOp, InputOp, NoneOp, WeightOp
from tpuc.ir.weights import create_weight, module_of, read_weight, weights_of

OpT = TypeVar("OpT", bound=Operation)


def producer(value: SSAValue, kind: type[OpT] | tuple[type[OpT], ...]) -> OpT | None:
    """The op of class `kind` that defines `value`, if that is what defines it."""
    if isinstance(value, OpResult) and isinstance(value.op, kind):
        return value.op
    return None


def is_returned(value: SSAValue) -> bool:
    """A function output must stay observable under its own name."""
    return any(isinstance(use.operation, ReturnOp) for use in value.uses)


def only_user_is(value: SSAValue, op: Operation) -> bool:
    """`value` feeds `op` once and nothing else (so it may be rewritten)."""
    uses = list(value.uses)
    return len(uses) == 1 and uses[0].operation is op and not is_returned(value)


def is_none(value: SSAValue) -> bool:
    return isinstance(value.type, NoneType)


def constant(value: SSAValue) -> np.ndarray | None:
    """The data of a `top.Weight` operand as float64, None if not a weight."""
    op = producer(value, WeightOp)
    if op is None:
        return None
    return np.asarray(read_weight(op), dtype=np.float64)


def is_inline(value: SSAValue) -> bool:
    """Weights given inline (tiny lit modules) stay inline when folded."""
    op = producer(value, WeightOp)
    return op is not None and "value" in op.attributes


def none_value(rewriter: PatternRewriter, before: Operation) -> SSAValue:
    """A fresh `top.None` result for an absent optional operand."""
    op = NoneOp.build(result_types=[NoneType()])
    rewriter.insert(op, InsertPoint.before(before))
    return op.output


def tensor_names(anchor: Operation) -> set[str]:
    """Every tensor name used in the module holding `anchor`."""
    names: set[str] = set()
    for op in module_of(anchor).walk():
        if isinstance(op, TensorOp):
            names.update(op.names)
    return names


def new_weight(
    rewriter: PatternRewriter,
    before: Operation,
    base: str,
    array: np.ndarray,
    inline: bool = False,
) -> SSAValue:
    """Insert a new `top.Weight` holding `array` before `before`; its name is
    unique in the module and in the weight store."""
    taken = tensor_names(before) | set(weights_of(before))
    name, index = base, 1
    while name in taken:
        name, index = f"{base}_{index}", index + 1
    op = create_weight(before, name, array)
    if inline:
        data = np.require(array, "<f4", "C")
        op.attributes["value"] = DenseIntOrFPElementsAttr(
            TensorType(f32, data.shape), BytesAttr(data.tobytes())
        )
    rewriter.insert(op, InsertPoint.before(before))
    return op.output


def absorb(rewriter: PatternRewriter, survivor: TensorOp, absorbed: TensorOp) -> None:
    """`survivor` now computes what `absorbed` computed: it takes the absorbed
    op's tensor name (the intermediate tensor disappears), its uses and its
    result type, so function signatures stay valid."""
    survivor.attributes["name"] = absorbed.attributes["name"]
    rewriter.notify_op_modified(survivor)
    result = survivor.results[0]
    if result.type != absorbed.results[0].type:  # e.g. one not inferred yet
        result = rewriter.replace_value_with_new_type(result, absorbed.results[0].type)
    rewriter.replace(absorbed, [], [result])


def operand_pairs(op) -> list[tuple[SSAValue, SSAValue]]:
    """(x, other) both ways round for a plain two-input Add (coeff all 1),
    none for any other Add: the folds of an added constant start here."""
    coeff = op.value("coeff")
    if len(op.inputs) != 2 or (coeff is not None and any(c != 1 for c in coeff)):
        return []
    return [tuple(op.inputs), tuple(op.inputs[::-1])]


def set_operand(rewriter: PatternRewriter, op: Operation, index: int, value: SSAValue) -> None:
    op.operands[index] = value
    rewriter.notify_op_modified(op)


def can_absorb_into(op: Operation) -> bool:
    """Ops that may be renamed to take over a later tensor: not graph inputs
    or constants, whose names are fixed by the model."""
    return isinstance(op, TensorOp) and not isinstance(op, InputOp | WeightOp)


def channel_vector(array: np.ndarray, out_shape: Sequence[int] | None) -> np.ndarray | None:
    """`array` as one value per channel (axis 1) of a tensor of `out_shape`,
    or None when it varies along any other axis or would change the shape."""
    if out_shape is None or len(out_shape) < 2 or array.ndim > len(out_shape):
        return None
    shape = (1,) * (len(out_shape) - array.ndim) + array.shape
    channels = out_shape[1]
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(array.reshape(-1), (channels,)).copy()


def scalar(array: np.ndarray | None, out_shape: Sequence[int] | None, x: SSAValue) -> float | None:
    """The single value of a one-element constant that does not broadcast
    `x` to a different shape."""
    if array is None or array.size != 1:
        return None
    x_shape = shape_of(x)
    if x_shape is not None and out_shape is not None and tuple(out_shape) != x_shape:
        return None
    if x_shape is not None and array.ndim > len(x_shape):
        return None
    return float(array.reshape(-1)[0])


def merged_limit(a: float, b: float) -> float:
    """Two ReLU upper limits applied in sequence (negative: unbounded)."""
    if a < 0:
        return b
    if b < 0:
        return a
    return min(a, b)


def relu_attrs(op: TensorOp) -> dict[str, bool | float]:
    """`op`'s fused ReLU as attributes for a replacement op (empty if none)."""
    if not op.value("do_relu"):
        return {}
    return {"do_relu": True, "relu_limit": float(op.value("relu_limit"))}


def take_relu(target: TensorOp, source: TensorOp) -> None:
    """Carry `source`'s fused ReLU over to `target`, which has none."""
    if source.value("do_relu"):
        target.set_value("do_relu", True)
        target.set_value("relu_limit", float(source.value("relu_limit")))


def is_pre_quantized(op: Operation) -> bool:
    """Whether `op` is in a module whose tensors carry the model's own
    quantization (`module.pre_quantized`, set by the TFLite frontend): every
    tensor between two ops is then a requantization point of the model."""
    attr = module_of(op).attributes.get("module.pre_quantized")
    return attr is not None and bool(from_attr(attr))


def is_requant_point(op: Operation) -> bool:
    """An AddConst of 0 in a pre-quantized module: the frontend's form of a
    requantizing QUANTIZE (int8 to int8 at another scale), kept as an op so
    that INT8 rounds there as the model does."""
    return isinstance(op, AddConstOp) and op.value("const_val") == 0.0 and is_pre_quantized(op)
