"""The local rule of float tpu.AddConst / SubConst / MulConst, after
TPU-MLIR's AddConst.cpp / MulConst.cpp `codegen_local_bm1684x`:
`backend_api_constbinary_local` on the slice with the global rule's
fields (the constant as f32, SubConst's `is_reverse`, the fused relu and
its limit: hard-swish's x + 3 clipped to [0, 6]). INT8 forms are tpu.Lut.
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.passes.native.context import NativeContext, NotExpressible, is_float
from tpuc.passes.native.local.ops import (
    Coeff,
    LocalRule,
    identity,
    local_command,
    local_rule,
    no_buffer,
    value_spec,
)
from tpuc.passes.native.local.plan import GroupPlan
from tpuc.passes.native.local.wide import plain_info
from tpuc.target.vendor.params import declare

ConstBinaryLocal = declare(
    "constbinary_local_spec_t", "constbinary_common_spec_t common; u32 buffer_addr"
)


def const_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    if not (is_float(op.operands[0]) and is_float(op.results[0])):
        raise NotExpressible("a local integer constant op (INT8 lowers it to tpu.Lut)")
    return []


def const_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    from tpuc.passes.native.binary import const_fields

    param = ConstBinaryLocal()
    const_fields(op, param.common)
    info = plain_info(plan.tensors[op.results[0]], step)
    inputs = [value_spec(plan, op.operands[0], step)]
    outputs = [value_spec(plan, op.results[0], step)]
    return [local_command(op, "backend_api_constbinary_local", param, info, inputs, outputs)]


local_rule(
    tpu.AddConstOp,
    tpu.SubConstOp,
    tpu.MulConstOp,
    rule=LocalRule(identity, const_coeffs, no_buffer, const_command),
)
