"""The local rule of tpu.Pool2D, choosing the form the global rule uses:
the chip's pooling (ops.py's pooling rule), or for an INT8 average over a
window side above 7 (`pool.MAX_INT8_SIDE`: the pooling kernel rounds
otherwise there) a depthwise convolution of ones (`pool_conv.py`: exact
int32 sums, the same multiplier, shift and rounding) as
`backend_api_conv_local` on the slice. A squeeze-excite block's global
average pool then joins its group (TPU-MLIR groups it too). Every
channel's filter and requant are the same, and lane 0 holds the most
channels, so only lane 0's row is in DDR and one broadcast move copies it
to every lane (a plain load of a 200-channel pool's coefficient took
1,151 cycles).

A pool whose window covers its input's whole plane (a global pool) needs
every row of it: `splits_h` says so, and a group holding one is cut
along N only.
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.passes.native.cast import nchw
from tpuc.passes.native.context import NativeContext, NotExpressible, quant_of
from tpuc.passes.native.local.ops import (
    LOCAL_RULES,
    Coeff,
    LocalRule,
    coeff_spec,
    local_command,
    sec_info,
    value_spec,
)
from tpuc.passes.native.local.plan import NPU_NUM, GroupPlan
from tpuc.passes.native.local.pool import POOLING
from tpuc.target.vendor.params import ConvLocal


def is_global(op: Operation) -> bool:
    """One window over the whole (unpadded) input plane."""
    _, _, h, w = nchw(op.operands[0])
    pads = op.value("pads") or [0] * 4
    return tuple(op.value("kernel_shape") or ()) == (h, w) and not any(pads)


def pool_splits_h(op: Operation) -> bool:
    """A global pool needs its whole plane; the convolution form is not
    written for H slices (its unused rows and pads per slice)."""
    return not is_global(op) and not as_conv(op)


def as_conv(op: Operation) -> bool:
    """An INT8 average pool the global rule computes as a convolution of ones."""
    from tpuc.passes.native.pool import MAX_INT8_SIDE, has_zero_point

    if op.value("pool_mode") != "Avg" or quant_of(op.operands[0]) is None:
        return False
    kernel = op.value("kernel_shape") or ()
    return len(kernel) == 2 and (max(kernel) > MAX_INT8_SIDE or has_zero_point(op))


def _factors(op: Operation) -> tuple[int, int]:
    from tpuc.passes.native.pool import int8_avg
    from tpuc.target.vendor.params import PoolingCommon

    spec = PoolingCommon()
    spec.kh, spec.kw = op.value("kernel_shape")
    int8_avg(op, spec)  # the same requant checks as the global rule
    return spec.multiplier, spec.rshiftbits


def ones_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    from tpuc.passes.native.conv import coeff_shape
    from tpuc.passes.native.pool_conv import ones_coeff, ones_conv_fields

    c = nchw(op.operands[0])[1]
    ones_conv_fields(op, ConvLocal().spec, c)  # refusals first
    multiplier, rshift = _factors(op)
    if max(op.value("strides") or [1]) > 15 and not is_global(op):
        raise NotExpressible("a local average pooling with a stride above 15")
    coeff = ones_coeff(op, c, multiplier, rshift)
    addr = ctx.coeffs.add(f"{op.names[0]}_ones_lane", coeff[:1].copy())
    return [Coeff(addr, coeff_shape(coeff, depthwise=True), "i8", lanes_copy=True)]


def ones_buffer(op: Operation, plan: GroupPlan) -> int:
    """A depthwise INT8 convolution's (ops.conv_buffer): two int32 buffers
    of the output slice and the taps."""
    out = plan.tensors[op.results[0]]
    kh, kw = op.value("kernel_shape")
    return 2 * out.lane_bytes() * 4 // out.dtype_bytes + -(-out.dims[1] // NPU_NUM) * kh * kw


def ones_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    from tpuc.passes.native.pool_conv import ones_conv_fields

    pads = op.value("pads") or [0, 0, 0, 0]
    info = sec_info(op, plan, step, (pads[0], pads[2]))
    param = ConvLocal()
    p = param.spec
    ones_conv_fields(op, p, nchw(op.operands[0])[1])
    if is_global(op):
        p.common.stride_h = p.common.stride_w = 1  # one window: the stride never applies
    p.buffer_local_addr = plan.local(op).buffer_addr
    p.with_requant = 1
    inputs = [value_spec(plan, op.operands[0], step)]
    inputs += [coeff_spec(plan, op, i, k) for i, k in enumerate(ones_coeffs(op, ctx))]
    outputs = [value_spec(plan, op.results[0], step)]
    return [local_command(op, "backend_api_conv_local", param, info, inputs, outputs)]


ONES_CONV = LocalRule(POOLING.backward, ones_coeffs, ones_buffer, ones_command)


def _form(op: Operation) -> LocalRule:
    return ONES_CONV if as_conv(op) else POOLING


POOL = LocalRule(
    backward=lambda op, out: _form(op).backward(op, out),
    coeffs=lambda op, ctx: _form(op).coeffs(op, ctx),
    buffer=lambda op, plan: _form(op).buffer(op, plan),
    command=lambda op, ctx, plan, step: _form(op).command(op, ctx, plan, step),
    splits_h=pool_splits_h,
)
LOCAL_RULES.add(tpu.Pool2DOp, POOL, priority=1)

__all__ = ["POOL", "as_conv", "is_global"]
