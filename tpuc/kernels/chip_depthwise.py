"""The bm168x chips' f32 depthwise convolution, bit for bit.

A depthwise convolution (TPU-MLIR's is_dw: groups = input = output
channels > 1) runs on the chip's depthwise unit, which sums a window in two
running f32 accumulators, as its average pooling does: the kernel positions
in row-major order, each product x·w rounded to f32, the even positions
(0, 2, 4, ...) added into one accumulator that starts at 0, the odd ones
into another that starts at the bias; the result is their sum (each
addition rounded to nearest even). Probed on the vendor's chip model
(tests/native/test_chip_depthwise.py); BLAS's order differs in about half
the outputs. The native target runs F16/BF16 depthwise convolutions in f32
between casts, so they round this result once to the half type.
"""

from __future__ import annotations

import numpy as np

from tpuc.kernels import float_conv
from tpuc.kernels.arrays import Array, f32, relu
from tpuc.kernels.conv_plan import pad_spatial, window_strides
from tpuc.kernels.float_conv import ConvAttrs


def is_depthwise(p: ConvAttrs, x: Array, w: Array) -> bool:
    """TPU-MLIR's is_dw on a 2-D convolution: groups = input = output channels > 1."""
    return w.ndim == 4 and 1 < p.group == x.shape[1] == w.shape[0] and w.shape[1] == 1


def windows(x: Array, p: ConvAttrs, kernel: tuple[int, ...]) -> Array:
    """The view [N, C, kh, kw, oh, ow] of the padded input's windows."""
    g = p.geometry(kernel)
    xp = np.ascontiguousarray(pad_spatial(x, list(g.begins), list(g.ends)))
    out = tuple(
        (xp.shape[2 + i] - (k - 1) * g.dilations[i] - 1) // g.strides[i] + 1
        for i, k in enumerate(kernel)
    )
    shape, strides = window_strides(xp.shape, g, out)
    return np.lib.stride_tricks.as_strided(
        xp, shape=shape, strides=tuple(s * xp.itemsize for s in strides), writeable=False
    )


def depthwise(p: ConvAttrs, x: Array, w: Array, b: Array | None = None) -> Array:
    """The chip's f32 depthwise convolution (module docstring), then the fused ReLU."""
    x, w = f32(x), f32(w)
    kh, kw = w.shape[2:]
    view = windows(x, p, (kh, kw))
    taps = w.reshape(w.shape[0], kh * kw)[:, :, None, None]  # [C, K, 1, 1]
    shape = view.shape[:2] + view.shape[4:]
    even = np.zeros(shape, np.float32)
    odd = np.zeros(shape, np.float32)
    if b is not None:
        odd += f32(b).reshape(1, -1, 1, 1)
    product = np.empty(shape, np.float32)
    for n in range(kh * kw):
        np.multiply(view[:, :, n // kw, n % kw], taps[:, n], out=product)
        acc = odd if n % 2 else even
        np.add(acc, product, out=acc)
    y = np.add(even, odd, out=even)
    limit = p.relu_limit()
    return y if limit is None else relu(y, limit)


def conv(p: ConvAttrs, x: Array, w: Array, b: Array | None = None) -> Array:
    """float_conv.conv as the chip computes it: its depthwise unit's order
    for depthwise convolutions, BLAS's otherwise."""
    if is_depthwise(p, x, w):
        return depthwise(p, x, w, b)
    return float_conv.conv(p, x, w, b)
