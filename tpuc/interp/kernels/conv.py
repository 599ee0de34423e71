"""Convolution, transposed convolution and matmul of the TOP dialect.

The op's attributes become a `ConvGeometry` record; the BLAS plans that run
it are the kernel library's (`tpuc.kernels.conv_plan`), shared with the
exact integer convolutions of the TPU interpreter.
"""

from __future__ import annotations

import numpy as np

from tpuc.dialects import top
from tpuc.interp.kernels.registry import Array, f32, fused_relu, ints, kernel
from tpuc.kernels.conv_plan import ConvGeometry, ConvPlan, deconv_forward
from tpuc.kernels.executor import current


def conv_geometry(op, kernel_shape: tuple[int, ...]) -> ConvGeometry:
    """The op's spatial attributes for a filter of `kernel_shape`."""
    return ConvGeometry.of(
        kernel_shape,
        ints(op, "strides"),
        ints(op, "dilations"),
        ints(op, "pads"),
        int(op.value("group") or 1),
    )


def epilogue(op, y: Array, b: Array | None) -> Array:
    """y += bias (per channel, axis 1), then the fused ReLU; in place."""
    if b is not None:
        y += b.reshape((-1,) + (1,) * (y.ndim - 2))
    return fused_relu(op, y)


def relu_limit_of(op) -> float | None:
    """The fused ReLU as the conv plans take it: None, or its limit (< 0: none)."""
    if not op.value("do_relu"):
        return None
    limit = op.value("relu_limit")
    return -1.0 if limit is None else float(limit)


def conv_plan(op, x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> ConvPlan:
    rt = current()
    return ConvPlan(conv_geometry(op, tuple(w_shape[2:])), relu_limit_of(op), x_shape, w_shape, rt)


@kernel(top.ConvOp)
def conv(op, args: list[Array | None]) -> Array:
    x, w, b = f32(args[0]), f32(args[1]), args[2]
    rt = current()
    plan = rt.memo((op, x.shape, w.shape), lambda: conv_plan(op, x.shape, w.shape))
    return plan.run(x, w, None if b is None else f32(b), rt)


@kernel(top.DeconvOp)
def deconv(op, args: list[Array | None]) -> Array:
    x, w, b = args
    w = f32(w)
    n = w.ndim - 2
    g = conv_geometry(op, tuple(w.shape[2:]))
    y = deconv_forward(x, w, g, ints(op, "output_padding", [0] * n))
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
