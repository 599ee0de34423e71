"""INT8 average pooling over a wide window, as a depthwise convolution.

The chip's INT8 pooling kernel rounds otherwise than (Σq·M + 2^(r−1)) >> r
once a window side passes 7 (measured: 1 LSB off at 3x96), and global
average pools are exactly such windows (squeezenet's 13x13, PP-OCR's 6x80).
A depthwise convolution with a filter of ones sums the same window exactly
in int32 and requantizes with the same multiplier, shift and rounding (the
merged per-lane coefficient of an INT8 convolution), so the chip computes
tpuc's average pooling bit for bit. The pooling rule hands such ops here.

A global pool of one image over more channels than lanes runs on a view
(`lanes_view`): [1, C, H, W] as [1, L, R·H, W] (L·R = C, L the most lanes
that divide C), the window stepping H rows down, so each lane sums R
channels and the [1, L, R, 1] result leaves in L bursts of R bytes. The
plain form stores [1, C, 1, 1] one byte per burst: squeezenet's 13x13 pool
over 1000 channels spent 24,988 of its 36,801 vendor cycles on that store
(TPU-MLIR's pool too).
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import NativeCall, NativeContext, NotExpressible, dtype_code
from tpuc.passes.native.context import quant_of as _quant_of
from tpuc.passes.native.conv import coeff_shape, depthwise_relu, pack_int8, raw_spec, round_mode
from tpuc.target.vendor.params import ConvGlobal

MAX_KERNEL = 255  # the convolution's kernel sides are 8-bit fields in the commands


def avg_pool_as_conv(op: Operation, ctx: NativeContext, multiplier: int, rshift: int
                     ) -> list[NativeCall]:  # fmt: skip
    """One depthwise convolution: filter of ones, requant (multiplier, rshift);
    padding worth Z_in (`ipad_value`) and −Z_in·kh·kw in the bias, so the
    sum is tpuc's Σ (q − Z_in) with padding worth 0."""
    c = shape_of(op.operands[0])[1]
    kh, kw = op.value("kernel_shape")
    view = lanes_view(op)
    if view is not None:
        c = view[0][1]
    spec = ConvGlobal()
    ones_conv_fields(op, spec, c)
    if view is not None:
        spec.common.stride_h, spec.common.stride_w = kh, 1
    coeff = ones_coeff(op, c, multiplier, rshift)
    addr = ctx.coeffs.add(f"{op.names[0]}_ones_lanes", coeff)
    weights = raw_spec(addr, 2, coeff_shape(coeff, depthwise=True))
    if view is None:
        return [ctx.call("backend_api_conv_global", spec, op, inputs=[ctx.spec(op.operands[0]),
                                                                      weights])]  # fmt: skip
    inputs = [ctx.spec(op.operands[0], view[0]), weights]
    outputs = [ctx.spec(op.results[0], view[1])]
    return [ctx.call("backend_api_conv_global", spec, op, inputs=inputs, outputs=outputs)]


def ones_conv_fields(op: Operation, spec, c: int) -> None:
    """The conv spec's fields (global or local: both have `common` and
    `merge_coeff`) of the pooling as a depthwise convolution over `c`
    channels; refuses windows the convolution cannot take."""
    kh, kw = op.value("kernel_shape")
    if max(kh, kw) > MAX_KERNEL:
        raise NotExpressible(f"INT8 average pooling over a {kh}x{kw} window")
    pads = op.value("pads") or [0] * 4
    if (any(pads) or op.value("ceil_mode")) and not op.value("count_include_pad"):
        raise NotExpressible("INT8 average pooling of a wide window with padding not counted")
    common = spec.common
    common.groups = common.input_c = common.output_c = c
    common.kh, common.kw = kh, kw
    common.stride_h, common.stride_w = op.value("strides") or [1, 1]
    common.dh = common.dw = 1
    common.pad_h_t, common.pad_w_l, common.pad_h_b, common.pad_w_r = pads
    common.if_relu = int(bool(op.value("do_relu")) or dtype_code(op.results[0]) == 3)
    common.upper_limit = -1.0
    if common.if_relu and _quant_of(op.results[0]).zero_point:
        depthwise_relu(op, spec)
    common.round_mode = round_mode(op)
    common.bias_sign = common.ipad_is_const = common.kzp_is_const = 1
    common.weight_is_coeff = 1
    common.is_asym = 1
    common.ipad_value = _quant_of(op.operands[0]).zero_point
    common.has_bias = int(common.ipad_value != 0)
    spec.merge_coeff = 2


def ones_coeff(op: Operation, c: int, multiplier: int, rshift: int) -> np.ndarray:
    """The merged coefficient of the ones filter over `c` channels: requant
    (multiplier, rshift, Z_out) and −Z_in·kh·kw as the bias."""
    kh, kw = op.value("kernel_shape")
    table = np.zeros((c, 3), np.int64)
    table[:, 0] = -_quant_of(op.operands[0]).zero_point * kh * kw
    table[:, 1], table[:, 2] = multiplier, rshift
    ones = np.ones((c, 1, kh * kw), np.int8)
    return pack_int8(table, _quant_of(op.results[0]).zero_point, ones, depthwise=True)


LANES = 64
MAX_STRIDE = 15  # the convolution's stride fields


def lanes_view(op: Operation) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(input view, output view) of a global pool of one image over C > 64
    channels (see the module docstring), None when it does not apply."""
    (n, c, h, w), out = shape_of(op.operands[0]), shape_of(op.results[0])
    kh, kw = op.value("kernel_shape")
    pads = op.value("pads") or [0] * 4
    if n != 1 or c <= LANES or (kh, kw) != (h, w) or tuple(out[2:]) != (1, 1) or any(pads):
        return None
    lanes = max(d for d in range(1, LANES + 1) if c % d == 0)
    if lanes < LANES // 2 or kh > MAX_STRIDE:
        return None
    rows = c // lanes
    return (1, lanes, rows * h, w), (1, lanes, rows, 1)


__all__ = ["avg_pool_as_conv", "ones_coeff", "ones_conv_fields"]
