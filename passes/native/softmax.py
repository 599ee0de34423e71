"""Softmax, after TPU-MLIR's `Interfaces/BM1684X/Softmax.cpp` float form:
`backend_api_softmax_global` (`softmax_global_param_t`): begin_axis =
end_axis = axis, scale_val = 1, log = the op's `log`, zero_point = 0.
(tpuc lowers an INT8 Softmax to float between casts.)
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import NativeCall, NativeContext, NotExpressible, is_float
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import declare

declare(
    "softmax_common_param_t", "f32 scale_val; i32 begin_axis; i32 end_axis; i32 log; i32 zero_point"
)
SoftmaxGlobal = declare("softmax_global_param_t", "softmax_common_param_t common")


@native_rule(tpu.SoftmaxOp)
def softmax(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    if not (is_float(op.operands[0]) and is_float(op.results[0])):
        raise NotExpressible("an integer softmax (tpuc runs it in float)")
    rank = len(shape_of(op.operands[0]))
    axis = int(op.value("axis"))
    axis = axis + rank if axis < 0 else axis
    param = SoftmaxGlobal()
    c = param.common
    c.scale_val = 1.0
    c.begin_axis = c.end_axis = axis
    c.log = int(bool(op.value("log")))
    from tpuc.passes.native.f32 import in_f32

    # an f16/bf16 softmax in f32 between casts: tpuc computes it in f32 and
    # rounds once; the chip's half-float softmax drifts (shufflenet BF16)
    return in_f32(op, ctx, lambda ins, out: [
        ctx.call("backend_api_softmax_global", param, op, inputs=ins[:1], outputs=[out])
    ])  # fmt: skip
