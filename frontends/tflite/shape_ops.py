"""Data movement: reshape, concat, pad, slice, split, transpose, resize,
depth-to-space and reductions, with TFLite's NHWC axes mapped to NCHW.

An op whose result does not depend on the layout in a simple way (a
reshape that regroups NHWC data, a transpose) reads the NHWC view of its
input and its 4-D result is permuted back to NCHW; the canonicalizer folds
adjacent permutes.
"""

from __future__ import annotations

import numpy as np

from tpuc.dialects import top
from tpuc.frontends.tflite.converter import NHWC_AXIS_TO_NCHW, TO_NCHW, TfliteConverter
from tpuc.frontends.tflite.model import TOperator
from tpuc.frontends.tflite.registry import converter


def _ints(cv: TfliteConverter, op: TOperator, position: int, what: str) -> list[int]:
    value = cv.const(op.inputs[position]) if len(op.inputs) > position else None
    if value is None:
        raise cv.error(op, f"{what} must be a constant")
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _axis(axis: int, rank: int) -> int:
    axis = axis + rank if axis < 0 else axis
    return NHWC_AXIS_TO_NCHW[axis] if rank == 4 else axis


def _out_shape(cv: TfliteConverter, op: TOperator) -> list[int]:
    """The output's TFLite shape: from the file, or (after --input_shapes
    changed it) from the op's own new-shape operand."""
    if cv.trust_shapes or op.op != "RESHAPE":
        return list(cv.tensor(op.outputs[0]).shape)
    shape = (
        _ints(cv, op, 1, "the new shape")
        if len(op.inputs) > 1
        else list(op.options.NewShapeAsNumpy())
    )
    total = int(np.prod(cv.shape(op.inputs[0])))
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        shape[shape.index(-1)] = total // known
    return shape


