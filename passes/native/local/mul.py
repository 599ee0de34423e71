"""The local rule of tpu.Mul, after TPU-MLIR's Mul.cpp
`codegen_local_bm1684x`: one `backend_api_bcbinary_local` MUL on the
slice, INT8 with the global rule's u8 multiplier and rshift on the
product (binary.mul). One operand may be broadcast along H and W (a
squeeze-excite scale [N, C, 1, 1] times [N, C, H, W]): its local tensor
holds its one row for every slice (chain._broadcast) and its spec keeps
its own shape, from which the kernel broadcasts.

Scratch as getBufferSize_bm1684x: INT8 twice the output slice in 16 bits,
twice more when the product is rescaled.
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import NativeContext, NotExpressible, is_float, quant_of
from tpuc.passes.native.local.ops import (
    Coeff,
    LocalRule,
    identity,
    local_command,
    local_rule,
    value_spec,
)
from tpuc.passes.native.local.plan import GroupPlan
from tpuc.passes.native.local.wide import plain_info
from tpuc.target.vendor.params import BcBinaryLocal


def _factors(op: Operation) -> tuple[int, int]:
    """(scale_A, rshift_A): (1, 0) in float, the INT8 requant otherwise (the
    global rule's checks)."""
    if all(is_float(v) for v in (*op.operands, *op.results)):
        return 1, 0
    if not all(quant_of(v) is not None for v in (*op.operands, op.results[0])):
        raise NotExpressible("a local Mul of float and integer tensors")
    if any(quant_of(v).zero_point for v in (*op.operands, op.results[0])):
        raise NotExpressible("a local asymmetric INT8 Mul")
    from tpuc.passes.native.binary import int8_mul_scale

    return int8_mul_scale(op)


def mul_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """No coefficients; refuses what the local call cannot take: other than
    two 4-D operands, broadcast along C, or the global rule's refusals."""
    out = shape_of(op.results[0])
    if len(op.operands) != 2 or len(out) != 4:
        raise NotExpressible("a local Mul other than of two 4-D tensors")
    for v in op.operands:
        shape = shape_of(v)
        if (
            len(shape) != 4
            or shape[1] != out[1]
            or any(d not in (1, o) for d, o in zip(shape, out, strict=True))
        ):
            raise NotExpressible("a local Mul with broadcast along C or of other ranks")
    if op.value("do_relu"):
        raise NotExpressible("a local Mul with a fused relu (not measured yet)")
    _factors(op)
    return []


def mul_buffer(op: Operation, plan: GroupPlan) -> int:
    if is_float(op.results[0]):
        return 0
    out = plan.tensors[op.results[0]]
    words = 2 * out.lane_bytes() // out.dtype_bytes
    return words * (2 if _factors(op) != (1, 0) else 1)


def mul_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    from tpuc.passes.native.binary import BINARY_MUL

    param = BcBinaryLocal()
    common = param.spec.common
    common.binary_type = BINARY_MUL
    common.if_relu, common.relu_upper_limit = 0, -1.0
    common.scale_A, common.rshift_A = _factors(op)
    common.scale_B = 1
    common.f8_scale_A = common.f8_scale_B = 1.0
    param.spec.buffer_addr = plan.local(op).buffer_addr
    info = plain_info(plan.tensors[op.results[0]], step)
    inputs = [value_spec(plan, v, step) for v in op.operands]
    outputs = [value_spec(plan, op.results[0], step)]
    return [local_command(op, "backend_api_bcbinary_local", param, info, inputs, outputs)]


local_rule(tpu.MulOp, rule=LocalRule(identity, mul_coeffs, mul_buffer, mul_command))
