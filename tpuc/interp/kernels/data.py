"""Data movement: concat/split, slicing, reshapes, permutes, depth-to-space,
pad, tile, expand and gather. Pure views are returned where numpy allows;
no kernel writes into its inputs."""

from __future__ import annotations

import numpy as np

from tpuc.dialects import top
from tpuc.interp.kernels.registry import Array, as_index, axis_of, f32, fused_relu, ints, kernel
from tpuc.kernels.executor import current


@kernel(top.ConcatOp)
def concat(op, args: list[Array]) -> Array:
    """Parts that the interpreter had their kernels write into this result
    already (see `concat_placements`) are not copied again."""
    parts = [f32(a) for a in args]
    axis = axis_of(op.value("axis"), parts[0].ndim)
    shape = list(parts[0].shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    out = current().empty(tuple(shape))
    start = 0
    for part in parts:
        dst = out[(slice(None),) * axis + (slice(start, start + part.shape[axis]),)]
        if not same_memory(dst, part):
            np.copyto(dst, part)
        start += part.shape[axis]
    return fused_relu(op, out)


def same_memory(a: Array, b: Array) -> bool:
    """Whether a and b are the very same elements (not just overlapping)."""
    return (
        a.shape == b.shape
        and a.strides == b.strides
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )


@kernel(top.SplitOp)
def split(op, args: list[Array]) -> tuple[Array, ...]:
    x = args[0]
    axis = axis_of(op.value("axis"), x.ndim)
    sizes = ints(op, "split_size")
    if not sizes:
        count = len(op.results)
        sizes = [-(-x.shape[axis] // count)] * count
    bounds = np.cumsum([0, *sizes])
    if bounds[-1] < x.shape[axis] or any(s < 0 for s in sizes):
        raise ValueError(f"split sizes {sizes} do not cover axis {axis} of {x.shape}")
    lead = (slice(None),) * axis
    return tuple(x[(*lead, slice(lo, hi))] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True))


@kernel(top.SliceOp)
def slice_(op, args: list[Array]) -> Array:
    x = args[0]
    rank = x.ndim
    offset = ints(op, "offset", [0] * rank)
    steps = ints(op, "steps", [1] * rank)
    ends = ints(op, "ends", [None] * rank)
    index = tuple(slice_bounds(offset[i], ends[i], steps[i], x.shape[i]) for i in range(rank))
    return x[index]


def slice_bounds(start: int, end: int | None, step: int, dim: int) -> slice:
    """ONNX Slice clamping: negative indices count from the end; with a
    negative step, an end below -dim means 'through index 0'."""
    if step == 0:
        raise ValueError("slice step 0")
    if start < 0:
        start += dim
    if end is not None and end < 0:
        end += dim
    if step > 0:
        start = min(max(start, 0), dim)
        end = dim if end is None else min(max(end, 0), dim)
        return slice(start, end, step)
    start = min(max(start, 0), dim - 1)
    end = -1 if end is None else min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


@kernel(top.ReshapeOp)
def reshape(op, args: list[Array]) -> Array:
    """A 0 in `shape` copies the input dim (ONNX's default allowzero=0)."""
    x = args[0]
    shape = ints(op, "shape")
    if x.size:
        shape = [x.shape[i] if d == 0 and i < x.ndim else d for i, d in enumerate(shape)]
    return x.reshape(shape)


@kernel(top.FlattenOp)
def flatten(op, args: list[Array]) -> Array:
    x = args[0]
    start = axis_of(op.value("start_dim"), x.ndim)
    end = axis_of(op.value("end_dim"), x.ndim)
    return x.reshape(x.shape[:start] + (-1,) + x.shape[end + 1 :])


@kernel(top.SqueezeOp)
def squeeze(op, args: list[Array]) -> Array:
    x = args[0]
    axes = ints(op, "axes")
    if not axes:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(axis_of(a, x.ndim) for a in axes))


@kernel(top.UnsqueezeOp)
def unsqueeze(op, args: list[Array]) -> Array:
    x = args[0]
    rank = x.ndim + len(ints(op, "axes"))
    return np.expand_dims(x, tuple(axis_of(a, rank) for a in ints(op, "axes")))


@kernel(top.PermuteOp)
def permute(op, args: list[Array]) -> Array:
    return np.transpose(args[0], ints(op, "order"))


@kernel(top.Depth2SpaceOp)
def depth_to_space(op, args: list[Array]) -> Array:
    """DepthToSpace (DCR or CRD) or, when `is_inversed`, SpaceToDepth (whose
    channel order is DCR-like: block offsets outermost, unless `is_CRD`)."""
    x = args[0]
    bh, bw = int(op.value("block_h")), int(op.value("block_w"))
    n, c, h, w = x.shape
    crd = bool(op.value("is_CRD"))
    if op.value("is_inversed"):
        t = x.reshape(n, c, h // bh, bh, w // bw, bw)
        order = (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
        return np.ascontiguousarray(t.transpose(order)).reshape(n, c * bh * bw, h // bh, w // bw)
    oc = c // (bh * bw)
    if crd:
        t = x.reshape(n, oc, bh, bw, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        t = x.reshape(n, bh, bw, oc, h, w).transpose(0, 3, 4, 1, 5, 2)
    return np.ascontiguousarray(t).reshape(n, oc, h * bh, w * bw)


PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


@kernel(top.PadOp)
def pad(op, args: list[Array]) -> Array:
    """ONNX Pad; negative paddings crop."""
    x = args[0]
    rank = x.ndim
    paddings = ints(op, "paddings", [0] * (2 * rank))
    begins, ends = paddings[:rank], paddings[rank:]
    crop = tuple(
        slice(max(0, -b), x.shape[i] - max(0, -e))
        for i, (b, e) in enumerate(zip(begins, ends, strict=True))
    )
    x = x[crop]
    width = [(max(0, b), max(0, e)) for b, e in zip(begins, ends, strict=True)]
    mode = PAD_MODES.get(op.value("mode") or "constant")
    if mode is None:
        raise ValueError(f"unknown pad mode {op.value('mode')!r}")
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=np.float32(op.value("val")))
    return np.pad(x, width, mode=mode)


@kernel(top.TileOp)
def tile(op, args: list[Array]) -> Array:
    return np.tile(args[0], ints(op, "tile"))


@kernel(top.ExpandOp)
def expand(op, args: list[Array]) -> Array:
    """ONNX Expand: the output shape is broadcast(input, shape)."""
    x = args[0]
    shape = np.broadcast_shapes(x.shape, tuple(ints(op, "shape")))
    return np.array(np.broadcast_to(x, shape))


@kernel(top.GatherOp)
def gather(op, args: list[Array]) -> Array:
    x, indices = args
    axis = axis_of(op.value("axis"), x.ndim)
    idx = as_index(indices)
    dim = x.shape[axis]
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise ValueError(f"gather index out of range [{-dim}, {dim}) on axis {axis}")
    return np.take(x, np.where(idx < 0, idx + dim, idx), axis=axis)
