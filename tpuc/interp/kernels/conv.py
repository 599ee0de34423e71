"""Convolution, transposed convolution and matmul through BLAS.

Convolutions become one matmul: 1x1 kernels use the input as [C, H*W]
directly (no im2col); other kernels build the im2col matrix as one strided
view of the padded input and one contiguous copy. Depthwise convolutions
accumulate over kernel taps instead, which beats a matmul per group.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tpuc.dialects import top
from tpuc.interp.kernels.registry import Array, f32, fused_relu, ints, kernel


def pad_spatial(x: Array, begins: list[int], ends: list[int], value: float = 0.0) -> Array:
    """x padded on its trailing spatial dims (faster than np.pad: the
    interior is copied once and only the border is filled)."""
    if not any(begins) and not any(ends):
        return x
    spatial = len(begins)
    first = x.ndim - spatial
    dims = x.shape[first:]
    shape = x.shape[:first] + tuple(d + b + e for d, b, e in zip(dims, begins, ends, strict=True))
    out = np.empty(shape, dtype=x.dtype)
    for i, (b, e) in enumerate(zip(begins, ends, strict=True)):
        lead = (slice(None),) * (first + i)
        out[(*lead, slice(0, b))] = value
        out[(*lead, slice(shape[first + i] - e, None))] = value
    core = tuple(slice(b, b + d) for b, d in zip(begins, dims, strict=True))
    out[(Ellipsis, *core)] = x
    return out


def out_size(size: int, k: int, stride: int, dil: int, pb: int, pe: int) -> int:
    return (size + pb + pe - (k - 1) * dil - 1) // stride + 1


class ConvGeometry:
    """The resolved spatial parameters of a convolution-like op."""

    def __init__(self, op, kernel: tuple[int, ...]):
        n = len(kernel)
        self.kernel = kernel
        self.strides = ints(op, "strides", [1] * n)
        self.dilations = ints(op, "dilations", [1] * n)
        pads = ints(op, "pads", [0] * (2 * n))
        self.begins, self.ends = pads[:n], pads[n:]
        self.group = int(op.value("group") or 1)


def windows(xp: Array, g: ConvGeometry, out: tuple[int, ...]) -> Array:
    """Strided view [N, C, *kernel, *out] of the padded input xp."""
    n = len(g.kernel)
    sp = xp.strides[2:]
    shape = xp.shape[:2] + tuple(g.kernel) + tuple(out)
    strides = (
        xp.strides[:2]
        + tuple(s * d for s, d in zip(sp, g.dilations, strict=True))
        + tuple(s * st for s, st in zip(sp, g.strides, strict=True))
    )
    assert len(shape) == 2 + 2 * n
    return as_strided(xp, shape=shape, strides=strides, writeable=False)


def conv_nd(x: Array, w: Array, g: ConvGeometry) -> Array:
    """Cross-correlation of x [N, C, *S] with w [OC, C/group, *K] -> [N, OC, *O]."""
    n_batch, channels = x.shape[:2]
    oc, cg = w.shape[:2]
    out = tuple(
        out_size(x.shape[2 + i], k, g.strides[i], g.dilations[i], g.begins[i], g.ends[i])
        for i, k in enumerate(g.kernel)
    )
    length = math.prod(out)
    if g.group == channels and cg == 1 and g.group > 1:
        return depthwise(x, w, g, out)
    if all(k == 1 for k in g.kernel) and not any(g.begins) and not any(g.ends):
        sub = x[(Ellipsis, *(slice(None, None, s) for s in g.strides))]
        sub = sub[(Ellipsis, *(slice(0, o) for o in out))]
        if not sub.flags.c_contiguous:
            sub = np.ascontiguousarray(sub)
        col = sub.reshape(n_batch, g.group, cg, length)
    else:
        xp = pad_spatial(x, g.begins, g.ends)
        col = np.ascontiguousarray(windows(xp, g, out))
        col = col.reshape(n_batch, g.group, cg * math.prod(g.kernel), length)
    wm = w.reshape(g.group, oc // g.group, -1)
    y = np.matmul(wm[0], col[:, 0]) if g.group == 1 else np.matmul(wm, col)
    return y.reshape((n_batch, oc) + out)


def depthwise(x: Array, w: Array, g: ConvGeometry, out: tuple[int, ...]) -> Array:
    """Depthwise conv (one input channel per group): a multiply-add per
    kernel tap, vectorised over batch, channels and output pixels."""
    n_batch, channels = x.shape[:2]
    mult = w.shape[0] // channels
    wk = w.reshape(channels, mult, math.prod(g.kernel))
    if len(out) == 2 and g.strides == [1, 1]:
        return depthwise_rows(x, wk, g, out)
    view = windows(pad_spatial(x, g.begins, g.ends), g, out)  # [N, C, *K, *O]
    acc = np.zeros((n_batch, channels, mult) + out, dtype=np.float32)
    tmp = np.empty_like(acc)
    extra = (None,) * len(out)
    for i, tap in enumerate(np.ndindex(*g.kernel)):
        win = view[(slice(None), slice(None), *tap)][:, :, None]
        np.multiply(win, wk[(slice(None), slice(None), i, *extra)], out=tmp)
        acc += tmp
    return acc.reshape((n_batch, channels * mult) + out)


def depthwise_rows(x: Array, wk: Array, g: ConvGeometry, out: tuple[int, ...]) -> Array:
    """Stride-1 2-D depthwise conv on the padded input flattened to rows of
    width Wp: every tap is then one contiguous slice; the Wp - OW wrapped
    columns of each output row are computed and dropped."""
    n_batch, channels, mult = x.shape[0], x.shape[1], wk.shape[1]
    ends = [g.ends[0] + 1, g.ends[1]]  # one spare row absorbs the last taps' overrun
    xp = pad_spatial(x, g.begins, ends)
    row = xp.shape[3]
    flat = xp.reshape(n_batch, channels, 1, -1)
    length = out[0] * row
    acc = np.zeros((n_batch, channels, mult, length), dtype=np.float32)
    tmp = np.empty_like(acc)
    for i, (kh, kw) in enumerate(np.ndindex(*g.kernel)):
        start = kh * g.dilations[0] * row + kw * g.dilations[1]
        np.multiply(flat[..., start : start + length], wk[:, :, i, None], out=tmp)
        acc += tmp
    acc = acc.reshape(n_batch, channels * mult, out[0], row)[..., : out[1]]
    return np.ascontiguousarray(acc)


def epilogue(op, y: Array, b: Array | None) -> Array:
    """y += bias (per channel, axis 1), then the fused ReLU; in place."""
    if b is not None:
        y += b.reshape((-1,) + (1,) * (y.ndim - 2))
    return fused_relu(op, y)


@kernel(top.ConvOp)
def conv(op, args: list[Array | None]) -> Array:
    x, w, b = args
    g = ConvGeometry(op, tuple(w.shape[2:]))
    y = conv_nd(f32(x), f32(w), g)
    return epilogue(op, np.ascontiguousarray(y, dtype=np.float32), None if b is None else f32(b))


@kernel(top.DeconvOp)
def deconv(op, args: list[Array | None]) -> Array:
    """Transposed conv: one matmul to [OC/g * K, L_in] per group, then each
    kernel tap is scattered (strided add) into the output."""
    x, w, b = args
    x, w = f32(x), f32(w)
    g = ConvGeometry(op, tuple(w.shape[2:]))
    n = len(g.kernel)
    n_batch, ic = x.shape[:2]
    ocg = w.shape[1]
    spatial_in = x.shape[2:]
    extra = ints(op, "output_padding", [0] * n)
    full = tuple(
        (s - 1) * st + (k - 1) * d + 1 + e
        for s, st, k, d, e in zip(spatial_in, g.strides, g.kernel, g.dilations, extra, strict=True)
    )
    groups = g.group
    wm = w.reshape(groups, ic // groups, ocg * math.prod(g.kernel)).transpose(0, 2, 1)
    xm = x.reshape(n_batch, groups, ic // groups, math.prod(spatial_in))
    col = np.matmul(wm, xm).reshape((n_batch, groups * ocg) + tuple(g.kernel) + spatial_in)
    y = np.zeros((n_batch, groups * ocg) + full, dtype=np.float32)
    for tap in np.ndindex(*g.kernel):
        dst = tuple(
            slice(t * d, t * d + (s - 1) * st + 1, st)
            for t, d, s, st in zip(tap, g.dilations, spatial_in, g.strides, strict=True)
        )
        y[(slice(None), slice(None), *dst)] += col[(slice(None), slice(None), *tap)]
    crop = tuple(slice(b_, f - e_) for b_, e_, f in zip(g.begins, g.ends, full, strict=True))
    y = np.ascontiguousarray(y[(slice(None), slice(None), *crop)])
    return epilogue(op, y, None if b is None else f32(b))


@kernel(top.MatMulOp)
def matmul(op, args: list[Array | None]) -> Array:
    x, r, b = args
    r = f32(r)
    if op.value("right_transpose"):
        r = np.swapaxes(r, -1, -2)
    y = np.matmul(f32(x), r)
    if b is not None:
        y += f32(b)
    return fused_relu(op, f32(y))
