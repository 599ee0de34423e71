"""Softmax, after TPU-MLIR's `Interfaces/BM1684X/Softmax.cpp` float form:
`backend_api_softmax_global` (`softmax_global_param_t`): begin_axis =
end_axis = axis, scale_val = 1, log = the op's `log`, zero_point = 0.
(tpuc lowers an INT8 Softmax to float between casts.)

A row longer than the global kernel sums in two stages
(`chip_float.TWO_STAGE_MAX`) runs as the local kernel in a layer group of
its own where `chip_float.two_stage` says so (`softmax_group`), as the TPU
interpreter computes it: ppocr_rec's [1, 40, 6625] classifier softmax.
"""

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
)
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import declare

declare(
    "softmax_common_param_t", "f32 scale_val; i32 begin_axis; i32 end_axis; i32 log; i32 zero_point"
)
SoftmaxGlobal = declare("softmax_global_param_t", "softmax_common_param_t common")


def long_rows(op: Operation) -> bool:
    """A softmax over an innermost axis longer than the global kernel sums
    in two stages, which the native target runs locally (`two_stage`)."""
    from tpuc.kernels.chip_float import TWO_STAGE_MAX, two_stage

    shape = tuple(shape_of(op.operands[0]))
    axis = int(op.value("axis"))
    axis = axis + len(shape) if axis < 0 else axis
    if any(d != 1 for d in shape[axis + 1 :]) or shape[axis] <= TWO_STAGE_MAX:
        return False
    return not op.value("log") and two_stage(shape[: axis + 1], axis)


def deferred_epilogue(op: Operation) -> Operation | None:
    """The INT8 fc whose float epilogue (epilogue.py: int32 -> f32, times
    the per-column scale) this long-row softmax does in its own group
    instead, or None: the fc's only reader, no fused ReLU, no zero points,
    its [1, C, N] result one row a lane (C <= 64). The fc joins the group
    (local/fc_sums.py), its int32 sums stay in local memory, cast and
    scaled there before the softmax: ppocr_rec's classifier, whose epilogue
    cost two passes over DDR (a cast 42k, the multiply 47k vendor cycles)
    and its int32 sums a store and a load (25.9k, 19.6k)."""
    from tpuc.passes.native.context import quant_of
    from tpuc.passes.native.local.plan import NPU_NUM
    from tpuc.passes.native.matmul import fc_dims

    fc = op.operands[0].owner
    if not long_rows(op) or not isinstance(fc, tpu.MatMulOp):
        return None
    if len(list(op.operands[0].uses)) != 1 or dtype_name(fc.results[0]) != "f32":
        return None
    if quant_of(fc.operands[0]) is None or fc_dims(fc) is None or fc.value("do_relu"):
        return None
    if fc.value("left_transpose") or fc.value("hdim_is_batch") or fc.value("right_transpose"):
        return None
    right_q = quant_of(fc.operands[1])
    if quant_of(fc.operands[0]).zero_point or (right_q is not None and right_q.zero_point):
        return None
    shape = tuple(shape_of(op.operands[0]))
    return fc if len(shape) == 3 and shape[1] <= NPU_NUM else None


def absorbed_cast(op: Operation) -> Operation | None:
    """The cast of this long-row f16/bf16 softmax's result to f32 that only
    the model's outputs read, which its group does before the store (the
    global cast was another pass over DDR: ppocr_rec F16's 33k cycles)."""
    from xdsl.dialects import func

    uses = list(op.results[0].uses)
    if not long_rows(op) or len(uses) != 1 or dtype_name(op.results[0]) == "f32":
        return None
    cast = uses[0].operation
    if not isinstance(cast, tpu.CastOp) or cast.value("to") or dtype_name(cast.results[0]) != "f32":
        return None
    if not all(isinstance(use.operation, func.ReturnOp) for use in cast.results[0].uses):
        return None
    return cast


def absorbs(cast: Operation) -> bool:
    """Whether a long-row softmax's group does this cast (absorbed_cast)."""
    producer = cast.operands[0].owner
    return isinstance(producer, tpu.SoftmaxOp) and absorbed_cast(producer) is cast


def half_fc(op: Operation) -> Operation | None:
    """The F16/BF16 fc with a bias (its half form, `fc_half_form`) whose
    result only this long-row softmax reads, [1, C, N] with C <= 64: it
    joins the softmax's group (local/fc_sums.py), its half result never
    stored and loaded again."""
    from tpuc.kernels.half_conv import fc_half_form
    from tpuc.passes.native.local.plan import NPU_NUM
    from tpuc.passes.native.matmul import fc_dims, has_bias

    fc = op.operands[0].owner
    if not long_rows(op) or not isinstance(fc, tpu.MatMulOp):
        return None
    dtype = dtype_name(fc.results[0])
    if dtype not in ("f16", "bf16") or dtype_name(fc.operands[0]) != dtype:
        return None
    if len(list(op.operands[0].uses)) != 1 or fc_dims(fc) is None or not has_bias(fc):
        return None
    if fc.value("do_relu") or any(
        fc.value(a) for a in ("left_transpose", "hdim_is_batch", "right_transpose")
    ):
        return None
    m, k, n = fc_dims(fc)
    shape = tuple(shape_of(op.operands[0]))
    if len(shape) != 3 or shape[1] > NPU_NUM or not fc_half_form(m, k, n):
        return None
    return fc


def grouped_fc(op: Operation) -> Operation | None:
    """The fc this long-row softmax's group holds: deferred_epilogue or half_fc."""
    return deferred_epilogue(op) or half_fc(op)


def softmax_group(op: Operation, ctx: NativeContext):
    """The softmax as a layer group of its own: its input loaded, the local
    kernel, its result stored (local/softmax.py)."""
    from tpuc.passes.native.emit import GroupCall
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.emit import group_commands

    ops = [o for o in (grouped_fc(op), op, absorbed_cast(op)) if o is not None]
    plan = plan_chain(ops, ctx)
    return GroupCall(group_commands(plan, ctx), f"the layer group of {op.name} '{op.names[0]}'")


@native_rule(tpu.SoftmaxOp)
def softmax(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    if not (is_float(op.operands[0]) and is_float(op.results[0])):
        raise NotExpressible("an integer softmax (tpuc runs it in float)")
    if long_rows(op):
        return softmax_group(op, ctx)
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
