"""The local rule of a float tpu.Softmax over its innermost axis, after
TPU-MLIR's Softmax.cpp `codegen_local_bm1684x`: `backend_api_softmax_local`
(`softmax_local_param_t`: begin_axis = end_axis = the axis, scale_val 1)
with its scratch sized as `getBufferSize_bm1684x` sizes it for f32 data.
An f16/bf16 softmax runs in f32 between local casts, as the global rule
does (softmax.py: tpuc's arithmetic is the f32 kernel, rounded once).

The local kernel sums a row in two stages at any length, the global one
only up to `chip_float.TWO_STAGE_MAX` (measured in the vendor runtime:
[1, 40, 6625] differs in 92% of its values between the two, [1, 40, 3000]
in none). A longer row is taken only where `chip_float.two_stage` says the
native target runs it locally, which is where the TPU interpreter sums it
in two stages; the global rule then writes it as a group of its own
(`softmax_group`). ppocr_rec's classifier softmax, [1, 40, 6625] over the
6,625 classes: 71,224 vendor cycles global in f32, 57,592 local.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.kernels.chip_float import two_stage
from tpuc.passes.native.cast import CastLocal
from tpuc.passes.native.context import (
    ROUND_HALF_EVEN,
    NativeContext,
    NotExpressible,
    dtype_name,
    is_float,
)
from tpuc.passes.native.conv import coeff_table
from tpuc.passes.native.epilogue import channel_scales
from tpuc.passes.native.local.ops import (
    Coeff,
    LocalRule,
    SecInfo,
    dtype_code_of,
    identity,
    local_command,
    local_rule,
    spec,
)
from tpuc.passes.native.local.plan import EU_BYTES, NPU_NUM, GroupPlan
from tpuc.passes.native.local.wide import f32_bytes, plain_info, wide_buffer
from tpuc.passes.native.softmax import deferred_epilogue
from tpuc.target.vendor.params import BcBinaryLocal, declare

SoftmaxLocal = declare("softmax_local_param_t", "softmax_common_param_t common; u32 buffer_addr")

F32_EU = EU_BYTES // 4  # f32 elements in one execution-unit row


def innermost(op: Operation) -> tuple[tuple[int, ...], int]:
    """(shape without trailing ones, axis) of a softmax over its innermost
    axis; NotExpressible otherwise or when the row sums differ from the
    interpreter's (`two_stage`)."""
    shape = tuple(shape_of(op.operands[0]))
    axis = int(op.value("axis"))
    axis = axis + len(shape) if axis < 0 else axis
    if any(d != 1 for d in shape[axis + 1 :]):
        raise NotExpressible("a local softmax over another axis than the innermost")
    shape = shape[: axis + 1]
    if len(shape) not in (3, 4):
        raise NotExpressible("a local softmax of a tensor of rank other than 3 or 4")
    if not two_stage(shape, axis):
        raise NotExpressible(
            f"a local softmax of rows of {shape[axis]} that the TPU interpreter sums in one window"
        )
    return shape, axis


def softmax_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """No coefficients; refuses what the local kernel does not take."""
    if not (is_float(op.operands[0]) and is_float(op.results[0])) or op.value("log"):
        raise NotExpressible("a local softmax other than a float, non-log one")
    if dtype_name(op.operands[0]) != dtype_name(op.results[0]):
        raise NotExpressible("a local softmax that changes the float type")
    innermost(op)
    fc = deferred_epilogue(op)
    if fc is None:
        return []
    n = shape_of(op.operands[0])[-1]
    scales = channel_scales(coeff_table(fc, n))
    addr = ctx.coeffs.add(f"{fc.names[0]}_epilogue_scale", scales.astype(np.float32))
    return [Coeff(addr, (1, NPU_NUM, 1, n), "f32", lanes_copy=True)]


def dequant_commands(op: Operation, plan: GroupPlan, dims, info, in_addr: int,
                     out_addr: int) -> list[tuple]:  # fmt: skip
    """The fc's float epilogue on the loaded int32 sums (deferred_epilogue):
    cast to f32 into the result's buffer, times the per-column scale (every
    lane holds the row) back into the input's; the softmax then reads its
    input's buffer as the global epilogue would have left it."""
    from tpuc.passes.native.binary import BINARY_MUL

    cast = _cast(op, dims, info, in_addr, out_addr, "i32", "f32")
    param = BcBinaryLocal()
    common = param.spec.common
    common.binary_type = BINARY_MUL
    common.if_relu, common.relu_upper_limit = 0, -1.0
    common.scale_A, common.rshift_A, common.scale_B = 1, 0, 1
    common.f8_scale_A = common.f8_scale_B = 1.0
    scale = spec(None, "f32", dims, plan.tensors[(op, 0)].addrs[0])
    wide = spec(None, "f32", dims, out_addr)
    mul = local_command(op, "backend_api_bcbinary_local", param, info, [wide, scale],
                        [spec(None, "f32", dims, in_addr)])  # fmt: skip
    return [cast, mul]


