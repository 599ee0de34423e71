"""The local form of an F16/BF16 average pooling that the global rule runs
in f32 between casts (pool.half_global_elsewhere: a window that is not
global, or a global plane above 32 elements that is not a power of two):
per slice, the input slice cast to f32 into the op's buffer
(`backend_api_cast_local`), the f32 pooling into the buffer's second half
(`backend_api_pooling_local`), and the f32 result cast back to the half
type into the op's output (to nearest even): the global rule's arithmetic,
so the group computes what the interpreter does. TPU-MLIR groups the same
three steps as its own Cast, Pool2D (F32), Cast ops (squeezenet's last
conv with its average pool)."""

from __future__ import annotations

from dataclasses import replace

from xdsl.ir import Operation

from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import DTYPE_F32, ROUND_HALF_EVEN, dtype_code, dtype_name
from tpuc.passes.native.local.ops import SecInfo, local_command, spec, value_spec
from tpuc.passes.native.local.plan import GroupPlan

ALIGN = 64  # the second f32 buffer starts on an EU row


def applies(op: Operation) -> bool:
    """An average pooling the global rule computes in f32 between casts."""
    from tpuc.passes.native.pool import PoolingCommon, half_global_elsewhere

    if op.value("pool_mode") != "Avg" or dtype_name(op.operands[0]) not in ("f16", "bf16"):
        return False
    (_, _, h, w), out = shape_of(op.operands[0]), shape_of(op.results[0])
    common = PoolingCommon()
    common.kh, common.kw = op.value("kernel_shape")
    common.is_global_pooling = (h, w) == (common.kh, common.kw) and tuple(out[2:]) == (1, 1)
    return half_global_elsewhere(op, common)


def wide_bytes(plan: GroupPlan, value) -> int:
    """Bytes per lane of `value`'s largest slice held in f32."""
    return replace(plan.tensors[value], dtype_bytes=4).lane_bytes()


def buffer(op: Operation, plan: GroupPlan) -> int:
    """The f32 input slice, then (EU-aligned) the f32 output slice."""
    first = -(-wide_bytes(plan, op.operands[0]) // ALIGN) * ALIGN
    return first + wide_bytes(plan, op.results[0])


def cast_info(info: SecInfo, rows: tuple[int, int]) -> SecInfo:
    """`info` with the output rows equal to the input rows (a cast)."""
    cast = SecInfo.from_buffer_copy(bytes(info))
    cast.h_idx, cast.h_slice = rows
    cast.is_h_split = info.is_h_split
    cast.out_h_idx, cast.out_h_slice = rows
    cast.out_n_slice, cast.out_w_slice = info.n_slice, info.w_slice
    return cast


def cast_call(op, info: SecInfo, src: bytes, dst: bytes, codes: tuple[int, int]) -> tuple:
    from tpuc.passes.native.cast import CastLocal

    param = CastLocal()
    param.common.src_dtype, param.common.dst_dtype = codes
    param.common.round_mode = ROUND_HALF_EVEN
    return local_command(op, "backend_api_cast_local", param, info, [src], [dst])


def commands(op: Operation, plan: GroupPlan, step: int, info: SecInfo, param) -> list[tuple]:
    """Cast in, the f32 pooling (`param`, `info`: the pooling's own), cast out."""
    src, dst = op.operands[0], op.results[0]
    base = plan.local(op).buffer_addr
    wide_out = base + -(-wide_bytes(plan, src) // ALIGN) * ALIGN
    ins, out = plan.tensors[src].slice_at(step), plan.tensors[dst].slice_at(step)
    (_, c, _, iw), (_, _, _, ow) = plan.tensors[src].dims, plan.tensors[dst].dims
    wide_in_spec = spec(None, "f32", shape_of(src), base)
    wide_out_spec = spec(None, "f32", shape_of(dst), wide_out)
    code = dtype_code(src)
    into = cast_info(info, (ins.h_idx, ins.h_slice))
    into.w_slice = into.out_w_slice = iw
    back = SecInfo.from_buffer_copy(bytes(info))
    back.n_slice, back.h_idx, back.h_slice = out.n_slice, out.h_idx, out.h_slice
    back.w_slice, back.c_slice = ow, c
    back.is_h_split = info.is_h_split
    back.out_w_slice = ow
    param.buffer_addr = 0
    return [
        cast_call(op, into, value_spec(plan, src, step), wide_in_spec, (code, DTYPE_F32)),
        local_command(
            op, "backend_api_pooling_local", param, info, [wide_in_spec], [wide_out_spec]
        ),  # fmt: skip
        cast_call(op, back, wide_out_spec, value_spec(plan, dst, step), (DTYPE_F32, code)),
    ]


__all__ = ["applies", "buffer", "commands"]
