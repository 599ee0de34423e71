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

from xdsl.ir import Operation

from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import dtype_name
from tpuc.passes.native.local.ops import SecInfo, local_command
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


def buffer(op: Operation, plan: GroupPlan) -> int:
    """The f32 input slice, then the f32 output slice (wide.wide_buffer)."""
    from tpuc.passes.native.local.wide import wide_buffer

    return wide_buffer(op, plan)


def commands(op: Operation, plan: GroupPlan, step: int, info: SecInfo, param) -> list[tuple]:
    """Cast in, the f32 pooling (`param`, `info`: the pooling's own), cast
    out (wide.widened)."""
    from tpuc.passes.native.local.wide import widened

    param.buffer_addr = 0

    def pool(wide_in: bytes, wide_out: bytes) -> list[tuple]:
        return [local_command(op, "backend_api_pooling_local", param, info, [wide_in], [wide_out])]

    return widened(op, plan, step, pool)


__all__ = ["applies", "buffer", "commands"]
