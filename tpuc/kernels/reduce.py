"""Float32 reductions, ArgMax/ArgMin and TopK (indices returned as
float32). ReduceMax/ReduceMin only select values, so they also run on
stored integers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpuc.kernels.arrays import Array, axis_of, f32


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


@dataclass(frozen=True)
class Reduction:
    """`mode` names an entry of REDUCE; empty `axes`: every axis (ONNX)."""

    mode: str
    axes: tuple[int, ...] = ()
    keepdims: bool = True


@dataclass(frozen=True)
class Arg:
    """ArgMax or ArgMin along `axis`."""

    mode: str
    axis: int = 0
    keepdims: bool = True
    select_last_index: bool = False


@dataclass(frozen=True)
class TopK:
    axis: int
    k: int
    largest: bool = True


def reduce(p: Reduction, x: Array) -> Array:
    """Computed in float64, rounded once to float32."""
    fn = REDUCE.get(p.mode)
    if fn is None:
        raise ValueError(f"unknown reduce mode {p.mode!r}")
    axes = tuple(sorted({axis_of(a, x.ndim) for a in (p.axes or range(x.ndim))}))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return f32(fn(x.astype(np.float64), axes, p.keepdims))


def arg(p: Arg, x: Array) -> Array:
    axis = axis_of(p.axis, x.ndim)
    if p.mode not in ("ArgMax", "ArgMin"):
        raise ValueError(f"unknown arg mode {p.mode!r}")
    find = np.argmax if p.mode == "ArgMax" else np.argmin
    if p.select_last_index:
        flipped = np.flip(x, axis=axis)
        idx = x.shape[axis] - 1 - find(flipped, axis=axis, keepdims=True)
    else:
        idx = find(x, axis=axis, keepdims=True)
    if not p.keepdims:
        idx = np.squeeze(idx, axis=axis)
    return idx.astype(np.float32)


def topk(p: TopK, x: Array) -> tuple[Array, Array]:
    """Ties keep the lower index first (as onnxruntime); values come sorted
    (which ONNX allows even when `sorted` is false)."""
    axis = axis_of(p.axis, x.ndim)
    if not 0 <= p.k <= x.shape[axis]:
        raise ValueError(f"K={p.k} outside [0, {x.shape[axis]}] on axis {axis}")
    keys = -x if p.largest else x
    order = np.argsort(keys, axis=axis, kind="stable")
    idx = np.take(order, np.arange(p.k), axis=axis)
    values = np.take_along_axis(x, idx, axis=axis)
    return f32(values), idx.astype(np.float32)
