"""The local rule of an F16/BF16 depthwise tpu.Conv2D: the global rule's
f32 detour (conv.half_depthwise: the chip's half-float depthwise kernel
rounds otherwise than tpuc) on the slice, `wide.widened` around an f32
`backend_api_conv_local` with the filter [1, oc, 1, kh·kw] and bias
[1, oc, 1, 1] as f32 coefficients (exact). Other convolutions keep
ops.py's rule; this one is registered above it and hands them back.
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import top, tpu
from tpuc.passes.native.cast import nchw
from tpuc.passes.native.context import NativeContext, NotExpressible, dtype_name
from tpuc.passes.native.local.ops import (
    LOCAL_RULES,
    Coeff,
    LocalRule,
    coeff_spec,
    conv_geometry,
    lane_major,
    local_command,
)
from tpuc.passes.native.local.plan import GroupPlan
from tpuc.passes.native.local.wide import wide_buffer, widened

CONV = LOCAL_RULES[tpu.Conv2DOp]  # ops.py's rule


def is_half_depthwise(op: Operation) -> bool:
    from tpuc.passes.native.conv import is_depthwise

    return dtype_name(op.operands[0]) in ("f16", "bf16") and is_depthwise(op)


def has_bias(op: Operation) -> bool:
    return len(op.operands) > 2 and not isinstance(op.operands[2].owner, top.NoneOp)


def dw_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    from tpuc.passes.native.conv import as_f32

    if len(op.value("kernel_shape") or ()) != 2 or max(op.value("strides") or [1]) > 15:
        raise NotExpressible("a local depthwise convolution that is not 2-D, strides up to 15")
    oc = nchw(op.results[0])[1]
    kh, kw = op.value("kernel_shape")
    filt = as_f32(op.operands[1], dtype_name(op.operands[1])).reshape(oc, kh * kw)
    found = [lane_major(ctx, f"{op.names[0]}_filter_f32", filt, "f32")]
    if has_bias(op):
        bias = as_f32(op.operands[2], dtype_name(op.operands[2])).reshape(oc, 1)
        found.append(lane_major(ctx, f"{op.names[0]}_bias_f32", bias, "f32"))
    return found


def dw_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    param, info = conv_geometry(op, plan, step)
    param.spec.common.has_bias = int(has_bias(op))
    param.spec.buffer_local_addr = 0
    weights = [coeff_spec(plan, op, i, k) for i, k in enumerate(dw_coeffs(op, ctx))]
    return widened(op, plan, step, lambda a, b: [
        local_command(op, "backend_api_conv_local", param, info, [a, *weights], [b])
    ])  # fmt: skip


HALF_DW = LocalRule(CONV.backward, dw_coeffs, wide_buffer, dw_command)


def _form(op: Operation) -> LocalRule:
    return HALF_DW if is_half_depthwise(op) else CONV


LOCAL_RULES.add(
    tpu.Conv2DOp,
    LocalRule(
        backward=lambda op, out: _form(op).backward(op, out),
        coeffs=lambda op, ctx: _form(op).coeffs(op, ctx),
        buffer=lambda op, plan: _form(op).buffer(op, plan),
        command=lambda op, ctx, plan, step: _form(op).command(op, ctx, plan, step),
    ),
    priority=1,
)
