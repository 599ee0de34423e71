"""Reductions, ArgMax/ArgMin and TopK (indices returned as float32)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tpuc.dialects import top
from tpuc.interp.kernels.registry import Array, axis_of, f32, ints, kernel


def _log_sum_exp(x: Array, axis: tuple[int, ...], keepdims: bool) -> Array:
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    total = np.sum(np.exp(x - peak), axis=axis, keepdims=True)
    y = np.log(total) + peak
    return y if keepdims else np.squeeze(y, axis=axis)


REDUCE: dict[str, Callable[[Array, tuple[int, ...], bool], Array]] = {
    "ReduceMean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "ReduceSum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k)),
    "ReduceLogSumExp": _log_sum_exp,
    "ReduceSumSquare": lambda x, a, k: np.sum(x * x, axis=a, keepdims=k),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
}


@kernel(top.ReduceOp)
def reduce(op, args: list[Array]) -> Array:
    """Empty `axes` reduces every axis (ONNX default). Sums run in float64."""
    x = args[0]
    mode = op.value("mode")
    fn = REDUCE.get(mode)
    if fn is None:
        raise ValueError(f"unknown reduce mode {mode!r}")
    axes = tuple(sorted({axis_of(a, x.ndim) for a in ints(op, "axes", range(x.ndim))}))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return f32(fn(x.astype(np.float64), axes, bool(op.value("keepdims"))))


@kernel(top.ArgOp)
def arg(op, args: list[Array]) -> Array:
    x = args[0]
    axis = axis_of(op.value("axis"), x.ndim)
    mode = op.value("mode")
    if mode not in ("ArgMax", "ArgMin"):
        raise ValueError(f"unknown arg mode {mode!r}")
    find = np.argmax if mode == "ArgMax" else np.argmin
    if op.value("select_last_index"):
        flipped = np.flip(x, axis=axis)
        idx = x.shape[axis] - 1 - find(flipped, axis=axis, keepdims=True)
    else:
        idx = find(x, axis=axis, keepdims=True)
    if not op.value("keepdims"):
        idx = np.squeeze(idx, axis=axis)
    return idx.astype(np.float32)


@kernel(top.TopKOp)
def topk(op, args: list[Array]) -> tuple[Array, Array]:
    """Ties keep the lower index first (as onnxruntime); `sorted=False` still
    returns sorted values, which ONNX allows."""
    x = args[0]
    axis = axis_of(op.value("axis"), x.ndim)
    k = int(op.value("K"))
    if not 0 <= k <= x.shape[axis]:
        raise ValueError(f"K={k} outside [0, {x.shape[axis]}] on axis {axis}")
    keys = -x if op.value("largest") else x
    order = np.argsort(keys, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    values = np.take_along_axis(x, idx, axis=axis)
    return f32(values), idx.astype(np.float32)
