"""The fold functions: numpy evaluations of TFLite ops whose inputs are
known at conversion time (folding.py runs them).

Each returns one array per output in TFLite's own layout and with TFLite's
semantics (integer DIV truncates, FLOOR_DIV/FLOOR_MOD floor, STRIDED_SLICE
follows the masks as TensorFlow does); the driver casts each to its
output's dtype. Forms the function does not evaluate raise `FoldError`.
"""

from __future__ import annotations

import numpy as np

from tpuc.frontends.tflite.folding import FoldArgs, FoldError, resolve_shape
from tpuc.frontends.tflite.registry import folder

# --- constants: weight storage and layout ---------------------------------------------


@folder("DEQUANTIZE")
def _dequantize(a: FoldArgs) -> list[np.ndarray]:
    """The reader already holds a quantized constant's real values; a
    float16 one is widened."""
    return [a.value(0, "the input").astype(np.float32)]


@folder("DENSIFY")
def _densify(a: FoldArgs) -> list[np.ndarray]:
    """The reader densified the sparse buffer."""
    return [a.value(0, "the input")]


@folder("CAST")
def _cast(a: FoldArgs) -> list[np.ndarray]:
    """The driver casts to the output's type (float -> int truncates, as
    TFLite's static_cast does)."""
    return [a.value(0, "the input")]


@folder("TRANSPOSE")
def _transpose(a: FoldArgs) -> list[np.ndarray]:
    return [np.transpose(a.value(0, "the input"), a.ints(1, "the permutation"))]


@folder("RESHAPE")
def _reshape(a: FoldArgs) -> list[np.ndarray]:
    """The new shape from the shape operand, else the options, else the
    output tensor's shape (as TFLite's kernel picks it)."""
    x = a.value(0, "the input")
    if len(a.values) > 1 and a.values[1] is not None:
        shape = a.ints(1, "the new shape")
    elif a.options is not None and not a.options.NewShapeIsNone():
        shape = [int(d) for d in a.options.NewShapeAsNumpy()]
    else:
        shape = list(a.out_shapes[0])
    return [x.reshape(resolve_shape(shape, x.size))]


@folder("SQUEEZE")
def _squeeze(a: FoldArgs) -> list[np.ndarray]:
    x = a.value(0, "the input")
    dims = []
    if a.options is not None and a.options.SqueezeDimsLength():
        dims = [int(d) for d in a.options.SqueezeDimsAsNumpy()]
    return [np.squeeze(x, axis=tuple(dims) if dims else None)]


@folder("EXPAND_DIMS")
def _expand_dims(a: FoldArgs) -> list[np.ndarray]:
    return [np.expand_dims(a.value(0, "the input"), a.ints(1, "the axis")[0])]


# --- shapes -------------------------------------------------------------------------


@folder("SHAPE", shape_only=True)
def _shape(a: FoldArgs) -> list[np.ndarray]:
    """The input's static shape (the driver casts to out_type)."""
    return [np.array(a.shapes[0], np.int64)]


@folder("RANK", shape_only=True)
def _rank(a: FoldArgs) -> list[np.ndarray]:
    return [np.array(len(a.shapes[0]), np.int64)]


def _strided_index(a: FoldArgs) -> tuple:
    """STRIDED_SLICE's begin/end/strides and masks as a numpy index (the
    op was specified after numpy's basic slicing)."""
    o = a.options
    begin, end = a.ints(1, "begin"), a.ints(2, "end")
    strides = a.ints(3, "strides") if len(a.values) > 3 else [1] * len(begin)
    if not len(begin) == len(end) == len(strides):
        raise FoldError("begin, end and strides differ in length")
    if 0 in strides:
        raise FoldError("a stride is 0")
    offset = bool(o.Offset()) if o is not None and hasattr(o, "Offset") else False
    names = ("BeginMask", "EndMask", "EllipsisMask", "NewAxisMask", "ShrinkAxisMask")
    masks = [int(getattr(o, m)()) if o is not None else 0 for m in names]
    begin_mask, end_mask, ellipsis, new_axis, shrink = masks
    index: list = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides, strict=True)):
        bit = 1 << i
        if ellipsis & bit:
            index.append(Ellipsis)
        elif new_axis & bit:
            index.append(None)
        elif shrink & bit:
            index.append(b)
        else:
            stop = None if end_mask & bit else (b + e if offset else e)
            index.append(slice(None if begin_mask & bit else b, stop, s))
    return tuple(index)


@folder("STRIDED_SLICE")
def _strided_slice(a: FoldArgs) -> list[np.ndarray]:
    return [np.asarray(a.value(0, "the input")[_strided_index(a)])]


@folder("SLICE")
def _slice(a: FoldArgs) -> list[np.ndarray]:
    x = a.value(0, "the input")
    begin, size = a.ints(1, "begin"), a.ints(2, "size")
    if not len(begin) == len(size) == x.ndim:
        raise FoldError(f"begin {begin} and size {size} do not match the input's rank {x.ndim}")
    index = tuple(
        slice(b, d if s == -1 else b + s) for b, s, d in zip(begin, size, x.shape, strict=True)
    )
    return [x[index]]


