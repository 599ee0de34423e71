"""The local rule of a float tpu.Scale (y = x·s + b per channel: ppocr_det's
F16 batch norm after its first ConvTranspose), after TPU-MLIR's Scale.cpp
`codegen_local_bm1684x`: `backend_api_scale_local` with
`scale_local_spec_t` {if_relu, relu_upper_limit, is_scale_coeff,
is_bias_coeff, input_num 3, scale_shape [1, C, 1, 1]}, the slice in
`local_sec_info_t`; the scale and the bias (rounded to the input's type,
as the global rule stores it) held in local memory, compact (TPU-MLIR
keeps a Scale's weights unaligned). INT8 Scale is a convolution in tpuc.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import NativeContext, NotExpressible, dtype_name, is_float
from tpuc.passes.native.local.ops import (
    Coeff,
    LocalRule,
    coeff_spec,
    identity,
    lane_major,
    local_command,
    local_rule,
    no_buffer,
    sec_info,
    value_spec,
)
from tpuc.passes.native.local.plan import GroupPlan
from tpuc.target.vendor.params import declare

ScaleLocal = declare(
    "scale_local_spec_t",
    "i32 if_relu; f32 relu_upper_limit; i32 is_scale_coeff; i32 is_bias_coeff; i32 input_num; "
    "i32 merge_weight_bias; i32 scale_shape[4]; u32 buffer_local_addr; i32 is_shift_coeff; "
    "i32 round_mode; i32 version; i32 bias_dtype",
)


def scale_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """The scale [1, C, 1, 1] and the bias (zeros when none) in the input's type."""
    from tpuc.ir.weights import read_weight
    from tpuc.passes.native.conv import to_float_storage

    src, weight, bias = op.operands
    dtype = dtype_name(src)
    if not is_float(src) or dtype not in ("f16", "bf16", "f32") or dtype_name(weight) != dtype:
        raise NotExpressible("a local Scale other than of one float type")
    shape = shape_of(src)
    if len(shape) != 4 or not isinstance(weight.owner, top.WeightOp):
        raise NotExpressible("a local Scale that is not 4-D with a weight scale")
    channels = shape[1]
    values = np.zeros(channels, np.float32)
    if not isinstance(bias.owner, top.NoneOp):
        if not isinstance(bias.owner, top.WeightOp):
            raise NotExpressible("a local Scale whose bias is not a weight")
        values = np.asarray(read_weight(bias.owner), np.float32).reshape(channels)
    stored = values if dtype == "f32" else to_float_storage(values, dtype)
    scale = np.asarray(read_weight(weight.owner)).reshape(channels, 1)
    name = op.names[0]
    return [
        lane_major(ctx, f"{name}_scale_{dtype}", scale, dtype),
        lane_major(ctx, f"{name}_bias_{dtype}", np.asarray(stored).reshape(channels, 1), dtype),
    ]


def scale_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list:
    coeffs = scale_coeffs(op, ctx)
    p = ScaleLocal()
    p.if_relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit")
    p.relu_upper_limit = -1.0 if limit is None else float(limit)
    p.is_scale_coeff = p.is_bias_coeff = 1
    p.input_num = 3
    p.scale_shape[:] = [1, shape_of(op.operands[0])[1], 1, 1]
    inputs = [value_spec(plan, op.operands[0], step)]
    inputs += [coeff_spec(plan, op, i, k) for i, k in enumerate(coeffs)]
    outputs = [value_spec(plan, op.results[0], step)]
    info = sec_info(op, plan, step)
    return [local_command(op, "backend_api_scale_local", p, info, inputs, outputs)]


local_rule(tpu.ScaleOp, rule=LocalRule(identity, scale_coeffs, no_buffer, scale_command))
