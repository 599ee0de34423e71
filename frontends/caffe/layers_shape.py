"""Eltwise, Concat, Slice, Reshape, Flatten, Permute and the fork layers
that move data (ShuffleChannel, Upsample, Interp), with Caffe's shape rules."""

from __future__ import annotations

import numpy as np

from tpuc.dialects import top
from tpuc.frontends.caffe.converter import CaffeConverter
from tpuc.frontends.caffe.model import Layer
from tpuc.frontends.caffe.registry import converter


def _axis(cv: CaffeConverter, layer: Layer, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise cv.error(layer, f"axis {axis} is out of range for rank {rank}")
    return axis % rank


@converter("Eltwise")
def convert_eltwise(cv: CaffeConverter, layer: Layer) -> None:
    """SUM (each input times its coeff), PROD or MAX of same-shaped inputs."""
    p = layer.param.eltwise_param
    shapes = [cv.shape(b) for b in layer.bottoms]
    if len(shapes) < 2 or any(s != shapes[0] for s in shapes):
        raise cv.error(
            layer, f"needs two or more inputs of one shape, got {[list(s) for s in shapes]}"
        )
    shape = shapes[0]
    inputs = [cv.value(b) for b in layer.bottoms]
    if p.operation == p.PROD:
        cv.emit(top.MulOp, inputs, layer, None, shape)
        return
    if p.operation == p.MAX:
        acc = inputs[0]
        for i, x in enumerate(inputs[1:-1], 1):
            acc = cv.emit_temp(top.MaxOp, [acc, x], f"{layer.name}_max{i}", None, shape)
        cv.emit(top.MaxOp, [acc, inputs[-1]], layer, None, shape)
        return
    coeff = [float(c) for c in p.coeff]
    if coeff and len(coeff) != len(inputs):
        raise cv.error(layer, f"{len(coeff)} coeff for {len(inputs)} inputs")
    for i, c in enumerate(coeff):
        if c != 1.0:
            attrs = {"const_val": c}
            inputs[i] = cv.emit_temp(
                top.MulConstOp, [inputs[i]], f"{layer.name}_c{i}", attrs, shape
            )
    cv.emit(top.AddOp, inputs, layer, None, shape)


@converter("Concat")
def convert_concat(cv: CaffeConverter, layer: Layer) -> None:
    p = layer.param.concat_param
    shapes = [cv.shape(b) for b in layer.bottoms]
    rank = len(shapes[0])
    axis = _axis(cv, layer, p.axis if p.HasField("axis") or not p.HasField("concat_dim")
                 else p.concat_dim, rank)  # fmt: skip
    for s in shapes[1:]:
        off_axis = [d for i, d in enumerate(s) if i != axis]
        if len(s) != rank or off_axis != [d for i, d in enumerate(shapes[0]) if i != axis]:
            raise cv.error(layer, f"inputs {[list(x) for x in shapes]} differ off axis {axis}")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    if len(layer.bottoms) == 1:
        cv.emit(top.ReshapeOp, [cv.value(layer.bottoms[0])], layer, {"shape": out}, out)
        return
    inputs = [cv.value(b) for b in layer.bottoms]
    cv.emit(top.ConcatOp, inputs, layer, {"axis": axis}, out)


@converter("Slice")
def convert_slice(cv: CaffeConverter, layer: Layer) -> None:
    """`slice_point`s cut the axis; without them the tops share it equally."""
    p = layer.param.slice_param
    shape = cv.shape(layer.bottoms[0])
    axis = _axis(cv, layer, p.axis if p.HasField("axis") or not p.HasField("slice_dim")
                 else p.slice_dim, len(shape))  # fmt: skip
    size, count = shape[axis], len(layer.tops)
    points = [int(v) for v in p.slice_point]
    if points:
        if len(points) != count - 1 or points != sorted(points) or points[-1] >= size:
            raise cv.error(layer, f"slice_point {points} does not cut {size} into {count}")
    else:
        if size % count:
            raise cv.error(layer, f"axis {axis} of size {size} does not split into {count}")
        points = [size // count * i for i in range(1, count)]
    bounds = [0, *points, size]
    x = cv.value(layer.bottoms[0])
    for i in range(count):
        begin, end = bounds[i], bounds[i + 1]
        offset = [0] * len(shape)
        ends = list(shape)
        offset[axis], ends[axis] = begin, end
        out = list(shape)
        out[axis] = end - begin
        attrs = {"offset": offset, "ends": ends, "steps": [1] * len(shape)}
        cv.emit(top.SliceOp, [x], layer, attrs, out, top_index=i)


def reshape_shape(shape: list[int], dims: list[int], axis: int, num_axes: int) -> list[int] | str:
    """Caffe's Reshape: dims replace axes [axis, axis+num_axes); 0 copies the
    input dim at that place, one -1 is inferred. A str is the error."""
    rank = len(shape)
    start = axis if axis >= 0 else rank + axis + 1
    end = rank if num_axes == -1 else start + num_axes
    if not 0 <= start <= rank or not start <= end <= rank:
        return f"axis {axis} / num_axes {num_axes} out of range for rank {rank}"
    middle = []
    for i, d in enumerate(dims):
        if d == 0:
            if start + i >= rank:
                return f"dim {i} is 0 but the input has no axis {start + i}"
            middle.append(shape[start + i])
        else:
            middle.append(d)
    out = [*shape[:start], *middle, *shape[end:]]
    if out.count(-1) > 1:
        return "more than one -1 in shape"
    total = int(np.prod(shape))
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        if known == 0 or total % known:
            return f"cannot infer -1: {total} values into {out}"
        out[out.index(-1)] = total // known
    if int(np.prod(out)) != total or min(out, default=1) <= 0:
        return f"shape {out} does not hold the {total} values of {shape}"
    return out


@converter("Reshape")
def convert_reshape(cv: CaffeConverter, layer: Layer) -> None:
    p = layer.param.reshape_param
    shape = list(cv.shape(layer.bottoms[0]))
    out = reshape_shape(shape, [int(d) for d in p.shape.dim], p.axis, p.num_axes)
    if isinstance(out, str):
        raise cv.error(layer, out)
    cv.emit(top.ReshapeOp, [cv.value(layer.bottoms[0])], layer, {"shape": out}, out)


@converter("Flatten")
def convert_flatten(cv: CaffeConverter, layer: Layer) -> None:
    """Axes [axis, end_axis] merge into one."""
    p = layer.param.flatten_param
    shape = list(cv.shape(layer.bottoms[0]))
    start = _axis(cv, layer, p.axis, len(shape))
    end = _axis(cv, layer, p.end_axis, len(shape))
    out = [*shape[:start], int(np.prod(shape[start : end + 1])), *shape[end + 1 :]]
    cv.emit(top.ReshapeOp, [cv.value(layer.bottoms[0])], layer, {"shape": out}, out)


@converter("Permute")
def convert_permute(cv: CaffeConverter, layer: Layer) -> None:
    """SSD's Permute: the axes `order` names first, the others after in order."""
    shape = cv.shape(layer.bottoms[0])
    order = [int(a) for a in layer.param.permute_param.order]
    if len(set(order)) != len(order) or any(a >= len(shape) for a in order):
        raise cv.error(layer, f"order {order} is not a permutation of {len(shape)} axes")
    order += [a for a in range(len(shape)) if a not in order]
    out = [shape[a] for a in order]
    x = cv.value(layer.bottoms[0])
    cv.emit(top.PermuteOp, [x], layer, {"order": order}, out)


@converter("ShuffleChannel")
def convert_shuffle_channel(cv: CaffeConverter, layer: Layer) -> None:
    """[N, g*k, H, W] -> view [N, g, k, H*W] -> swap g, k -> back."""
    group = int(layer.param.shuffle_channel_param.group)
    n, c, *rest = cv.shape(layer.bottoms[0])
    if group <= 0 or c % group:
        raise cv.error(layer, f"group {group} does not divide {c} channels")
    spatial = int(np.prod(rest))
    split = [n, group, c // group, spatial]
    x = cv.value(layer.bottoms[0])
    x = cv.emit_temp(top.ReshapeOp, [x], f"{layer.name}_split", {"shape": split}, split)
    swapped = [n, c // group, group, spatial]
    order = {"order": [0, 2, 1, 3]}
    x = cv.emit_temp(top.PermuteOp, [x], f"{layer.name}_swap", order, swapped)
    out = [n, c, *rest]
    cv.emit(top.ReshapeOp, [x], layer, {"shape": out}, out)


@converter("Upsample")
def convert_upsample(cv: CaffeConverter, layer: Layer) -> None:
    """Nearest upsampling by `scale` (or scale_h/scale_w)."""
    p = layer.param.upsample_param
    sh = p.scale_h if p.HasField("scale_h") else p.scale
    sw = p.scale_w if p.HasField("scale_w") else p.scale
    if len(layer.bottoms) != 1 or sh <= 0 or sw <= 0:
        raise cv.error(layer, "only one-input nearest upsampling by a positive scale is supported")
    n, c, h, w = cv.shape(layer.bottoms[0])
    attrs = {"scale_h": int(sh), "scale_w": int(sw)}
    cv.emit(top.UpsampleOp, [cv.value(layer.bottoms[0])], layer, attrs, [n, c, h * sh, w * sw])


def interp_size(size: int, p) -> int:
    """PSPNet's Interp output size: `height`/`width`, else shrink then zoom."""
    out = size + p.pad_beg + p.pad_end
    if p.shrink_factor != 1:
        out = (out - 1) // p.shrink_factor + 1
    if p.zoom_factor != 1:
        out = out + (out - 1) * (p.zoom_factor - 1)
    return out


@converter("Interp")
def convert_interp(cv: CaffeConverter, layer: Layer) -> None:
    """PSPNet's Interp: bilinear resize with aligned corners."""
    p = layer.param.interp_param
    if p.pad_beg or p.pad_end or len(layer.bottoms) != 1:
        raise cv.error(layer, "pad_beg/pad_end and a second (size) input are not supported")
    if p.shrink_factor <= 0 or p.zoom_factor <= 0:
        raise cv.error(layer, "shrink_factor and zoom_factor must be positive")
    n, c, h, w = cv.shape(layer.bottoms[0])
    if p.height > 0 and p.width > 0:
        size = [int(p.height), int(p.width)]
    else:
        size = [interp_size(h, p), interp_size(w, p)]
    attrs = {"target_shape": size, "mode": "linear", "coord_mode": "align_corners"}
    cv.emit(top.InterpOp, [cv.value(layer.bottoms[0])], layer, attrs, [n, c, *size])
