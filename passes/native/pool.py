"""Pool2D (max and average): `backend_api_pooling_global` with
`pooling_common_spec_t`."""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import (
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_name,
    is_float,
    quant_of,
)
from tpuc.passes.native.conv import round_mode
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import PoolingCommon


def pool_flags(op: Operation, spec) -> None:
    """The relu, ceil and rounding fields a pool's global spec and its local
    call's common part (local/pool.py) both carry."""
    spec.if_relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit")
    spec.relu_limit = -1.0 if limit is None else float(limit)
    spec.ceil_mode = bool(op.value("ceil_mode"))
    spec.round_mode = round_mode(op)


@native_rule(tpu.Pool2DOp)
def pool2d(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    in_shape, out_shape = shape_of(op.operands[0]), shape_of(op.results[0])
    kernel = op.value("kernel_shape")
    if len(kernel) != 2:
        raise NotExpressible(f"{len(kernel)}-D pooling (the native target has 2-D)")
    spec = PoolingCommon()
    spec.kh, spec.kw = kernel
    spec.pad_h_t, spec.pad_w_l, spec.pad_h_b, spec.pad_w_r = op.value("pads") or [0, 0, 0, 0]
    spec.stride_h, spec.stride_w = op.value("strides") or [1, 1]
    spec.dh = spec.dw = 1
    spec.is_global_pooling = (
        in_shape[2] == kernel[0] and in_shape[3] == kernel[1] and out_shape[2:] == (1, 1)
    )
    if kernel[0] == in_shape[2] and kernel[1] == 1:
        spec.stride_h = 1
    if kernel[1] == in_shape[3] and kernel[0] == 1:
        spec.stride_w = 1
    pool_flags(op, spec)
    if op.value("pool_mode") == "Avg":
        spec.is_avg_pooling = 1
        spec.avg_pooling_mode = 0 if op.value("count_include_pad") else 1
        if half_global_elsewhere(op, spec):
            return half_via_f32(op, ctx, spec)
        if not is_float(op.operands[0]):
            if max(spec.kh, spec.kw) > MAX_INT8_SIDE or has_zero_point(op):
                return int8_avg_as_conv(op, ctx)
            int8_avg(op, spec)
            return int8_pool_call(op, ctx, spec)
    return [ctx.call("backend_api_pooling_global", spec, op)]


def int8_pool_call(op: Operation, ctx: NativeContext, spec) -> list[NativeCall]:
    """The INT8 pooling call, a global pool over many channels on
    pool_conv.lanes_view's view (the window stepping H rows down): the
    same sums, stored in bursts of R bytes instead of one per channel."""
    from tpuc.passes.native.pool_conv import lanes_view

    view = lanes_view(op)
    if view is None:
        return [ctx.call("backend_api_pooling_global", spec, op)]
    spec.stride_h, spec.stride_w = spec.kh, 1
    inputs, outputs = [ctx.spec(op.operands[0], view[0])], [ctx.spec(op.results[0], view[1])]
    return [ctx.call("backend_api_pooling_global", spec, op, inputs, outputs)]


MAX_INT8_SIDE = 7  # the widest window side measured bit-exact on the chip model
HALF_LANES = 32  # the chip's half-float global average: chunks of 32 (kernels/pooling.py)


def half_global_elsewhere(op: Operation, spec) -> bool:
    """An F16/BF16 average pooling the chip's half-float kernel sums in an
    order not measured yet (a window that is not global, or a global plane
    above 32 elements that is not a power of two): the interpreter pools it
    in f32 and rounds once, and so does the native target."""
    if dtype_name(op.operands[0]) not in ("f16", "bf16"):
        return False
    n = spec.kh * spec.kw
    return not spec.is_global_pooling or (n > HALF_LANES and n & (n - 1) != 0)


def half_via_f32(op: Operation, ctx: NativeContext, spec) -> list[NativeCall]:
    """The pooling in f32 between casts (scratch), rounded once to the half
    type (to nearest even), as the interpreter computes it."""
    from tpuc.passes.native.f32 import between_casts
    from tpuc.passes.native.pool_conv import lanes_view

    view = lanes_view(op) if spec.is_global_pooling else None
    if view is not None:
        spec.is_global_pooling, spec.stride_h, spec.stride_w = 0, spec.kh, 1
    return between_casts(op, ctx, lambda wide_in, wide_out: [
        ctx.call("backend_api_pooling_global", spec, op, [wide_in], [wide_out])
    ], view)  # fmt: skip


def has_zero_point(op: Operation) -> bool:
    """Asymmetric INT8: the pooling kernel's integer mode (0) has no zero
    points, and TPU-MLIR's asymmetric mode (2: a float scale and offset)
    computes otherwise than tpuc's Σ(q − Z_in) requantized by M >> r."""
    quant_in, quant_out = quant_of(op.operands[0]), quant_of(op.results[0])
    return any(q is not None and q.zero_point for q in (quant_in, quant_out))


def int8_avg_as_conv(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """A window side above MAX_INT8_SIDE (the pooling kernel rounds otherwise
    there: 1 LSB off at 3x96) or zero points (has_zero_point): a depthwise
    convolution of ones computes it (pool_conv.py), with the same requant
    checks."""
    from tpuc.passes.native.pool_conv import avg_pool_as_conv

    spec = PoolingCommon()
    spec.kh, spec.kw = op.value("kernel_shape")
    int8_avg(op, spec)
    return avg_pool_as_conv(op, ctx, spec.multiplier, spec.rshiftbits)


def int8_avg(op: Operation, spec) -> None:
    """Symmetric INT8 (avg_pooling_quant_mode 0, Pool2D.cpp): the chip computes
    (Σ q · multiplier + 2^(rshiftbits−1)) >> rshiftbits with a u8 multiplier,
    which bm168x's lowering chooses (HalfUp). Zero points go by a
    convolution (int8_avg_as_conv), which checks the same requant here."""
    if quant_of(op.operands[0]) is None or quant_of(op.results[0]) is None:
        raise NotExpressible("INT8 average pooling of a tensor that is not quantized")
    multiplier, rshift = op.value("multiplier") or [1], op.value("rshift") or [0]
    if len(multiplier) != 1 or len(rshift) != 1:
        raise NotExpressible("per-channel requantization of an average pooling")
    if dtype_name(op.operands[0]) != dtype_name(op.results[0]):
        raise NotExpressible("INT8 average pooling into another signedness (the backend crashes)")
    spec.is_global_pooling = 0  # its INT8 global form computes otherwise (measured)
    if not 0 <= int(multiplier[0]) <= 255 or int(rshift[0]) < 0:
        raise NotExpressible(f"multiplier {multiplier[0]} >> {rshift[0]} (the chip takes u8 >> n)")
    if int(rshift[0]) and op.value("round_mode") != "HalfUp":
        raise NotExpressible(f"round mode {op.value('round_mode')} (the chip rounds half up)")
    spec.avg_pooling_quant_mode = 0
    spec.multiplier, spec.rshiftbits = int(multiplier[0]), int(rshift[0])
