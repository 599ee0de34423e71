"""Shape rules of the data-movement, indexing and reduction ops (numpy and
ONNX semantics, with the attribute conventions of dialects/top.py)."""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

from tpuc.dialects.top.shape_rules import (
    Shape,
    ShapeError,
    Shapes,
    broadcast,
    fmt,
    int_list,
    need_rank,
    normalize_axes,
    normalize_axis,
)

if TYPE_CHECKING:
    from tpuc.dialects import top


def concat(op: top.ConcatOp, shapes: Shapes) -> list[Shape]:
    first = shapes[0]
    axis = normalize_axis(op.value("axis"), len(first))
    for shape in shapes[1:]:
        if len(shape) != len(first) or any(
            a != b for i, (a, b) in enumerate(zip(shape, first, strict=True)) if i != axis
        ):
            raise ShapeError(
                f"inputs {' and '.join(fmt(s) for s in shapes)} differ off the concat axis {axis}"
            )
    return [(*first[:axis], sum(s[axis] for s in shapes), *first[axis + 1 :])]


def split(op: top.SplitOp, shapes: Shapes) -> list[Shape]:
    """Pieces of `split_size` along `axis`, one per result; without
    split_size, equal pieces (the last one smaller, as ONNX num_outputs)."""
    (shape,) = shapes
    axis = normalize_axis(op.value("axis"), len(shape))
    count = len(op.results)
    sizes = op.value("split_size")
    if sizes is None:
        chunk = -(-shape[axis] // count)
        sizes = [chunk] * (count - 1) + [shape[axis] - chunk * (count - 1)]
    if len(sizes) != count or sum(sizes) != shape[axis] or min(sizes) < 0:
        raise ShapeError(
            f"split_size {list(sizes)} does not cut dim {axis} of {fmt(shape)} into {count} pieces"
        )
    return [(*shape[:axis], size, *shape[axis + 1 :]) for size in sizes]


def slice_(op: top.SliceOp, shapes: Shapes) -> list[Shape]:
    """input[offset:ends:steps] per axis with Python/numpy slice semantics:
    negative indices count from the end, out-of-range ones clamp."""
    (shape,) = shapes
    rank = len(shape)
    offsets = op.value("offset")
    ends = op.value("ends")
    steps = int_list(op, "steps", rank, 1)
    offsets = [0] * rank if offsets is None else offsets
    ends = list(shape) if ends is None else ends
    if len(offsets) != rank or len(ends) != rank:
        raise ShapeError(f"offset {offsets} and ends {ends} need {rank} entries each")
    if 0 in steps:
        raise ShapeError(f"steps {steps} must not be 0")
    return [
        tuple(
            len(range(*slice(b, e, s).indices(d)))
            for d, b, e, s in zip(shape, offsets, ends, steps, strict=True)
        )
    ]


def reshape(op: top.ReshapeOp, shapes: Shapes) -> list[Shape]:
    """`shape` with at most one -1, inferred from the element count."""
    (shape,) = shapes
    target = op.value("shape")
    if target is None:
        raise ShapeError("shape is missing")
    total = prod(shape)
    if target.count(-1) > 1 or any(d < -1 for d in target):
        raise ShapeError(f"shape {target} may hold one -1 and no other negative dim")
    known = prod(d for d in target if d != -1)
    if -1 in target:
        if known == 0 or total % known:
            raise ShapeError(f"cannot reshape {fmt(shape)} ({total} elements) to {target}")
        target = [total // known if d == -1 else d for d in target]
    if prod(target) != total:
        raise ShapeError(
            f"cannot reshape {fmt(shape)} ({total} elements) to {fmt(target)} "
            f"({prod(target)} elements)"
        )
    return [tuple(target)]


def flatten(op: top.FlattenOp, shapes: Shapes) -> list[Shape]:
    (shape,) = shapes
    if not shape:
        return [(1,)]
    start = normalize_axis(op.value("start_dim"), len(shape), "start_dim")
    end = normalize_axis(op.value("end_dim"), len(shape), "end_dim")
    if end < start:
        raise ShapeError(f"end_dim {end} is before start_dim {start}")
    return [(*shape[:start], prod(shape[start : end + 1]), *shape[end + 1 :])]


def squeeze(op: top.SqueezeOp, shapes: Shapes) -> list[Shape]:
    """Drop the listed size-1 axes (all size-1 axes when none are listed)."""
    (shape,) = shapes
    axes = op.value("axes")
    if not axes:
        return [tuple(d for d in shape if d != 1)]
    drop = normalize_axes(axes, len(shape))
    for axis in drop:
        if shape[axis] != 1:
            raise ShapeError(f"cannot squeeze axis {axis} of {fmt(shape)}: size is not 1")
    return [tuple(d for i, d in enumerate(shape) if i not in drop)]


def unsqueeze(op: top.UnsqueezeOp, shapes: Shapes) -> list[Shape]:
    """Insert size-1 axes; `axes` index the output (negative from its end)."""
    (shape,) = shapes
    axes = op.value("axes")
    if not axes:
        raise ShapeError("axes is missing")
    rank = len(shape) + len(axes)
    insert = set(normalize_axes(axes, rank))
    dims = iter(shape)
    return [tuple(1 if i in insert else next(dims) for i in range(rank))]


def permute(op: top.PermuteOp, shapes: Shapes) -> list[Shape]:
    (shape,) = shapes
    order = op.value("order")
    if order is None:
        order = list(range(len(shape)))[::-1]
    if sorted(order) != list(range(len(shape))):
        raise ShapeError(f"order {order} is not a permutation of the {len(shape)} axes")
    return [tuple(shape[i] for i in order)]


def depth2space(op: top.Depth2SpaceOp, shapes: Shapes) -> list[Shape]:
    """[N, C, H, W] -> [N, C/(bh*bw), H*bh, W*bw]; the inverse
    (SpaceToDepth) when `is_inversed`."""
    (shape,) = shapes
    need_rank(shape, 4, high=4)
    n, c, h, w = shape
    bh, bw = op.value("block_h"), op.value("block_w")
    if bh <= 0 or bw <= 0:
        raise ShapeError(f"block sizes {bh}x{bw} must be positive")
    if op.value("is_inversed"):
        if h % bh or w % bw:
            raise ShapeError(f"spatial dims {h}x{w} do not divide by blocks {bh}x{bw}")
        return [(n, c * bh * bw, h // bh, w // bw)]
    if c % (bh * bw):
        raise ShapeError(f"{c} channels do not divide by blocks {bh}x{bw}")
    return [(n, c // (bh * bw), h * bh, w * bw)]


def pad(op: top.PadOp, shapes: Shapes) -> list[Shape]:
    """`paddings` = all begins then all ends; negative ones crop."""
    (shape,) = shapes
    rank = len(shape)
    paddings = int_list(op, "paddings", 2 * rank, 0)
    out = tuple(d + paddings[i] + paddings[rank + i] for i, d in enumerate(shape))
    if min(out, default=0) < 0:
        raise ShapeError(f"paddings {paddings} crop more than {fmt(shape)} holds")
    return [out]


def upsample(op: top.UpsampleOp, shapes: Shapes) -> list[Shape]:
    (shape,) = shapes
    need_rank(shape, 2)
    scale_h, scale_w = op.value("scale_h"), op.value("scale_w")
    if scale_h <= 0 or scale_w <= 0:
        raise ShapeError(f"scales {scale_h}x{scale_w} must be positive")
    return [(*shape[:-2], shape[-2] * scale_h, shape[-1] * scale_w)]


def interp(op: top.InterpOp, shapes: Shapes) -> list[Shape]:
    """[N, C, *spatial] -> [N, C, *target_shape]."""
    (shape,) = shapes
    need_rank(shape, 3)
    target = op.value("target_shape")
    if target is None or len(target) != len(shape) - 2:
        raise ShapeError(f"target_shape {target} needs one size per spatial dim of {fmt(shape)}")
    if min(target) <= 0:
        raise ShapeError(f"target_shape {target} must be positive")
    return [(*shape[:2], *target)]


def tile(op: top.TileOp, shapes: Shapes) -> list[Shape]:
    (shape,) = shapes
    repeats = op.value("tile")
    if repeats is None or len(repeats) != len(shape) or min(repeats, default=0) < 0:
        raise ShapeError(f"tile {repeats} needs one non-negative repeat per axis of {fmt(shape)}")
    return [tuple(d * r for d, r in zip(shape, repeats, strict=True))]


def expand(op: top.ExpandOp, shapes: Shapes) -> list[Shape]:
    """Bidirectional broadcast of the input with `shape` (ONNX Expand)."""
    (shape,) = shapes
    target = op.value("shape")
    if target is None:
        raise ShapeError("shape is missing")
    return [broadcast(shape, target)]


def gather(op: top.GatherOp, shapes: Shapes) -> list[Shape]:
    """numpy.take: the indices' shape replaces the gathered axis."""
    shape, indices = shapes
    need_rank(shape, 1)
    axis = normalize_axis(op.value("axis"), len(shape))
    return [(*shape[:axis], *indices, *shape[axis + 1 :])]


def _reduced(shape: Shape, axes: list[int], keepdims: bool) -> Shape:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reduce(op: top.ReduceOp, shapes: Shapes) -> list[Shape]:
    """Reduce over `axes` (every axis when absent)."""
    (shape,) = shapes
    axes = op.value("axes")
    axes = list(range(len(shape))) if not axes else normalize_axes(axes, len(shape))
    return [_reduced(shape, axes, op.value("keepdims"))]


def arg(op: top.ArgOp, shapes: Shapes) -> list[Shape]:
    (shape,) = shapes
    axis = normalize_axis(op.value("axis"), len(shape))
    return [_reduced(shape, [axis], op.value("keepdims"))]


def topk(op: top.TopKOp, shapes: Shapes) -> list[Shape]:
    """values and indices: the input with K entries along `axis`."""
    (shape,) = shapes
    axis = normalize_axis(op.value("axis"), len(shape))
    k = op.value("K")
    if not 0 <= k <= shape[axis]:
        raise ShapeError(f"K {k} out of range for dim {axis} of {fmt(shape)}")
    out = (*shape[:axis], k, *shape[axis + 1 :])
    return [out, out]
