"""Data movement on float32 arrays: concat/split, slicing, reshapes,
permutes, depth-to-space, pad, tile, expand, nearest upsample and gather.

Each op's attributes are a frozen record; the kernels return views where
numpy allows and never write into their inputs. Run on stored integers
(float32 arrays holding them), every kernel here is exact: it only moves
values. Attribute lists that the op left empty stay empty in the record and
take the ONNX default at run time (it depends on the input's rank).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tpuc.kernels.arrays import Array, axis_of, f32, relu
from tpuc.kernels.element import Element
from tpuc.kernels.executor import current
from tpuc.kernels.requant import NO_RELU, Relu, relu_int


@dataclass(frozen=True)
class Concat:
    axis: int
    relu: Relu = NO_RELU


@dataclass(frozen=True)
class Split:
    """`sizes` empty: `count` equal pieces (the last one shorter)."""

    axis: int
    sizes: tuple[int, ...]
    count: int


@dataclass(frozen=True)
class Slice:
    """Per-axis starts, ends (None: to the end) and steps; empty: defaults."""

    offset: tuple[int, ...] = ()
    ends: tuple[int | None, ...] = ()
    steps: tuple[int, ...] = ()


@dataclass(frozen=True)
class Reshape:
    """A 0 copies the input dim (ONNX's default allowzero=0)."""

    shape: tuple[int, ...]


@dataclass(frozen=True)
class Flatten:
    start: int
    end: int


@dataclass(frozen=True)
class Squeeze:
    """Empty `axes`: every dim of size 1."""

    axes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Unsqueeze:
    axes: tuple[int, ...]


@dataclass(frozen=True)
class Permute:
    order: tuple[int, ...]


@dataclass(frozen=True)
class Depth2Space:
    """DepthToSpace (DCR or CRD) or, when `inversed`, SpaceToDepth."""

    block_h: int
    block_w: int
    crd: bool = False
    inversed: bool = False


PAD_MODES = ("constant", "reflect", "edge", "wrap")


@dataclass(frozen=True)
class Pad:
    """ONNX Pad: `paddings` = begins then ends (empty: none; negative: crop)."""

    paddings: tuple[int, ...]
    mode: str = "constant"
    value: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in PAD_MODES:
            raise ValueError(f"unknown pad mode {self.mode!r}")


@dataclass(frozen=True)
class Tile:
    reps: tuple[int, ...]


@dataclass(frozen=True)
class Expand:
    """The output shape is broadcast(input, shape)."""

    shape: tuple[int, ...]


@dataclass(frozen=True)
class Upsample:
    """Integer nearest upsampling of the last two axes."""

    scale_h: int
    scale_w: int


@dataclass(frozen=True)
class Gather:
    axis: int


def concat(p: Concat, *args: Array) -> Array:
    """Parts that the interpreter had their kernels write into this result
    already (the arena's concat placements) are not copied again."""
    parts = [f32(a) for a in args]
    axis = axis_of(p.axis, parts[0].ndim)
    shape = list(parts[0].shape)
    shape[axis] = sum(part.shape[axis] for part in parts)
    out = current().empty(tuple(shape))
    start = 0
    for part in parts:
        dst = out[(slice(None),) * axis + (slice(start, start + part.shape[axis]),)]
        if not same_memory(dst, part):
            np.copyto(dst, part)
        start += part.shape[axis]
    return relu(out, p.relu.limit) if p.relu.on else out


def same_memory(a: Array, b: Array) -> bool:
    """Whether a and b are the very same elements (not just overlapping)."""
    return (
        a.shape == b.shape
        and a.strides == b.strides
        and a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    )


def split(p: Split, x: Array) -> tuple[Array, ...]:
    axis = axis_of(p.axis, x.ndim)
    sizes = list(p.sizes) or [-(-x.shape[axis] // p.count)] * p.count
    bounds = np.cumsum([0, *sizes])
    if bounds[-1] < x.shape[axis] or any(s < 0 for s in sizes):
        raise ValueError(f"split sizes {sizes} do not cover axis {axis} of {x.shape}")
    lead = (slice(None),) * axis
    return tuple(x[(*lead, slice(lo, hi))] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True))


def slice_(p: Slice, x: Array) -> Array:
    rank = x.ndim
    offset = p.offset or (0,) * rank
    steps = p.steps or (1,) * rank
    ends = p.ends or (None,) * rank
    return x[tuple(slice_bounds(offset[i], ends[i], steps[i], x.shape[i]) for i in range(rank))]


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


def reshape(p: Reshape, x: Array) -> Array:
    shape = list(p.shape)
    if x.size:
        shape = [x.shape[i] if d == 0 and i < x.ndim else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def flatten(p: Flatten, x: Array) -> Array:
    start, end = axis_of(p.start, x.ndim), axis_of(p.end, x.ndim)
    return x.reshape(x.shape[:start] + (-1,) + x.shape[end + 1 :])


def squeeze(p: Squeeze, x: Array) -> Array:
    if not p.axes:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(axis_of(a, x.ndim) for a in p.axes))


def unsqueeze(p: Unsqueeze, x: Array) -> Array:
    rank = x.ndim + len(p.axes)
    return np.expand_dims(x, tuple(axis_of(a, rank) for a in p.axes))


def permute(p: Permute, x: Array) -> Array:
    return np.transpose(x, p.order)


def depth_to_space(p: Depth2Space, x: Array) -> Array:
    """SpaceToDepth's channel order is DCR-like (block offsets outermost)
    unless `crd`."""
    bh, bw = p.block_h, p.block_w
    n, c, h, w = x.shape
    if p.inversed:
        t = x.reshape(n, c, h // bh, bh, w // bw, bw)
        order = (0, 1, 3, 5, 2, 4) if p.crd else (0, 3, 5, 1, 2, 4)
        return np.ascontiguousarray(t.transpose(order)).reshape(n, c * bh * bw, h // bh, w // bw)
    oc = c // (bh * bw)
    if p.crd:
        t = x.reshape(n, oc, bh, bw, h, w).transpose(0, 1, 4, 2, 5, 3)
    else:
        t = x.reshape(n, bh, bw, oc, h, w).transpose(0, 3, 4, 1, 5, 2)
    return np.ascontiguousarray(t).reshape(n, oc, h * bh, w * bw)


def pad(p: Pad, x: Array) -> Array:
    rank = x.ndim
    paddings = p.paddings or (0,) * (2 * rank)
    begins, ends = paddings[:rank], paddings[rank:]
    crop = tuple(
        slice(max(0, -b), x.shape[i] - max(0, -e))
        for i, (b, e) in enumerate(zip(begins, ends, strict=True))
    )
    x = x[crop]
    width = [(max(0, b), max(0, e)) for b, e in zip(begins, ends, strict=True)]
    if p.mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=np.float32(p.value))
    return np.pad(x, width, mode=p.mode)


def tile(p: Tile, x: Array) -> Array:
    return np.tile(x, p.reps)


def expand(p: Expand, x: Array) -> Array:
    return np.array(np.broadcast_to(x, np.broadcast_shapes(x.shape, p.shape)))


def upsample(p: Upsample, x: Array) -> Array:
    return np.repeat(np.repeat(x, p.scale_h, axis=-2), p.scale_w, axis=-1)


def as_index(x: Array) -> Array:
    """Float-valued integer indices (kept in float32) -> int64."""
    return np.rint(x).astype(np.int64)


def gather(p: Gather, x: Array, indices: Array) -> Array:
    axis = axis_of(p.axis, x.ndim)
    idx = as_index(indices)
    dim = x.shape[axis]
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise ValueError(f"gather index out of range [{-dim}, {dim}) on axis {axis}")
    return np.take(x, np.where(idx < 0, idx + dim, idx), axis=axis)


@dataclass(frozen=True)
class Stored:
    """A value move run on stored integers (float32 arrays holding them):
    `move` is its record with the fused ReLU off; the ReLU then clamps at
    Z_out (and Z_out + round(limit / S_out)) of the shared element `out`."""

    move: Any
    relu: Relu
    out: Element


def stored(p: Stored, run: Callable[..., Any], *args: Array) -> Any:
    """run(p.move, *args), then the integer ReLU."""
    y = run(p.move, *args)
    if not p.relu.on:
        return y
    return relu_int(p.relu, np.asarray(y, np.float32), p.out)


@dataclass(frozen=True)
class Fill:
    """A tensor of `shape` holding one value (a DMA fill: Pad's border)."""

    shape: tuple[int, ...]
    value: float


def fill(p: Fill) -> Array:
    """float32 `value` everywhere, as np.pad's constant_values reads it."""
    return np.full(p.shape, np.float32(p.value), np.float32)
