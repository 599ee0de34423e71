"""f32 between local casts: the local form of the global rules' detour
(passes/native/f32.py) for half-float ops the chip computes otherwise
than tpuc (average pools, depthwise convolutions) or not at all
(activations), and the local rule of tpu.HardSigmoid that uses it.

`widened` casts the op's input slice to f32 into the op's scratch buffer
(`backend_api_cast_local`), runs the op's f32 local call from there into
a second f32 region, and casts that back to the result's slice, rounding
to nearest even once: tpuc's float arithmetic, as the global rule
computes it. `wide_buffer` is the scratch it needs; an f32
`backend_api_active_local` (HSWISH, HSIGMOID) also works in a buffer the
size of its input (TPU-MLIR's ActiveOp::getBufferSize_bm1684x), a third
region `active_buffer` adds and `active_param` points at: left at
address 0, the kernel overwrote whatever lived there, which only showed
once lifetimes let a live tensor sit at 0.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.passes.native.cast import CastLocal
from tpuc.passes.native.context import (
    DTYPE_F32,
    ROUND_HALF_EVEN,
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
    is_float,
)
from tpuc.passes.native.local.ops import (
    Coeff,
    LocalRule,
    SecInfo,
    identity,
    local_command,
    local_rule,
    spec,
    value_spec,
)
from tpuc.passes.native.local.plan import EU_BYTES, NPU_NUM, GroupPlan, LocalTensor
from tpuc.target.vendor.params import ActiveLocal


def f32_bytes(tensor: LocalTensor) -> int:
    """Per-lane bytes of the tensor's largest slice held as f32 (EU-aligned planes)."""
    _, c, _, w = tensor.dims
    eu = EU_BYTES // 4
    worst = 0
    for s in tensor.slices:
        plane = -(-(s.h_slice * w) // eu) * eu
        worst = max(worst, s.n_slice * -(-c // NPU_NUM) * plane * 4)
    return worst


def wide_buffer(op: Operation, plan: GroupPlan) -> int:
    """The f32 copies of the input and result slices, one after the other."""
    ins = f32_bytes(plan.tensors[op.operands[0]])
    return -(-ins // EU_BYTES) * EU_BYTES + f32_bytes(plan.tensors[op.results[0]])


def _aligned(size: int) -> int:
    return -(-size // EU_BYTES) * EU_BYTES


def active_buffer(op: Operation, plan: GroupPlan) -> int:
    """wide_buffer and, after it, the f32 active kernel's own work buffer
    (as large as its f32 input slice)."""
    return _aligned(wide_buffer(op, plan)) + f32_bytes(plan.tensors[op.operands[0]])


def active_param(op: Operation, plan: GroupPlan, mode: str) -> ActiveLocal:
    """active_local_spec_t of `mode` whose buffer_addr is the third region
    of the op's scratch (active_buffer)."""
    from tpuc.passes.native.active import ACTIVE_TYPES

    param = ActiveLocal()
    param.common.active_type = ACTIVE_TYPES[mode]
    param.buffer_addr = plan.local(op).buffer_addr + _aligned(wide_buffer(op, plan))
    return param


def plain_info(tensor: LocalTensor, step: int) -> SecInfo:
    """local_sec_info_t of an elementwise call over the tensor's slice."""
    _, c, h, w = tensor.dims
    s = tensor.slice_at(step)
    info = SecInfo()
    info.n_slice = info.out_n_slice = s.n_slice
    info.n_idx, info.d_slice = s.n_idx, 1
    info.h_idx = info.out_h_idx = s.h_idx
    info.h_slice = info.out_h_slice = s.h_slice
    info.w_slice = info.out_w_slice = w
    info.c_slice = c
    info.is_h_split = int(not (s.h_idx == 0 and s.h_slice == h))
    return info


def _cast(op, tensor: LocalTensor, step: int, src: bytes, dst: bytes, codes) -> tuple:
    param = CastLocal()
    param.common.src_dtype, param.common.dst_dtype = codes
    param.common.round_mode = ROUND_HALF_EVEN
    return local_command(op, "backend_api_cast_local", param, plain_info(tensor, step), [src],
                         [dst])  # fmt: skip


def widened(op: Operation, plan: GroupPlan, step: int,
            body: Callable[[bytes, bytes], list[tuple]]) -> list[tuple]:  # fmt: skip
    """[cast input -> f32, *body(f32 input spec, f32 output spec), cast -> result]."""
    src, dst = op.operands[0], op.results[0]
    ins, out = plan.tensors[src], plan.tensors[dst]
    base = plan.local(op).buffer_addr
    wide_in = base
    wide_out = base + -(-f32_bytes(ins) // EU_BYTES) * EU_BYTES
    in_spec = spec(None, "f32", ins.dims, wide_in)
    out_spec = spec(None, "f32", out.dims, wide_out)
    code = dtype_code(src)
    return [
        _cast(op, ins, step, value_spec(plan, src, step), in_spec, (code, DTYPE_F32)),
        *body(in_spec, out_spec),
        _cast(op, out, step, out_spec, value_spec(plan, dst, step), (DTYPE_F32, dtype_code(dst))),
    ]


# --- HardSigmoid -----------------------------------------------------------------------------


def half_only(op: Operation, ctx: NativeContext) -> list[Coeff]:
    if dtype_name(op.operands[0]) not in ("f16", "bf16") or not is_float(op.results[0]):
        raise NotExpressible("a local activation other than of f16/bf16 (not written yet)")
    return []


def hard_sigmoid_command(op: Operation, ctx: NativeContext, plan: GroupPlan,
                         step: int) -> list[tuple]:  # fmt: skip
    """HSIGMOID with coeffs {beta, alpha}, in f32 (active.hard_sigmoid's)."""
    param = active_param(op, plan, "HSIGMOID")
    param.common.coeffs[0] = float(op.value("beta"))
    param.common.coeffs[1] = float(op.value("alpha"))
    info = plain_info(plan.tensors[op.results[0]], step)
    return widened(op, plan, step, lambda a, b: [
        local_command(op, "backend_api_active_local", param, info, [a], [b])
    ])  # fmt: skip


local_rule(
    tpu.HardSigmoidOp, rule=LocalRule(identity, half_only, active_buffer, hard_sigmoid_command)
)

LOCAL_ACTIVE = ("HSWISH", "HSIGMOID")
"""tpu.Active modes written locally: piecewise-linear ones, which need no
table or scratch of the kernel's own."""


def active_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    if op.value("mode") not in LOCAL_ACTIVE:
        raise NotExpressible(f"a local active mode {op.value('mode')!r} (not written yet)")
    return half_only(op, ctx)


def active_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    """active_local_spec_t in f32 (active.active's detour, its coefficients none)."""
    param = active_param(op, plan, op.value("mode"))
    info = plain_info(plan.tensors[op.results[0]], step)
    return widened(op, plan, step, lambda a, b: [
        local_command(op, "backend_api_active_local", param, info, [a], [b])
    ])  # fmt: skip


local_rule(tpu.ActiveOp, rule=LocalRule(identity, active_coeffs, active_buffer, active_command))

__all__ = ["active_buffer", "active_param", "f32_bytes", "plain_info", "wide_buffer", "widened"]