@folder("PACK")
def _pack(a: FoldArgs) -> list[np.ndarray]:
    values = [a.value(i, "a value") for i in range(len(a.values))]
    return [np.stack(values, axis=int(a.options.Axis()))]


@folder("UNPACK")
def _unpack(a: FoldArgs) -> list[np.ndarray]:
    x = a.value(0, "the input")
    axis = int(a.options.Axis())
    if x.shape[axis] != len(a.out_dtypes):
        raise FoldError(f"{x.shape[axis]} values along axis {axis}, {len(a.out_dtypes)} outputs")
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]


@folder("GATHER")
def _gather(a: FoldArgs) -> list[np.ndarray]:
    params, indices = a.value(0, "the params"), np.asarray(a.value(1, "the indices"))
    axis = int(a.options.Axis()) if a.options is not None else 0
    if a.options is not None and int(a.options.BatchDims()):
        raise FoldError("batch_dims is not supported")
    axis = axis + params.ndim if axis < 0 else axis
    if indices.size and (indices.min() < 0 or indices.max() >= params.shape[axis]):
        raise FoldError(f"an index is outside [0, {params.shape[axis]})")
    return [np.take(params, indices.astype(np.int64), axis=axis)]


@folder("CONCATENATION")
def _concatenation(a: FoldArgs) -> list[np.ndarray]:
    values = [a.value(i, "a value") for i in range(len(a.values))]
    result = np.concatenate(values, axis=int(a.options.Axis()))
    return [_activation(result, a)]


@folder("FILL")
def _fill(a: FoldArgs) -> list[np.ndarray]:
    return [np.full(a.ints(0, "the dims"), np.asarray(a.value(1, "the value")).reshape(()))]


@folder("RANGE")
def _range(a: FoldArgs) -> list[np.ndarray]:
    names = ("start", "limit", "delta")
    start, limit, delta = (np.asarray(a.value(i, n)).reshape(()) for i, n in enumerate(names))
    if delta == 0:
        raise FoldError("delta is 0")
    return [np.arange(start, limit, delta)]


# --- arithmetic ---------------------------------------------------------------------

# fused activation -> clamp (TANH and SIGN_BIT are no clamp in TFLite's kernels)
CLAMPS = {1: (0, None), 2: (-1, 1), 3: (0, 6)}


def _activation(x: np.ndarray, a: FoldArgs) -> np.ndarray:
    o = a.options
    act = int(o.FusedActivationFunction()) if hasattr(o, "FusedActivationFunction") else 0
    if act not in CLAMPS:
        return x
    lo, hi = CLAMPS[act]
    return np.clip(x, lo, hi)


def _integers(*xs: np.ndarray) -> bool:
    return all(np.asarray(x).dtype.kind in "iu" for x in xs)


def _nonzero(y: np.ndarray) -> np.ndarray:
    if _integers(y) and np.any(y == 0):
        raise FoldError("integer division by zero")
    return y


def _truncdiv(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """DIV: true division on floats, C's truncation on integers."""
    if not _integers(x, y):
        return np.true_divide(x, y)
    q = np.abs(x) // np.abs(_nonzero(y))
    return np.where((x < 0) != (y < 0), -q, q)


BINARY = {
    "ADD": np.add,
    "SUB": np.subtract,
    "MUL": np.multiply,
    "DIV": _truncdiv,
    "FLOOR_DIV": lambda x, y: np.floor_divide(x, _nonzero(y)),
    "FLOOR_MOD": lambda x, y: np.mod(x, _nonzero(y)),
    "MAXIMUM": np.maximum,
    "MINIMUM": np.minimum,
    "SQUARED_DIFFERENCE": lambda x, y: np.square(x - y),
}


@folder(*BINARY)
def _binary(a: FoldArgs) -> list[np.ndarray]:
    """Binary arithmetic broadcasting as numpy does, in the inputs' own
    type (int32 shape arithmetic stays integer)."""
    x, y = (np.asarray(a.value(i, n)) for i, n in enumerate(("x", "y")))
    if _integers(x, y):
        x, y = x.astype(np.int64), y.astype(np.int64)
    with np.errstate(all="ignore"):
        return [_activation(BINARY[a.op.op](x, y), a)]


REDUCERS = {"REDUCE_PROD": np.prod, "SUM": np.sum, "REDUCE_MAX": np.max, "REDUCE_MIN": np.min}


@folder(*REDUCERS)
def _reduce(a: FoldArgs) -> list[np.ndarray]:
    """REDUCE_PROD(shape[1:]) is how a flatten computes its row size."""
    x = a.value(0, "the input")
    axes = tuple(a.ints(1, "the axes"))
    keep = bool(a.options.KeepDims()) if a.options is not None else False
    return [REDUCERS[a.op.op](x, axis=axes, keepdims=keep)]
