"""The local rule of tpu.Cast: quantizing (float -> INT8), dequantizing
(INT8 -> f32) and between float types (f32 <-> f16/bf16:
`backend_api_cast_local` with `cast_local_spec_t`, the global rule's
dtypes and round mode, no buffer; an F16/BF16 model's input cast joins the
first group, as in TPU-MLIR). The quantizing form follows
TPU-MLIR's Cast.cpp `codegen_local_bm1684x`: the model's input
quantization joins the first layer group instead of a global layer that
loads, converts and stores the whole input before the group loads it
again (TPU-MLIR groups it the same way); an INT8 layer read by a float one
(inception_v1's conv and pool before its F32 LRNs) dequantizes in its group
and stores f32, instead of storing int8 for a global Cast to read back.

Quantize: `backend_api_requant_float_local` with `requant_fp_param_t` (the
global rule's fields: scale 1/S, offset Z, the op's round mode) on the
slice's local addresses; its scratch is a buffer of the input slice's size
(TPU-MLIR reuses the input's own buffer when nothing else reads it).
Dequantize: `backend_api_dequant_float_local` with `dequant_fp_param_t`
(scale S, offset Z, as the global rule), no scratch.
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.passes.native.cast import CastLocal, DequantFp, RequantFp, nchw, quantize_scale
from tpuc.passes.native.context import (
    DTYPE_F32,
    NativeContext,
    NotExpressible,
    dtype_code,
    is_float,
    quant_of,
)
from tpuc.passes.native.local.ops import (
    Coeff,
    LocalRule,
    identity,
    local_command,
    local_rule,
    sec_info,
    value_spec,
)
from tpuc.passes.native.local.plan import GroupPlan


def float_cast(op: Operation) -> bool:
    """A cast between float types (no quantization on either side)."""
    src, dst = op.operands[0], op.results[0]
    plain = quant_of(src) is None and quant_of(dst) is None
    return plain and is_float(src) and is_float(dst) and not op.value("to")


def is_dequantize(op: Operation) -> bool:
    """INT8 (symmetric or not) -> f32."""
    src, dst = op.operands[0], op.results[0]
    return quant_of(src) is not None and is_float(dst) and dtype_code(dst) == DTYPE_F32


def quantize_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """No coefficients; refuses every cast but float -> INT8, INT8 -> f32
    and float -> float."""
    src, dst = op.operands[0], op.results[0]
    if float_cast(op):
        from tpuc.passes.native.cast import CAST_ROUND_MODES

        if (op.value("round_mode") or "HalfAwayFromZero") not in CAST_ROUND_MODES:
            raise NotExpressible(f"round_mode {op.value('round_mode')}")
        return []
    if op.value("to"):
        raise NotExpressible("a local cast with a value conversion (not written yet)")
    if is_dequantize(op):
        return []
    if quant_of(dst) is None or quant_of(src) is not None or not is_float(src):
        raise NotExpressible("a local cast other than float -> INT8, INT8 -> f32 or float -> float")
    return []


def quantize_buffer(op: Operation, plan: GroupPlan) -> int:
    if is_dequantize(op) or float_cast(op):
        return 0
    return plan.tensors[op.operands[0]].lane_bytes()


def dequantize_command(op: Operation, plan: GroupPlan, step: int) -> list:
    """dequant_fp_param_t on the slice: scale S_in, offset Z_in (cast.py's global form)."""
    from tpuc.passes.native.conv import round_mode

    src, dst = op.operands[0], op.results[0]
    out = plan.tensors[dst].slice_at(step)
    q = quant_of(src)
    p = DequantFp()
    p.input_addr = plan.tensors[src].addr_at(step)
    p.output_addr = plan.tensors[dst].addr_at(step)
    _, c, _, w = nchw(dst)
    p.n, p.c, p.h, p.w = out.n_slice, c, out.h_slice, w
    p.scale_value, p.offset_value = q.scale, q.zero_point
    p.input_dtype, p.output_dtype = dtype_code(src), dtype_code(dst)
    p.round_mode = round_mode(op)
    name = getattr(op, "names", ["op"])[0]
    return [("plain_local", name, "backend_api_dequant_float_local", p.to_bytes())]


def quantize_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list:
    from tpuc.passes.native.conv import round_mode

    if is_dequantize(op):
        return dequantize_command(op, plan, step)
    src, dst = op.operands[0], op.results[0]
    if float_cast(op):
        spec = CastLocal()
        spec.common.src_dtype, spec.common.dst_dtype = dtype_code(src), dtype_code(dst)
        spec.common.round_mode = round_mode(op)
        inputs, outputs = [value_spec(plan, src, step)], [value_spec(plan, dst, step)]
        info = sec_info(op, plan, step)
        return [local_command(op, "backend_api_cast_local", spec, info, inputs, outputs)]
    out = plan.tensors[dst].slice_at(step)
    p = RequantFp()
    p.input_addr = plan.tensors[src].addr_at(step)
    p.output_addr = plan.tensors[dst].addr_at(step)
    p.buffer_local_addr = plan.local(op).buffer_addr
    _, c, _, w = nchw(dst)
    p.n, p.c, p.h, p.w = out.n_slice, c, out.h_slice, w
    p.scale_value, p.offset_value = quantize_scale(op)
    p.input_dtype, p.output_dtype = dtype_code(src), dtype_code(dst)
    p.round_mode = round_mode(op)
    name = getattr(op, "names", ["op"])[0]
    return [("plain_local", name, "backend_api_requant_float_local", p.to_bytes())]


local_rule(tpu.CastOp, rule=LocalRule(identity, quantize_coeffs, quantize_buffer, quantize_command))