@converter("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def convert_reshape(cv: TfliteConverter, op: TOperator) -> None:
    x, out = op.inputs[0], op.outputs[0]
    shape = _out_shape(cv, op)
    if list(cv.shape(x)) == shape:
        cv.bind(out, cv.value(x))
        return
    cv.emit(top.ReshapeOp, [cv.nhwc(x)], out, {"shape": shape}, 0, op, nhwc=True)


@converter("CONCATENATION")
def convert_concat(cv: TfliteConverter, op: TOperator) -> None:
    rank = cv.rank(op.outputs[0])
    axis = _axis(int(op.options.Axis()), rank)
    operands = [cv.value(i) for i in op.inputs]
    cv.emit(top.ConcatOp, operands, op.outputs[0], {"axis": axis}, cv.fused_act(op), op)


@converter("PAD", "PADV2")
def convert_pad(cv: TfliteConverter, op: TOperator) -> None:
    pads = np.asarray(_ints(cv, op, 1, "the paddings")).reshape(-1, 2)
    rank = len(pads)
    if rank == 4:
        pads = pads[list(TO_NCHW)]
    value = 0.0
    if op.op == "PADV2" and len(op.inputs) > 2 and op.inputs[2] >= 0:
        value = float(np.asarray(cv.float_const(op.inputs[2], op, "the pad value")).reshape(-1)[0])
    params = {
        "paddings": [int(v) for v in pads[:, 0]] + [int(v) for v in pads[:, 1]],
        "mode": "constant",
        "val": value,
    }
    cv.emit(top.PadOp, [cv.value(op.inputs[0])], op.outputs[0], params, 0, op)


@converter("MIRROR_PAD")
def convert_mirror_pad(cv: TfliteConverter, op: TOperator) -> None:
    if int(op.options.Mode()) != 0:
        raise cv.error(op, "SYMMETRIC mirror padding is not supported (REFLECT is)")
    pads = np.asarray(_ints(cv, op, 1, "the paddings")).reshape(-1, 2)
    if len(pads) == 4:
        pads = pads[list(TO_NCHW)]
    params = {
        "paddings": [int(v) for v in pads[:, 0]] + [int(v) for v in pads[:, 1]],
        "mode": "reflect",
    }
    cv.emit(top.PadOp, [cv.value(op.inputs[0])], op.outputs[0], params, 0, op)


@converter("TRANSPOSE")
def convert_transpose(cv: TfliteConverter, op: TOperator) -> None:
    perm = _ints(cv, op, 1, "the permutation")
    cv.emit(
        top.PermuteOp, [cv.nhwc(op.inputs[0])], op.outputs[0], {"order": perm}, 0, op, nhwc=True
    )


def _slice_to(cv: TfliteConverter, op: TOperator, begin, end, step, shrink: list[int]) -> None:
    """Slice in TOP's layout, then drop the `shrink` axes (NHWC numbering)."""
    x = op.inputs[0]
    rank = cv.rank(x)
    if rank == 4:
        begin, end, step = ([v[a] for a in TO_NCHW] for v in (begin, end, step))
    params = {"offset": begin, "ends": end, "steps": step}
    if not shrink:
        cv.emit(top.SliceOp, [cv.value(x)], op.outputs[0], params, 0, op)
        return
    name = cv.tensor(op.outputs[0]).name
    value = cv.emit_temp(top.SliceOp, [cv.value(x)], f"{name}_slice", params)
    if rank == 4:
        value = cv.emit_temp(top.PermuteOp, [value], f"{name}_nhwc", {"order": [0, 2, 3, 1]})
    shape = list(cv.tensor(op.outputs[0]).shape)
    cv.emit(top.ReshapeOp, [value], op.outputs[0], {"shape": shape}, 0, op, nhwc=True)


@converter("STRIDED_SLICE")
def convert_strided_slice(cv: TfliteConverter, op: TOperator) -> None:
    o = op.options
    if o.EllipsisMask() or o.NewAxisMask() or (hasattr(o, "Offset") and o.Offset()):
        raise cv.error(op, "ellipsis_mask, new_axis_mask and offset are not supported")
    shape = cv.shape(op.inputs[0])
    begin = _ints(cv, op, 1, "begin")
    end = _ints(cv, op, 2, "end")
    strides = _ints(cv, op, 3, "strides") if len(op.inputs) > 3 else [1] * len(begin)
    starts, stops, steps, shrink = [], [], [], []
    for axis, dim in enumerate(shape):
        if axis >= len(begin):
            starts.append(0), stops.append(dim), steps.append(1)
            continue
        b = None if o.BeginMask() >> axis & 1 else begin[axis]
        e = None if o.EndMask() >> axis & 1 else end[axis]
        s = strides[axis]
        if o.ShrinkAxisMask() >> axis & 1:
            b = begin[axis] + dim if begin[axis] < 0 else begin[axis]
            e, s = b + 1, 1
            shrink.append(axis)
        start, stop, step = slice(b, e, s).indices(dim)
        if step < 0:
            raise cv.error(op, "negative strides are not supported")
        starts.append(start), stops.append(max(stop, start)), steps.append(step)
    _slice_to(cv, op, starts, stops, steps, shrink)


@converter("SLICE")
def convert_slice(cv: TfliteConverter, op: TOperator) -> None:
    shape = cv.shape(op.inputs[0])
    begin = _ints(cv, op, 1, "begin")
    size = _ints(cv, op, 2, "size")
    end = [d if s == -1 else b + s for b, s, d in zip(begin, size, shape, strict=True)]
    _slice_to(cv, op, begin, end, [1] * len(begin), [])


def _split(cv: TfliteConverter, op: TOperator, x: int, axis: int, sizes: list[int]) -> None:
    rank = cv.rank(x)
    top_axis = _axis(axis, rank)
    names = [cv.unique_name(cv.tensor(o).name) for o in op.outputs]
    shapes = []
    for o in op.outputs:
        s = list(cv.tensor(o).shape)
        shapes.append([s[a] for a in TO_NCHW] if len(s) == 4 else s)
    from tpuc.dialects.base import tensor_type

    split = top.SplitOp.make(
        [cv.value(x)],
        names[0],
        {"axis": top_axis, "split_size": sizes},
        result_types=[tensor_type(s) for s in shapes],
        result_names=names,
    )
    cv.block.add_op(split)
    for o, name, r in zip(op.outputs, names, split.results, strict=True):
        cv.ref_keys[name] = (o, rank == 4)
        cv.bind(o, r)


@converter("SPLIT")
def convert_split(cv: TfliteConverter, op: TOperator) -> None:
    axis = _ints(cv, op, 0, "the axis")[0]
    x = op.inputs[1]
    dim = cv.shape(x)[axis]
    n = int(op.options.NumSplits())
    _split(cv, op, x, axis, [dim // n] * n)


@converter("SPLIT_V")
def convert_split_v(cv: TfliteConverter, op: TOperator) -> None:
    x = op.inputs[0]
    sizes = _ints(cv, op, 1, "size_splits")
    axis = _ints(cv, op, 2, "the axis")[0]
    dim = cv.shape(x)[axis]
    if -1 in sizes:
        sizes[sizes.index(-1)] = dim - (sum(sizes) + 1)
    _split(cv, op, x, axis, sizes)


@converter("DEPTH_TO_SPACE", "SPACE_TO_DEPTH")
def convert_depth_to_space(cv: TfliteConverter, op: TOperator) -> None:
    """TFLite's NHWC DepthToSpace orders channels as (dy, dx, c): DCR."""
    block = int(op.options.BlockSize())
    params = {
        "block_h": block,
        "block_w": block,
        "is_CRD": False,
        "is_inversed": op.op == "SPACE_TO_DEPTH",
    }
    cv.emit(top.Depth2SpaceOp, [cv.value(op.inputs[0])], op.outputs[0], params, 0, op)


@converter("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def convert_resize(cv: TfliteConverter, op: TOperator) -> None:
    size = _ints(cv, op, 1, "the size")
    o = op.options
    align = bool(o.AlignCorners()) if o is not None else False
    half = bool(o.HalfPixelCenters()) if o is not None else False
    if op.op == "RESIZE_BILINEAR":
        coord = "align_corners" if align else "half_pixel" if half else "asymmetric"
        modes = {"mode": "linear", "coord_mode": coord}
    elif align:
        modes = {
            "mode": "nearest",
            "coord_mode": "align_corners",
            "nearest_mode": "round_prefer_ceil",
        }
    else:
        coord = "tf_half_pixel_for_nn" if half else "asymmetric"
        modes = {"mode": "nearest", "coord_mode": coord, "nearest_mode": "floor"}
    cv.emit(
        top.InterpOp,
        [cv.value(op.inputs[0])],
        op.outputs[0],
        {"target_shape": size, **modes},
        0,
        op,
    )


REDUCE = {
    "MEAN": "ReduceMean",
    "SUM": "ReduceSum",
    "REDUCE_MAX": "ReduceMax",
    "REDUCE_MIN": "ReduceMin",
    "REDUCE_PROD": "ReduceProd",
}


@converter(*REDUCE)
def convert_reduce(cv: TfliteConverter, op: TOperator) -> None:
    x = op.inputs[0]
    rank = cv.rank(x)
    axes = sorted({a + rank if a < 0 else a for a in _ints(cv, op, 1, "the axes")})
    keep = bool(op.options.KeepDims()) if op.options is not None else False
    params = {"axes": axes, "keepdims": keep, "mode": REDUCE[op.op]}
    if rank != 4:
        cv.emit(top.ReduceOp, [cv.value(x)], op.outputs[0], params, 0, op)
        return
    kept = [a for a in range(4) if a not in axes]
    order_kept = [NHWC_AXIS_TO_NCHW[a] for a in kept]
    if keep or order_kept == sorted(order_kept):
        params["axes"] = sorted(NHWC_AXIS_TO_NCHW[a] for a in axes)
        cv.emit(top.ReduceOp, [cv.value(x)], op.outputs[0], params, 0, op)
        return
    cv.emit(top.ReduceOp, [cv.nhwc(x)], op.outputs[0], params, 0, op, nhwc=True)
