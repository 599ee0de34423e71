"""Float32 convolution through BLAS, on geometry records (no IR).

Convolutions become GEMMs cut into blocks for the executor's threads (see
`gemm_conv`): 1x1 kernels use the input as [C, H*W] directly (no im2col);
other kernels copy im2col columns from one strided view of the padded input.
Depthwise convolutions accumulate over kernel taps instead, which beats a
matmul per group. The TOP conv kernels and the exact integer convolutions
(`tpuc.kernels.conv`) both run these plans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tpuc.kernels.arrays import Array, relu
from tpuc.kernels.executor import Executor
from tpuc.kernels.gemm_conv import GemmConvPlan


def padded_shape(x: Array, begins: list[int], ends: list[int]) -> tuple[int, ...]:
    return padded_shape_of(x.shape, begins, ends)


def padded_shape_of(shape: tuple[int, ...], begins: list[int], ends: list[int]) -> tuple[int, ...]:
    first = len(shape) - len(begins)
    dims = shape[first:]
    return shape[:first] + tuple(d + b + e for d, b, e in zip(dims, begins, ends, strict=True))


def pad_spatial(
    x: Array,
    begins: list[int],
    ends: list[int],
    value: float = 0.0,
    out: Array | None = None,
    border: bool = True,
) -> Array:
    """x padded on its trailing spatial dims (faster than np.pad: the
    interior is copied once and only the border is filled), into `out` if
    given (of `padded_shape`); border=False: `out` already has it."""
    if not any(begins) and not any(ends):
        return x
    first = x.ndim - len(begins)
    dims = x.shape[first:]
    shape = padded_shape(x, begins, ends)
    if out is None:
        out = np.empty(shape, dtype=x.dtype)
    for i, (b, e) in enumerate(zip(begins, ends, strict=True) if border else ()):
        lead = (slice(None),) * (first + i)
        out[(*lead, slice(0, b))] = value
        out[(*lead, slice(shape[first + i] - e, None))] = value
    core = tuple(slice(b, b + d) for b, d in zip(begins, dims, strict=True))
    out[(Ellipsis, *core)] = x
    return out


def out_size(size: int, k: int, stride: int, dil: int, pb: int, pe: int) -> int:
    return (size + pb + pe - (k - 1) * dil - 1) // stride + 1


@dataclass(frozen=True)
class ConvGeometry:
    """The spatial parameters of a convolution-like op, one value per
    spatial axis (pads split into begins and ends)."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begins: tuple[int, ...]
    ends: tuple[int, ...]
    group: int = 1

    @staticmethod
    def of(
        kernel: tuple[int, ...],
        strides=(),
        dilations=(),
        pads=(),
        group: int = 1,
    ) -> ConvGeometry:
        """The geometry with ONNX defaults for absent (empty) lists."""
        n = len(kernel)
        pads = tuple(pads) or (0,) * (2 * n)
        return ConvGeometry(
            tuple(kernel),
            tuple(strides) or (1,) * n,
            tuple(dilations) or (1,) * n,
            pads[:n],
            pads[n:],
            int(group or 1),
        )


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


class ConvPlan:
    """Everything about one conv call that only depends on the geometry, the
    fused ReLU (None: none; < 0: unbounded) and the shapes, kept by the
    executor across runs (see `gemm_conv`)."""

    def __init__(
        self,
        g: ConvGeometry,
        relu_limit: float | None,
        x_shape: tuple[int, ...],
        w_shape: tuple[int, ...],
        rt: Executor,
    ):
        self.g = g
        self.out = tuple(
            out_size(x_shape[2 + i], k, g.strides[i], g.dilations[i], g.begins[i], g.ends[i])
            for i, k in enumerate(g.kernel)
        )
        self.relu_limit = relu_limit
        self.depthwise = g.group == x_shape[1] and w_shape[1] == 1 and g.group > 1
        padded = any(g.begins) or any(g.ends)
        self.src_shape = padded_shape_of(x_shape, g.begins, g.ends) if padded else None
        pointwise = all(k == 1 for k in g.kernel) and all(s == 1 for s in g.strides)
        view = None  # a 1x1 stride-1 unpadded conv reads its input as im2col matrix
        if not pointwise or padded:
            view = window_strides(self.src_shape or x_shape, g, self.out)
        self.gemm = None
        if not self.depthwise:
            self.gemm = GemmConvPlan(x_shape, w_shape, self.out, view, self.relu_limit, rt)

    def run(self, x: Array, w: Array, bias: Array | None, rt: Executor) -> Array:
        if self.depthwise:
            return depthwise(x, w, self.g, self.out, rt, bias, self.relu_limit)
        if self.src_shape is None:
            return self.gemm.run(np.ascontiguousarray(x), w, bias, rt)
        g = self.g
        buf, clean = rt.bordered(("conv", *g.begins, *g.ends), self.src_shape, 0.0)
        return self.gemm.run(
            pad_spatial(x, g.begins, g.ends, out=buf, border=not clean), w, bias, rt
        )


