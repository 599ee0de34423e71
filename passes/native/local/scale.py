"""The local rule of a float tpu.Scale (x·scale[c] + bias[c], a folded
BatchNorm), after TPU-MLIR's Scale.cpp `codegen_local_bm1684x`: one
`backend_api_scale_local` on the slice, scale and bias loaded whole as
[1, C, 1, 1] coefficients in the input's type (the global rule's values:
the f32 bias rounded to it, norm.scale), `scale_shape` [1, C, 1, 1].

Without it every float Scale is global and cuts the groups around it:
densenet121 in F16 has one before each of its 58 dense layers and
transitions (63 groups of 2–3 ops), and ppocr_det's F16 batch norm
between its two ConvTransposes cut its head. Scratch as getBufferSize_bm1684x:
the output slice for F16/BF16. INT8 Scale is a depthwise convolution
(int8_conv), never this op.
"""

from __future__ import annotations

import math

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
HALF = ("f16", "bf16")


def _vector(value, channels: int, dtype: str) -> np.ndarray:
    """A per-channel weight as [C, 1] in `dtype`'s storage (zeros for None)."""
    from tpuc.passes.native.conv import as_f32, to_float_storage

    if isinstance(value.owner, top.NoneOp):
        values = np.zeros(channels, np.float32)
    elif isinstance(value.owner, top.WeightOp):
        values = as_f32(value, dtype_name(value)).reshape(channels)
    else:
        raise NotExpressible("a local Scale whose scale or bias is not a weight")
    return to_float_storage(values, dtype).reshape(channels, 1)


def scale_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """Scale and bias as [1, C, 1, 1] in the input's type; refuses what the
    global rule runs otherwise (quantized, f32, other ranks)."""
    src, weight, bias = op.operands
    dtype = dtype_name(src)
    if not (is_float(src) and dtype in HALF and dtype_name(op.results[0]) == dtype):
        raise NotExpressible(f"a local Scale in {dtype} (F16/BF16 only)")
    shape = shape_of(src)
    if len(shape) != 4 or math.prod(shape_of(weight)) != shape[1]:
        raise NotExpressible("a local Scale other than per channel of a 4-D tensor")
    channels, name = shape[1], op.names[0]
    return [
        lane_major(ctx, f"{name}_scale_{dtype}", _vector(weight, channels, dtype), dtype),
        lane_major(ctx, f"{name}_bias_{dtype}", _vector(bias, channels, dtype), dtype),
    ]


def scale_buffer(op: Operation, plan: GroupPlan) -> int:
    return plan.tensors[op.results[0]].lane_bytes()


def scale_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    param = ScaleLocal()
    param.if_relu = int(bool(op.value("do_relu")))
    limit = op.value("relu_limit")
    param.relu_upper_limit = -1.0 if limit is None else float(limit)
    param.is_scale_coeff = param.is_bias_coeff = 1
    param.input_num = 3
    for i, d in enumerate((1, shape_of(op.operands[0])[1], 1, 1)):
        param.scale_shape[i] = d
    param.buffer_local_addr = plan.local(op).buffer_addr
    inputs = [value_spec(plan, op.operands[0], step)]
    inputs += [coeff_spec(plan, op, i, k) for i, k in enumerate(scale_coeffs(op, ctx))]
    outputs = [value_spec(plan, op.results[0], step)]
    info = sec_info(op, plan, step)
    return [local_command(op, "backend_api_scale_local", param, info, inputs, outputs)]


local_rule(tpu.ScaleOp, rule=LocalRule(identity, scale_coeffs, scale_buffer, scale_command))
