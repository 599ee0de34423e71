"""Data-movement ONNX ops: Reshape, Flatten, (Un)Squeeze, Transpose,
Concat, Split, Slice, Pad, Tile, Expand, Gather, DepthToSpace.

Shape-like operands (target shapes, axes, starts/ends, pads, repeats) must be
known at conversion time; they are resolved against the static input shape
into the explicit, non-negative, full-rank attributes TOP expects.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import NodeProto

from tpuc.dialects import top
from tpuc.frontends.onnx.converter import OnnxConverter
from tpuc.frontends.onnx.elementwise import forward
from tpuc.frontends.onnx.registry import converter


def input_shape(cv: OnnxConverter, node: NodeProto, index: int = 0) -> tuple[int, ...]:
    shape = cv.shape(node.input[index])
    if shape is None:
        raise cv.error(node, f"the shape of '{node.input[index]}' is not static")
    return shape


def const_ints(
    cv: OnnxConverter, node: NodeProto, attr: str, index: int, what: str | None = None
) -> list[int] | None:
    """Integer list from attribute `attr` (old opsets) or constant input
    `index` (new opsets); None when neither is given."""
    attrs = cv.attrs(node)
    if attr in attrs:
        value = attrs[attr]
        return [int(v) for v in (value if isinstance(value, list) else [value])]
    if index >= len(node.input) or not node.input[index]:
        return None
    c = cv.const(node.input[index])
    if c is None:
        raise cv.error(node, f"{what or attr} ('{node.input[index]}') must be a constant")
    return [int(v) for v in c.reshape(-1)]


def resolve_reshape(in_shape: Sequence[int], target: Sequence[int], allowzero: bool) -> list[int]:
    """Replace 0 (copy the input dim) and -1 (infer) in a Reshape target."""
    out = [in_shape[i] if d == 0 and not allowzero else d for i, d in enumerate(target)]
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        total = int(np.prod(in_shape))
        out[out.index(-1)] = total // known if known else 0
    return [int(d) for d in out]


@converter("Reshape")
def convert_reshape(cv: OnnxConverter, node: NodeProto) -> None:
    target = const_ints(cv, node, "shape", 1, "the target shape")
    if target is None:
        raise cv.error(node, "no target shape")
    shape = input_shape(cv, node)
    out = resolve_reshape(shape, target, bool(cv.attrs(node).get("allowzero", 0)))
    if int(np.prod(out)) != int(np.prod(shape)):
        raise cv.error(node, f"cannot reshape {list(shape)} to {target}")
    cv.emit(top.ReshapeOp, [cv.value(node.input[0])], node.output[0], {"shape": out}, shape=out)


@converter("Flatten")
def convert_flatten(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    axis = int(cv.attrs(node).get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    out = [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))]
    x = cv.value(node.input[0])
    if axis == 1:
        cv.emit(top.FlattenOp, [x], node.output[0], {"start_dim": 1, "end_dim": -1}, shape=out)
        return
    cv.emit(top.ReshapeOp, [x], node.output[0], {"shape": out}, shape=out)


@converter("Squeeze")
def convert_squeeze(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    axes = const_ints(cv, node, "axes", 1)
    if axes is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = sorted(a % len(shape) for a in axes)
    out = [d for i, d in enumerate(shape) if i not in axes]
    cv.emit(top.SqueezeOp, [cv.value(node.input[0])], node.output[0], {"axes": axes}, shape=out)


@converter("Unsqueeze")
def convert_unsqueeze(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    axes = const_ints(cv, node, "axes", 1)
    if axes is None:
        raise cv.error(node, "no axes")
    rank = len(shape) + len(axes)
    axes = sorted(a % rank for a in axes)
    out = list(shape)
    for a in axes:
        out.insert(a, 1)
    cv.emit(top.UnsqueezeOp, [cv.value(node.input[0])], node.output[0], {"axes": axes}, shape=out)


@converter("Transpose")
def convert_transpose(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    perm = cv.attrs(node).get("perm") or list(range(len(shape)))[::-1]
    out = [shape[p] for p in perm]
    cv.emit(top.PermuteOp, [cv.value(node.input[0])], node.output[0], {"order": perm}, shape=out)


@converter("Concat")
def convert_concat(cv: OnnxConverter, node: NodeProto) -> None:
    names = [n for n in node.input if n and _size(cv, n) != 0] or [node.input[0]]
    if len(names) == 1:
        cv.bind(
            node.output[0], cv.consts[names[0]] if cv.is_const(names[0]) else cv.value(names[0])
        )
        return
    rank = len(input_shape(cv, node))
    axis = int(cv.attrs(node)["axis"]) % rank
    cv.emit(top.ConcatOp, [cv.value(n) for n in names], node.output[0], {"axis": axis})


def _size(cv: OnnxConverter, name: str) -> int | None:
    shape = cv.shape(name)
    return None if shape is None else int(np.prod(shape))


@converter("Split")
def convert_split(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    attrs = cv.attrs(node)
    axis = int(attrs.get("axis", 0)) % len(shape)
    outputs = list(node.output)
    sizes = const_ints(cv, node, "split", 1, "split sizes")
    if sizes is None:
        n = int(attrs.get("num_outputs", len(outputs)))
        piece = -(-shape[axis] // n)
        sizes = [min(piece, shape[axis] - i * piece) for i in range(n)]
    if sum(sizes) != shape[axis] or len(sizes) != len(outputs):
        raise cv.error(node, f"split sizes {sizes} do not fit dim {shape[axis]}")
    names = [o or cv.unique_name(f"{node.output[0]}_part{i}") for i, o in enumerate(outputs)]
    shapes = [[s if i != axis else size for i, s in enumerate(shape)] for size in sizes]
    params = {"axis": axis, "split_size": sizes}
    cv.emit(
        top.SplitOp, [cv.value(node.input[0])], names[0], params, result_names=names, shapes=shapes
    )


def normalize_slice(
    shape: Sequence[int],
    starts: Sequence[int],
    ends: Sequence[int],
    axes: Sequence[int],
    steps: Sequence[int],
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Full-rank, clamped (offset, ends, steps, out_shape): offsets and ends
    are non-negative except an end of -dim-1, which with a negative step
    means "through index 0"."""
    rank = len(shape)
    offset, end, step = [0] * rank, list(shape), [1] * rank
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        a %= rank
        dim = shape[a]
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        offset[a], end[a], step[a] = s, e, st
    out = [
        max(0, -(-(e - s) // st)) if st > 0 else max(0, -(-(s - e) // -st))
        for s, e, st in zip(offset, end, step, strict=True)
    ]
    # "through index 0" as an end below -dim: the same under Python's and ONNX's rules
    end = [-d - 1 if e < 0 else e for d, e in zip(shape, end, strict=True)]
    return offset, end, step, out


@converter("Slice")
def convert_slice(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    starts = const_ints(cv, node, "starts", 1)
    ends = const_ints(cv, node, "ends", 2)
    if starts is None or ends is None:
        raise cv.error(node, "starts and ends are required")
    axes = const_ints(cv, node, "axes", 3) or list(range(len(starts)))
    steps = const_ints(cv, node, "steps", 4) or [1] * len(starts)
    if any(st == 0 for st in steps):
        raise cv.error(node, "a step of 0 is invalid")
    offset, end, step, out = normalize_slice(shape, starts, ends, axes, steps)
    params = {"offset": offset, "ends": end, "steps": step}
    cv.emit(top.SliceOp, [cv.value(node.input[0])], node.output[0], params, shape=out)


@converter("Pad")
def convert_pad(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    attrs = cv.attrs(node)
    rank = len(shape)
    pads = const_ints(cv, node, "pads", 1, "pads")
    if pads is None:
        raise cv.error(node, "no pads")
    axes = const_ints(cv, node, "axes", 3)
    if axes is not None:
        full = [0] * (2 * rank)
        for i, a in enumerate(axes):
            full[a % rank], full[a % rank + rank] = pads[i], pads[i + len(axes)]
        pads = full
    if any(p < 0 for p in pads):
        raise cv.error(node, f"negative pads {pads} are not supported")
    value = float(attrs.get("value", 0.0))
    if len(node.input) > 2 and node.input[2]:
        c = cv.const(node.input[2])
        if c is None:
            raise cv.error(node, "constant_value must be a constant")
        value = float(c.reshape(-1)[0]) if c.size else 0.0
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise cv.error(node, f"pad mode '{mode}' is not supported")
    out = [d + pads[i] + pads[i + rank] for i, d in enumerate(shape)]
    params = {"paddings": pads, "mode": mode, "val": value}
    cv.emit(top.PadOp, [cv.value(node.input[0])], node.output[0], params, shape=out)


@converter("Tile")
def convert_tile(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    repeats = const_ints(cv, node, "repeats", 1, "repeats")
    if repeats is None or len(repeats) != len(shape):
        raise cv.error(node, "repeats must give one count per axis")
    out = [d * r for d, r in zip(shape, repeats, strict=True)]
    cv.emit(top.TileOp, [cv.value(node.input[0])], node.output[0], {"tile": repeats}, shape=out)


@converter("Expand")
def convert_expand(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    target = const_ints(cv, node, "shape", 1, "the target shape")
    if target is None:
        raise cv.error(node, "no target shape")
    try:
        out = list(np.broadcast_shapes(tuple(shape), tuple(target)))
    except ValueError as exc:
        raise cv.error(node, f"cannot expand {list(shape)} to {target}") from exc
    if out == list(shape):
        forward(cv, node)
        return
    cv.emit(top.ExpandOp, [cv.value(node.input[0])], node.output[0], {"shape": out}, shape=out)


@converter("Gather")
def convert_gather(cv: OnnxConverter, node: NodeProto) -> None:
    data, indices = node.input[0], node.input[1]
    shape = input_shape(cv, node)
    axis = int(cv.attrs(node).get("axis", 0)) % len(shape)
    idx = cv.const(indices)
    if idx is None:
        index_value = cv.value(indices)
    elif np.any(idx < 0):
        fixed = np.where(idx < 0, idx + shape[axis], idx)
        index_value = cv.weight(f"{indices}_fix", fixed)
    else:
        index_value = cv.value(indices)
    ishape = cv.shape(indices)
    out = None if ishape is None else [*shape[:axis], *ishape, *shape[axis + 1 :]]
    cv.emit(top.GatherOp, [cv.value(data), index_value], node.output[0], {"axis": axis}, shape=out)


@converter("DepthToSpace", "SpaceToDepth")
def convert_depth_to_space(cv: OnnxConverter, node: NodeProto) -> None:
    attrs = cv.attrs(node)
    block = int(attrs["blocksize"])
    inverse = node.op_type == "SpaceToDepth"
    params = {
        "block_h": block,
        "block_w": block,
        "is_CRD": attrs.get("mode", "DCR") == "CRD",
        "is_inversed": inverse,
    }
    cv.emit(top.Depth2SpaceOp, [cv.value(node.input[0])], node.output[0], params)
