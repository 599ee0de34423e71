"""The local rule of a channel tpu.Concat, after TPU-MLIR's Concat.cpp
`codegen_local_bm1684x`: `backend_api_concat_local` copies each input
slice into its channels of the output slice (`is_st_concat_way` all 0).

tpuc's INT8 concat may rescale inputs (requant(q − Z_i, M_i, r_i) + Z,
the global rule's `_requants`), which the library's concat cannot: each
rescaled input slice is first requantized into a region of the concat's
scratch buffer, and the concat reads it from there: by
`backend_api_mulshift_local` when the pair is the chip's MulShift (a u8
multiplier rounded half up without zero points, the bm168x lowering's
form: one AR pass, as TPU-MLIR's MulShift ops before its Concat), else by
`backend_api_requant_int_local` (the global rule's requant_int fields).
Each region keeps an EU row of slack past its 8-bit values, as
requant_int_local writes up to 64 bytes per lane past its result
(docs/layer-group.md), and is followed by the kernel's buffer
(getBufferSize_bm1684x: requant_int's int16 one of twice the input slice;
MulShift's the same for an i8 input into a u8 result, else none).
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native import (
    data,  # declares concat_common_spec_t; its _requants
    mulshift,
)
from tpuc.passes.native.context import NativeContext, NotExpressible, dtype_code, quant_of
from tpuc.passes.native.local.ops import (
    Coeff,
    LocalRule,
    identity,
    local_command,
    local_rule,
    sec_info,
    spec,
    value_spec,
)
from tpuc.passes.native.local.plan import EU_BYTES, GroupPlan
from tpuc.target.vendor.params import declare

ConcatLocal = declare(
    "concat_local_spec_t", "concat_common_spec_t common; ptr is_st_concat_way; i32 buffer_addr"
)


def _pairs(op: Operation) -> list:
    return data._requants(op) or [None] * len(op.operands)


def concat_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """No coefficients; refuses what the local form does not write: another
    axis than channels, other ranks, weight inputs, inputs of another
    storage type left unscaled, a fused relu that is not the saturation."""
    from tpuc.dialects import top

    out = op.results[0]
    shape = shape_of(out)
    if len(shape) != 4 or op.value("axis") % 4 != 1:
        raise NotExpressible("a local concat other than along the channels of 4-D tensors")
    if any(isinstance(v.owner, top.WeightOp) or len(shape_of(v)) != 4 for v in op.operands):
        raise NotExpressible("a local concat of weights")
    q = quant_of(out)
    if op.value("do_relu") and (q is None or q.zero_point != q.storage_min):
        raise NotExpressible("a local concat with a fused relu")
    for v, pair in zip(op.operands, _pairs(op), strict=True):
        if pair is None and dtype_code(v) != dtype_code(out):
            raise NotExpressible("a local concat of inputs of another storage type")
    return []


def _mulshift(op: Operation, v, pair) -> bool:
    return mulshift.fits(v, op.results[0], pair, op.value("round_mode") or "")


def _regions(op: Operation, plan: GroupPlan) -> list[tuple[int, int] | None]:
    """Per input, (offset of its requantized copy, offset of its kernel's
    buffer) in the concat's scratch buffer, or None when not rescaled; and
    the total as the last element's end. requant_int_local's buffer is
    twice the input slice (int16); MulShift's only for an i8 -> u8 input."""
    found, offset = [], 0
    for v, pair in zip(op.operands, _pairs(op), strict=True):
        if pair is None:
            found.append(None)
            continue
        size = plan.tensors[v].lane_bytes()
        copy = -(-size // EU_BYTES) * EU_BYTES + EU_BYTES
        work = 2 * size
        if _mulshift(op, v, pair):
            work = mulshift.buffer_bytes(v, op.results[0], size)
        found.append((offset, offset + copy))
        offset += copy + (-(-work // EU_BYTES) * EU_BYTES + EU_BYTES if work else 0)
    found.append((offset, offset))
    return found


def concat_buffer(op: Operation, plan: GroupPlan) -> int:
    return _regions(op, plan)[-1][0]


def _requant(op, plan, step, v, pair, copy_addr, buffer_addr) -> tuple:
    from tpuc.passes.native.conv import round_mode
    from tpuc.passes.native.requant import MULTIPLIER_SHIFT, RequantIntParam

    out = plan.tensors[op.results[0]].slice_at(step)
    name = getattr(op, "names", ["op"])[0]
    dims = (out.n_slice, shape_of(v)[1], out.h_slice, shape_of(v)[3])
    if _mulshift(op, v, pair):
        addrs = (plan.tensors[v].addr_at(step), copy_addr)
        p = mulshift.param(v, op.results[0], addrs, dims, pair)
        p.buffer_addr = buffer_addr
        return ("plain_local", name, "backend_api_mulshift_local", p.to_bytes())
    p = RequantIntParam()
    p.input_addr, p.output_addr = plan.tensors[v].addr_at(step), copy_addr
    p.buffer_local_addr = buffer_addr
    p.n, p.c, p.h, p.w = dims
    p.input_dtype, p.output_dtype = dtype_code(v), dtype_code(op.results[0])
    p.zx_value, p.offset_value = quant_of(v).zero_point, quant_of(op.results[0]).zero_point
    p.mode, p.round_mode = MULTIPLIER_SHIFT, round_mode(op)
    m, r = pair
    p.mul_value, p.shift_value = int(m), -int(r)
    return ("plain_local", name, "backend_api_requant_int_local", p.to_bytes())


def concat_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list:
    from tpuc.passes.native.context import dtype_name

    base = plan.local(op).buffer_addr
    commands, inputs = [], []
    regions = _regions(op, plan)[:-1]
    for v, pair, region in zip(op.operands, _pairs(op), regions, strict=True):
        if region is None:
            inputs.append(value_spec(plan, v, step))
            continue
        copy_addr, buffer_addr = base + region[0], base + region[1]
        commands.append(_requant(op, plan, step, v, pair, copy_addr, buffer_addr))
        inputs.append(spec(None, dtype_name(op.results[0]), shape_of(v), copy_addr))
    p = ConcatLocal()
    p.common.input_num, p.common.concat_axis = len(op.operands), 1
    pointers = [(ConcatLocal.is_st_concat_way.offset, bytes(4 * len(op.operands)))]
    outputs = [value_spec(plan, op.results[0], step)]
    info = sec_info(op, plan, step)
    commands.append(local_command(op, "backend_api_concat_local", p, info, inputs, outputs,
                                  pointers))  # fmt: skip
    return commands


local_rule(tpu.ConcatOp, rule=LocalRule(identity, concat_coeffs, concat_buffer, concat_command))
