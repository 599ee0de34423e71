"""The local rule of tpu.Pool2D (max; average in INT8 and float), after
TPU-MLIR's Pool2D.cpp `codegen_local_bm1684x`: one pooling_local call
per slice with the global rule's fields and the pads per slice; a
half-float average the global rule runs in f32 goes through half_pool.py,
and a global one on the chip's half sums keeps its work rows in the op's
scratch."""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.passes.native.context import NativeContext, NotExpressible, dtype_name, quant_of
from tpuc.passes.native.local.ops import (
    Coeff,
    LocalRule,
    local_command,
    local_rule,
    sec_info,
    value_spec,
    window_backward,
)
from tpuc.passes.native.local.plan import EU_BYTES, NPU_NUM, GroupPlan, Slice
from tpuc.target.vendor.params import PoolingLocal


def pool_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """No coefficients; refuses what the global rule computes another way
    (an INT8 average over a window side above 7 as a convolution) and
    windows that are not 2-D with strides up to 15. A half-float average
    the global rule runs in f32 does so here too (half_pool.py); a global
    one it leaves to the chip's half sums pools the whole plane locally
    with is_global_pooling, the same sums (test_half_pool_local)."""
    from tpuc.passes.native.pool import MAX_INT8_SIDE, PoolingCommon, int8_avg

    kernel = op.value("kernel_shape") or ()
    if len(kernel) != 2 or max(op.value("strides") or [1]) > 15:
        raise NotExpressible("a local pooling that is not 2-D with strides up to 15")
    if op.value("pool_mode") != "Avg":
        return []
    if quant_of(op.operands[0]) is not None:
        if max(kernel) > MAX_INT8_SIDE:
            raise NotExpressible(f"a local INT8 average over a {kernel} window")
        int8_avg(op, PoolingCommon())
    return []


def pool_backward(op: Operation, out: Slice) -> Slice:
    kh = op.value("kernel_shape")[0]
    sh = (op.value("strides") or [1, 1])[0]
    return window_backward(op, out, kh, sh, 1, (op.value("pads") or [0, 0, 0, 0])[0])


def pool_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    """pooling_local_spec_t over the slice: the global rule's fields, the pads
    per slice (Pool2D.cpp's local form)."""
    from tpuc.passes.native.pool import pool_flags

    pads = op.value("pads") or [0, 0, 0, 0]
    info = sec_info(op, plan, step, (pads[0], pads[2]))
    param = PoolingLocal()
    param.buffer_addr = plan.local(op).buffer_addr
    c = param.common
    c.kh, c.kw = op.value("kernel_shape")
    c.pad_h_t, c.pad_w_l, c.pad_h_b, c.pad_w_r = pads
    c.stride_h, c.stride_w = op.value("strides") or [1, 1]
    c.dh = c.dw = 1
    pool_flags(op, c)
    from tpuc.passes.native.local import half_pool

    if op.value("pool_mode") == "Avg":
        from tpuc.passes.native.pool import int8_avg

        c.is_avg_pooling = 1
        c.avg_pooling_mode = 0 if op.value("count_include_pad") else 1
        c.is_global_pooling = int(half_global_on_chip(op))
        if quant_of(op.operands[0]) is not None:
            int8_avg(op, c)
    if half_pool.applies(op):
        return half_pool.commands(op, plan, step, info, param)
    inputs = [value_spec(plan, op.operands[0], step)]
    outputs = [value_spec(plan, op.results[0], step)]
    return [local_command(op, "backend_api_pooling_local", param, info, inputs, outputs)]


def half_global_on_chip(op: Operation) -> bool:
    """A half-float global average the global rule leaves to the chip's
    half sums (not half_pool's f32 detour): pooled with is_global_pooling,
    as the global call does."""
    from tpuc.passes.native.local import half_pool
    from tpuc.passes.native.local.pool_wide import is_global

    if op.value("pool_mode") != "Avg" or dtype_name(op.operands[0]) not in ("f16", "bf16"):
        return False
    return is_global(op) and not half_pool.applies(op)


def pool_buffer(op: Operation, plan: GroupPlan) -> int:
    """A half-float average through f32 keeps both f32 slices (half_pool.py);
    a global one on the chip's sums works in one EU row per image and
    channel plane (TPU-MLIR's Pool2DOp::getBufferSize_bm1684x for
    is_global: left without it, the kernel writes over local address 0)."""
    from tpuc.passes.native.local import half_pool

    if half_global_on_chip(op):
        out = plan.tensors[op.results[0]]
        images = max(s.n_slice for s in out.slices)
        return images * -(-out.dims[1] // NPU_NUM) * EU_BYTES
    return half_pool.buffer(op, plan) if half_pool.applies(op) else 0


POOLING = LocalRule(pool_backward, pool_coeffs, pool_buffer, pool_command)
"""The chip's pooling kernel (pool_wide.py's rule falls back to it)."""
local_rule(tpu.Pool2DOp, rule=POOLING)