def window_strides(
    src_shape: tuple[int, ...], g: ConvGeometry, out: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and element strides of the view [N, C, *kernel, *out] of a
    contiguous (padded) input of `src_shape` (what `windows` builds)."""
    strides = [1] * len(src_shape)
    for i in range(len(src_shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * src_shape[i + 1]
    sp = strides[2:]
    shape = tuple(src_shape[:2]) + tuple(g.kernel) + tuple(out)
    view = (
        tuple(strides[:2])
        + tuple(s * d for s, d in zip(sp, g.dilations, strict=True))
        + tuple(s * st for s, st in zip(sp, g.strides, strict=True))
    )
    return shape, view


# Depthwise convs run per block of channels of about this many output
# bytes: a block's taps then multiply-add in cache instead of streaming the
# whole tensor once per tap, and blocks are shared out to the threads.
DW_BLOCK_BYTES = 1 << 20


def depthwise(
    x: Array,
    w: Array,
    g: ConvGeometry,
    out: tuple[int, ...],
    rt: Executor,
    bias: Array | None = None,
    relu_limit: float | None = None,
) -> Array:
    """Depthwise conv (one input channel per group), bias and ReLU: a
    multiply-add per kernel tap, vectorised over output pixels, per block
    of channels. Each output element sees the same operations in the same
    order whatever the blocks, so blocks never change a result."""
    n_batch, channels = x.shape[:2]
    mult = w.shape[0] // channels
    wk = w.reshape(channels, mult, math.prod(g.kernel))
    rows = len(out) == 2 and tuple(g.strides) == (1, 1)
    src, length = _dw_source(x, g, out, rt) if rows else (_dw_windows(x, g, out, rt), 0)
    y = rt.empty((n_batch, channels * mult) + out)
    ys = y.reshape((n_batch, channels, mult) + out)
    bs = None if bias is None else bias.reshape((channels, mult) + (1,) * len(out))
    per_channel = mult * (length or math.prod(out)) * 4
    work = n_batch * channels * per_channel * math.prod(g.kernel) // 4
    step = min(-(-channels // rt.shards(work, channels)), max(1, DW_BLOCK_BYTES // per_channel))
    jobs = [
        (n, c, min(channels, c + step)) for n in range(n_batch) for c in range(0, channels, step)
    ]

    def block(i: int) -> None:
        n, c0, c1 = jobs[i]
        if rows:
            _dw_rows_block(src, wk, g, out, length, ys, n, c0, c1, rt)
        else:
            _dw_taps_block(src, wk, g, ys, n, c0, c1, rt)
        if bs is not None:
            ys[n, c0:c1] += bs[c0:c1]
        if relu_limit is not None:
            relu(ys[n, c0:c1], relu_limit)

    rt.parallel_for(len(jobs), block)
    return y


def _dw_windows(x: Array, g: ConvGeometry, out: tuple[int, ...], rt: Executor) -> Array:
    """The strided view [N, C, *K, *O] of the padded input."""
    xp = x
    if any(g.begins) or any(g.ends):
        buf, clean = rt.bordered(("dw", *g.begins, *g.ends), padded_shape(x, g.begins, g.ends), 0.0)
        xp = pad_spatial(x, g.begins, g.ends, out=buf, border=not clean)
    return windows(xp, g, out)


def _dw_taps_block(view, wk, g: ConvGeometry, ys, n: int, c0: int, c1: int, rt) -> None:
    """Channels c0:c1 of batch item n through every tap of the window view."""
    acc = ys[n, c0:c1]
    tmp = rt.scratch("dw_tap", acc.shape)
    extra = (None,) * (acc.ndim - 2)
    for i, tap in enumerate(np.ndindex(*g.kernel)):
        win = view[(n, slice(c0, c1), *tap)][:, None]
        np.multiply(win, wk[(slice(c0, c1), slice(None), i, *extra)], out=tmp if i else acc)
        if i:
            acc += tmp


def _dw_source(x: Array, g: ConvGeometry, out: tuple[int, ...], rt: Executor):
    """Stride-1 2-D depthwise: the padded input flattened to rows of width
    Wp, where every tap is one contiguous slice (the Wp - OW wrapped columns
    of each output row are computed and dropped); and the slice length."""
    n_batch, channels = x.shape[:2]
    ends = (g.ends[0] + 1, g.ends[1])  # one spare row absorbs the last taps' overrun
    buf, clean = rt.bordered(("dw_rows", *g.begins, *ends), padded_shape(x, g.begins, ends), 0.0)
    xp = pad_spatial(x, g.begins, ends, out=buf, border=not clean)
    return xp.reshape(n_batch, channels, 1, -1), out[0] * xp.shape[3]


def _dw_rows_block(flat, wk, g, out, length: int, ys, n: int, c0: int, c1: int, rt) -> None:
    """Channels c0:c1 of batch item n on the flattened rows of `_dw_source`."""
    row = length // out[0]
    acc = rt.scratch("dw_acc", (c1 - c0, wk.shape[1], length))
    tmp = rt.scratch("dw_tap", acc.shape)
    for i, (kh, kw) in enumerate(np.ndindex(*g.kernel)):
        start = kh * g.dilations[0] * row + kw * g.dilations[1]
        src = flat[n, c0:c1, :, start : start + length]
        np.multiply(src, wk[c0:c1, :, i, None], out=tmp if i else acc)
        if i:
            acc += tmp
    np.copyto(ys[n, c0:c1], acc.reshape(c1 - c0, wk.shape[1], out[0], row)[..., : out[1]])


def deconv_forward(x: Array, w: Array, g: ConvGeometry, output_padding=()) -> Array:
    """Transposed conv without bias or ReLU: one matmul to [OC/g * K, L_in]
    per group, then each kernel tap is scattered (strided add) into the
    output."""
    x, w = np.asarray(x, np.float32), np.asarray(w, np.float32)
    n = len(g.kernel)
    n_batch, ic = x.shape[:2]
    ocg = w.shape[1]
    spatial_in = x.shape[2:]
    extra = tuple(output_padding) or (0,) * n
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
    return np.ascontiguousarray(y[(slice(None), slice(None), *crop)])