def is_half(op: Operation) -> bool:
    return dtype_name(op.operands[0]) in ("f16", "bf16")


def _align(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def kernel_buffer(op: Operation, plan: GroupPlan) -> int:
    """getBufferSize_bm1684x for f32 data, per lane, on the largest slice:
    the reduced row, the exp coefficients and table, two f32 copies."""
    tensor = plan.tensors[op.operands[0]]
    _, c, h, w = tensor.dims
    per_npu = -(-c // NPU_NUM)
    worst = 0
    for s in tensor.slices:
        rows = s.h_slice if w > 1 else 1  # over W: one sum a row; rows as W: one sum
        size = per_npu * _align(rows, F32_EU) * 4
        size += _align(32, F32_EU) * 4 + _align(192, F32_EU) * 4
        size += per_npu * _align(s.h_slice * w, F32_EU) * 4 * 2
        worst = max(worst, s.n_slice * size)
    return _align(worst, EU_BYTES)


def softmax_buffer(op: Operation, plan: GroupPlan) -> int:
    if not is_half(op):
        return kernel_buffer(op, plan)
    return _align(wide_buffer(op, plan), EU_BYTES) + kernel_buffer(op, plan)


def _rows_as_w(tensor, step: int) -> tuple[tuple[int, int, int, int], SecInfo]:
    """The slice [n, c, h, 1] viewed as [n, c, 1, h] (the same bytes): the
    kernel reduces W, the innermost axis."""
    n, c, h, _ = tensor.dims
    s = tensor.slice_at(step)
    info = SecInfo()
    info.n_slice = info.out_n_slice = s.n_slice
    info.n_idx, info.d_slice = s.n_idx, 1
    info.h_slice = info.out_h_slice = 1
    info.w_slice = info.out_w_slice = h
    info.c_slice = c
    return (n, c, 1, h), info


def _cast(op, dims, info, src_addr, dst_addr, src: str, dst: str) -> tuple:
    param = CastLocal()
    param.common.src_dtype, param.common.dst_dtype = dtype_code_of(src), dtype_code_of(dst)
    param.common.round_mode = ROUND_HALF_EVEN
    ins, outs = [spec(None, src, dims, src_addr)], [spec(None, dst, dims, dst_addr)]
    return local_command(op, "backend_api_cast_local", param, info, ins, outs)


def softmax_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    """softmax_local_param_t over W of the slice (a row along H as W); an
    f16/bf16 slice cast to f32 and back around it."""
    param = SoftmaxLocal()
    c = param.common
    c.scale_val = 1.0
    c.begin_axis = c.end_axis = 3
    src, dst = plan.tensors[op.operands[0]], plan.tensors[op.results[0]]
    if dst.dims[3] == 1:
        dims, info = _rows_as_w(dst, step)
    else:
        dims, info = dst.dims, plain_info(dst, step)
    base = plan.local(op).buffer_addr
    in_addr, out_addr = src.addr_at(step), dst.addr_at(step)
    if not is_half(op):
        param.buffer_addr = base
        ins, outs = [spec(None, "f32", dims, in_addr)], [spec(None, "f32", dims, out_addr)]
        first = []
        if deferred_epilogue(op) is not None:
            first = dequant_commands(op, plan, dims, info, in_addr, out_addr)
        return [*first, local_command(op, "backend_api_softmax_local", param, info, ins, outs)]
    dtype = dtype_name(op.operands[0])
    wide_in = base
    wide_out = base + _align(f32_bytes(src), EU_BYTES)
    param.buffer_addr = base + _align(wide_buffer(op, plan), EU_BYTES)
    ins, outs = [spec(None, "f32", dims, wide_in)], [spec(None, "f32", dims, wide_out)]
    return [
        _cast(op, dims, info, in_addr, wide_in, dtype, "f32"),
        local_command(op, "backend_api_softmax_local", param, info, ins, outs),
        _cast(op, dims, info, wide_out, out_addr, "f32", dtype),
    ]


def softmax_splits_h(op: Operation) -> bool:
    """A row along H needs all of it: such a group is never cut along H."""
    try:
        shape, axis = innermost(op)
    except NotExpressible:
        return True
    return axis == 3


local_rule(
    tpu.SoftmaxOp,
    rule=LocalRule(identity, softmax_coeffs, softmax_buffer, softmax_command, softmax_splits_h),
)

__all__ = ["SoftmaxLocal", "innermost", "kernel_buffer"]
