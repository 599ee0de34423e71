"""Shape-rule helpers and the rules of the elementwise, activation and
normalization families.

A rule maps an op and its operand shapes (None for a `none` operand) to its
result shapes. Each TOP op class names its rule in its traits
(`HasShapeRule(shape_rules.conv)`), so these modules import no op class at
load time; `shape_infer.infer_op_shapes` applies the rule. A rule reports
incompatible operands or attributes by raising `ShapeError` with what is
wrong; the caller adds which op and tensor it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from tpuc.dialects import top

Shape: TypeAlias = tuple[int, ...]
Shapes: TypeAlias = tuple[Shape | None, ...]
ShapeRule: TypeAlias = Callable[[Any, Shapes], list[Shape]]


class ShapeError(Exception):
    """Operands or attributes an op cannot have; the message says why."""


# --- helpers shared by the rule modules ------------------------------------------


def fmt(shape: Sequence[int] | None) -> str:
    """`[1, 3, 224, 224]` for messages."""
    return "none" if shape is None else f"[{', '.join(str(d) for d in shape)}]"


def broadcast(*shapes: Sequence[int]) -> Shape:
    """numpy/ONNX multidirectional broadcasting of `shapes`."""
    rank = max((len(s) for s in shapes), default=0)
    result = [1] * rank
    for shape in shapes:
        for i, dim in enumerate(shape, start=rank - len(shape)):
            if dim == result[i] or dim == 1:
                continue
            if result[i] != 1:
                listed = " and ".join(fmt(s) for s in shapes)
                raise ShapeError(f"shapes {listed} do not broadcast")
            result[i] = dim
    return tuple(result)


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """Python-style negative axis -> [0, rank)."""
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def normalize_axes(axes: Sequence[int], rank: int, what: str = "axes") -> list[int]:
    """Normalized, duplicate-free axes in the given order."""
    result = [normalize_axis(a, rank, what) for a in axes]
    if len(set(result)) != len(result):
        raise ShapeError(f"{what} {list(axes)} repeat an axis")
    return result


def int_list(op: Any, key: str, length: int, default: int) -> list[int]:
    """Attribute `key` as a list of `length` ints, `default` when absent."""
    values = op.value(key)
    if values is None:
        return [default] * length
    if len(values) != length:
        raise ShapeError(f"{key} has {len(values)} entries, expected {length}")
    return [int(v) for v in values]


def need_rank(shape: Shape, low: int, what: str = "input", high: int | None = None) -> None:
    """Fail unless `low <= len(shape) <= high` (high defaults to unbounded)."""
    if len(shape) >= low and (high is None or len(shape) <= high):
        return
    if high == low:
        expected = f"rank {low}"
    elif high is None:
        expected = f"rank >= {low}"
    else:
        expected = f"rank {low}..{high}"
    raise ShapeError(f"{what} {fmt(shape)} must have {expected}")


def need_size(shape: Shape | None, size: int, what: str) -> None:
    """An optional per-channel operand (bias, scale, mean) must hold `size`
    values (a `none` operand always fits)."""
    if shape is None or prod(shape) == size:
        return
    raise ShapeError(f"{what} {fmt(shape)} must hold {size} values")


def channels(shape: Shape) -> int:
    """Dim 1 of an [N, C, ...] tensor (1 for rank < 2)."""
    return shape[1] if len(shape) >= 2 else 1


# --- same shape as the input -------------------------------------------------------


def same_shape(op: Any, shapes: Shapes) -> list[Shape]:
    """Elementwise ops on one tensor keep its shape."""
    return [shapes[0]]


def softmax(op: top.SoftmaxOp, shapes: Shapes) -> list[Shape]:
    (shape,) = shapes
    if shape:
        normalize_axis(op.value("axis"), len(shape))
    return [shape]


# --- broadcasting -----------------------------------------------------------------


def variadic_broadcast(op: Any, shapes: Shapes) -> list[Shape]:
    """Multidirectional broadcasting of every input."""
    if not shapes:
        raise ShapeError("needs at least one input")
    coeff = op.value("coeff") if op.name == "top.Add" else None
    if coeff is not None and len(coeff) != len(shapes):
        raise ShapeError(f"coeff has {len(coeff)} entries for {len(shapes)} inputs")
    return [broadcast(*shapes)]


def binary_broadcast(op: Any, shapes: Shapes) -> list[Shape]:
    return [broadcast(*shapes)]


def prelu(op: top.PReluOp, shapes: Shapes) -> list[Shape]:
    """The slope broadcasts to the input (one direction only, as ONNX)."""
    shape, slope = shapes
    if broadcast(shape, slope) != shape:
        raise ShapeError(f"slope {fmt(slope)} does not broadcast to the input {fmt(shape)}")
    return [shape]


# --- normalization and per-channel affine ---------------------------------------------


def per_channel_affine(op: top.ScaleOp | top.InstanceNormOp, shapes: Shapes) -> list[Shape]:
    """The two parameters hold one value per channel (axis 1)."""
    shape, first, bias = shapes
    need_rank(shape, 2)
    need_size(first, shape[1], "scale" if op.name == "top.Scale" else "weight")
    need_size(bias, shape[1], "bias")
    return [shape]


def batch_norm(op: top.BatchNormOp, shapes: Shapes) -> list[Shape]:
    shape, *params = shapes
    need_rank(shape, 2)
    for what, param in zip(("mean", "variance", "gamma", "beta"), params, strict=True):
        need_size(param, shape[1], what)
    return [shape]


def layer_norm(op: top.LayerNormOp, shapes: Shapes) -> list[Shape]:
    """weight/bias broadcast to dims [axis, rank) (ONNX LayerNormalization)."""
    shape, weight, bias = shapes
    axis = normalize_axis(op.value("axis"), len(shape))
    normalized = shape[axis:]
    for what, param in (("weight", weight), ("bias", bias)):
        if param is not None and broadcast(normalized, param) != normalized:
            raise ShapeError(f"{what} {fmt(param)} does not broadcast to {fmt(normalized)}")
    return [shape]


def group_norm(op: top.GroupNormOp, shapes: Shapes) -> list[Shape]:
    shape, weight, bias = shapes
    need_rank(shape, 2)
    groups = op.value("num_groups")
    if groups <= 0 or shape[1] % groups:
        raise ShapeError(f"{shape[1]} channels do not split into {groups} groups")
    for what, param in (("weight", weight), ("bias", bias)):
        if param is not None and prod(param) not in (shape[1], groups):
            raise ShapeError(f"{what} {fmt(param)} must hold {shape[1]} or {groups} values")
    return [shape]
