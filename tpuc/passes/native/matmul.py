"""MatMul with a weight right operand: `backend_api_fc_global` with
`fc_global_spec_t` (the right operand stays [K, N] row-major)."""

from __future__ import annotations

import math

from xdsl.ir import Operation

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import NativeCall, NativeContext, NotExpressible, is_float
from tpuc.passes.native.rules import native_rule
from tpuc.vendor.params import FcGlobal


@native_rule(tpu.MatMulOp)
def matmul(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    left, right, out = (shape_of(v) for v in (op.operands[0], op.operands[1], op.results[0]))
    if not isinstance(op.operands[1].owner, top.WeightOp) or len(right) != 2:
        raise NotExpressible("a matmul of two activations (not yet written for the native target)")
    if not (is_float(op.operands[0]) and is_float(op.results[0])):
        raise NotExpressible("integer matmul (not yet written for the native target)")
    transpose = bool(op.value("right_transpose"))
    k, n = (right[1], right[0]) if transpose else right
    m = math.prod(left) // k
    spec = FcGlobal()
    has_bias = not isinstance(op.operands[2].owner, top.NoneOp)
    spec.have_bias = has_bias
    spec.if_relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit")
    spec.relu_limit = -1.0 if limit is None else float(limit)
    spec.requant_mode = -1
    spec.R_transpose = 0 if n == 1 else transpose
    inputs = [ctx.spec(op.operands[0], (m, k)), ctx.spec(op.operands[1], (k, n))]
    if has_bias:
        inputs.append(ctx.spec(op.operands[2]))
    return [ctx.call("backend_api_fc_global", spec, op, inputs=inputs,
                     outputs=[ctx.spec(op.results[0], (m, n))])]  # fmt: skip
