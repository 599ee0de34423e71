"""Float32 Resize (ONNX Resize semantics) on an `Interp` record (integer
nearest Upsample is in data.py). Nearest resizing only moves values, so it
also runs on stored integers.

Resize is separable: each resized axis is resampled in turn with a small
gather of neighbours and per-position weights (1 tap nearest, 2 linear,
4 cubic), which matches onnxruntime's per-axis coordinate rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpuc.kernels.arrays import Array, f32

Coord = Callable[[np.ndarray, int, int, float], np.ndarray]

COORD: dict[str, Coord] = {
    "half_pixel": lambda x, n_in, n_out, s: (x + 0.5) / s - 0.5,
    "pytorch_half_pixel": lambda x, n_in, n_out, s: (
        (x + 0.5) / s - 0.5 if n_out > 1 else np.zeros_like(x)
    ),
    "align_corners": lambda x, n_in, n_out, s: (
        x * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros_like(x)
    ),
    "asymmetric": lambda x, n_in, n_out, s: x / s,
    "tf_half_pixel_for_nn": lambda x, n_in, n_out, s: (x + 0.5) / s,
    "half_pixel_symmetric": lambda x, n_in, n_out, s: (
        n_in / 2 * (1 - n_out / (s * n_in)) + (x + 0.5) / s - 0.5
    ),
}

NEAREST: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "round_prefer_floor": lambda x: np.ceil(x - 0.5),
    "round_prefer_ceil": lambda x: np.floor(x + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


@dataclass(frozen=True)
class Interp:
    """`target_shape` covers every dim, or the trailing ones; `scales`, when
    given, are the model's scale factors (else out/in)."""

    target_shape: tuple[int, ...]
    scales: tuple[float, ...] = ()
    mode: str = "nearest"
    coord_mode: str = "half_pixel"
    nearest_mode: str = "round_prefer_floor"
    cubic_coeff_a: float = -0.75
    exclude_outside: bool = False


def cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Keys cubic weights of the 4 neighbours floor(x)-1 .. floor(x)+2."""
    d = np.stack([t + 1, t, 1 - t, 2 - t])  # distances to each neighbour

    def near(z):
        return ((a + 2) * z - (a + 3)) * z * z + 1

    def far(z):
        return ((a * z - 5 * a) * z + 8 * a) * z - 4 * a

    return np.stack([far(d[0]), near(d[1]), near(d[2]), far(d[3])])


def coordinates(p: Interp, n_in: int, n_out: int, scale: float, dtype) -> np.ndarray:
    """Input coordinate of every output position along one axis."""
    coord_mode = p.coord_mode
    coord = COORD.get(coord_mode)
    if coord is None:
        raise ValueError(f"unsupported coord_mode {coord_mode!r}")
    return coord(np.arange(n_out, dtype=dtype), n_in, n_out, dtype(scale))


def nearest_taps(p: Interp, n_in: int, n_out: int, scale: float) -> np.ndarray:
    """Nearest source index per output position. onnxruntime floors/ceils
    float32 coordinates (3 / 0.6f is exactly 5 there), but its rounding modes
    resolve ties as exact arithmetic does, which float64 reproduces."""
    mode = p.nearest_mode
    rounding = NEAREST.get(mode)
    if rounding is None:
        raise ValueError(f"unsupported nearest_mode {mode!r}")
    exact = mode.startswith("round")
    if exact and scale == np.float32(n_out / n_in):
        scale = n_out / n_in  # the float32 scale was derived from the sizes
    x = coordinates(p, n_in, n_out, scale, np.float64 if exact else np.float32)
    if exact:  # coordinates within float32 noise of a half-integer are ties
        halves = np.rint(x * 2)
        tie = np.abs(x * 2 - halves) < 1e-6 * np.maximum(1.0, np.abs(x))
        x = np.where(tie, halves / 2, x)
    return np.clip(rounding(x), 0, n_in - 1).astype(np.int64)


def taps(p: Interp, n_in: int, n_out: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Neighbour indices [taps, n_out] and weights [taps, n_out] for one axis."""
    mode = p.mode
    if mode == "nearest":
        return nearest_taps(p, n_in, n_out, scale)[None], np.ones((1, n_out))
    x = coordinates(p, n_in, n_out, scale, np.float32)  # float32, as onnxruntime
    if mode == "linear":
        x = np.clip(x, 0, n_in - 1)
        lo = np.floor(x)
        t = x - lo
        idx = np.stack([lo, lo + 1]).astype(np.int64)
        return np.clip(idx, 0, n_in - 1), np.stack([1 - t, t])
    if mode == "cubic":
        lo = np.floor(x)
        idx = (lo[None] + np.arange(-1, 3)[:, None]).astype(np.int64)
        weights = cubic_weights(x - lo, p.cubic_coeff_a)
        if p.exclude_outside:
            weights = np.where((idx >= 0) & (idx < n_in), weights, 0.0)
            weights /= weights.sum(axis=0, keepdims=True)
        return np.clip(idx, 0, n_in - 1), weights
    raise ValueError(f"unsupported resize mode {mode!r}")


def resample(p: Interp, x: Array, axis: int, n_out: int, scale: float) -> Array:
    idx, weights = taps(p, x.shape[axis], n_out, scale)
    shape = [1] * x.ndim
    shape[axis] = n_out
    y = np.take(x, idx[0], axis=axis)
    if len(idx) == 1:
        return y
    y = y * weights[0].reshape(shape)
    for i, w in zip(idx[1:], weights[1:], strict=True):
        y += np.take(x, i, axis=axis) * w.reshape(shape)
    return y


def interp(p: Interp, x: Array) -> Array:
    target = list(p.target_shape)
    first = x.ndim - len(target)
    if first < 0:
        raise ValueError(f"target_shape {target} has more dims than the input {x.shape}")
    scales = list(p.scales)
    if scales and len(scales) != len(target):
        raise ValueError(f"scales {scales} do not match target_shape {target}")
    y = x if p.mode == "nearest" else x.astype(np.float64)
    for i, n_out in enumerate(target):
        axis = first + i
        n_in = x.shape[axis]
        scale = scales[i] if scales else float(np.float32(n_out) / np.float32(n_in))
        if n_out == n_in:  # onnxruntime copies such axes whatever the scale
            continue
        y = resample(p, y, axis, n_out, scale)
    return f32(y)
