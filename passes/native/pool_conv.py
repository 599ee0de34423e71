"""INT8 average pooling over a wide window, as a depthwise convolution.

The chip's INT8 pooling kernel rounds otherwise than (Σq·M + 2^(r−1)) >> r
once a window side passes 7 (measured: 1 LSB off at 3x96), and global
average pools are exactly such windows (squeezenet's 13x13, PP-OCR's 6x80).
A depthwise convolution with a filter of ones sums the same window exactly
in int32 and requantizes with the same multiplier, shift and rounding (the
merged per-lane coefficient of an INT8 convolution), so the chip computes
tpuc's average pooling bit for bit. The pooling rule hands such ops here.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import NativeCall, NativeContext, NotExpressible, dtype_code
from tpuc.passes.native.context import quant_of as _quant_of
from tpuc.passes.native.conv import coeff_shape, pack_int8, raw_spec, round_mode
from tpuc.target.vendor.params import ConvGlobal

MAX_KERNEL = 255  # the convolution's kernel sides are 8-bit fields in the commands


def avg_pool_as_conv(op: Operation, ctx: NativeContext, multiplier: int, rshift: int
                     ) -> list[NativeCall]:  # fmt: skip
    """One depthwise convolution: filter of ones, requant (multiplier, rshift)."""
    c = shape_of(op.operands[0])[1]
    kh, kw = op.value("kernel_shape")
    if max(kh, kw) > MAX_KERNEL:
        raise NotExpressible(f"INT8 average pooling over a {kh}x{kw} window")
    pads = op.value("pads") or [0] * 4
    if (any(pads) or op.value("ceil_mode")) and not op.value("count_include_pad"):
        raise NotExpressible("INT8 average pooling of a wide window with padding not counted")
    spec = ConvGlobal()
    common = spec.common
    common.groups = common.input_c = common.output_c = c
    common.kh, common.kw = kh, kw
    common.stride_h, common.stride_w = op.value("strides") or [1, 1]
    common.dh = common.dw = 1
    common.pad_h_t, common.pad_w_l, common.pad_h_b, common.pad_w_r = pads
    common.if_relu = int(bool(op.value("do_relu")) or dtype_code(op.results[0]) == 3)
    common.upper_limit = -1.0
    common.round_mode = round_mode(op)
    common.bias_sign = common.ipad_is_const = common.kzp_is_const = 1
    common.weight_is_coeff = 1
    common.is_asym = 1
    common.ipad_value = _quant_of(op.operands[0]).zero_point
    spec.merge_coeff = 2
    table = np.zeros((c, 3), np.int64)
    table[:, 1], table[:, 2] = multiplier, rshift
    ones = np.ones((c, 1, kh * kw), np.int8)
    coeff = pack_int8(table, _quant_of(op.results[0]).zero_point, ones, depthwise=True)
    addr = ctx.coeffs.add(f"{op.names[0]}_ones_lanes", coeff)
    weights = raw_spec(addr, 2, coeff_shape(coeff, depthwise=True))
    inputs = [ctx.spec(op.operands[0]), weights]
    return [ctx.call("backend_api_conv_global", spec, op, inputs=inputs)]


__all__ = ["avg_pool_as_conv"]
