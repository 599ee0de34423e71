"""A pooled vector stored lane by lane for the fc that reads it.

A classifier ends with a global average pool to [1, C, 1, 1] in a layer
group, a Reshape to [1, C] and a global INT8 fc. In local memory channel c
sits on lane c % 64, plane c // 64, one byte a plane: stored in channel
order, the GDMA moves C runs of one byte (~25 vendor cycles each;
shufflenet's 544 channels 13,593 cycles, ppocr_cls's 200 4,997). Stored lane
by lane instead, channel c goes to `lane_order(C)[c]` (each lane's planes
one run: 64 runs), and the fc takes its weight's rows in that order: the
same int32 sums, since integer addition does not care about the order.
The GDMA moves a run in one go only when it is contiguous in the lane, so a
local strided slice first packs each lane's planes (one EU row apart) into
its first bytes (`compact`, 9 TIU cycles): 544 channels 13,593 -> 1,598
GDMA cycles.

Only where the fc is the vector's one reader (through the Reshape) and
takes its weight through `tpuc.passes.native.matmul`'s int32 path (an f32
result: tpuc's float epilogue), in a group of one loop step. The group
records each vector it stores so (`NativeContext.lane_major`), the fc's
rule reads that record: a pool that runs globally writes channel order.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import NativeContext, dtype_name, quant_of
from tpuc.passes.native.local.plan import NPU_NUM, GroupPlan, LocalTensor


def lane_order(channels: int) -> np.ndarray:
    """Where channel c lands: lanes before `full` hold `planes` channels,
    the others one fewer; lane l's run starts after all earlier lanes'."""
    planes = -(-channels // NPU_NUM)
    full = channels - NPU_NUM * (planes - 1)
    c = np.arange(channels)
    lane, plane = c % NPU_NUM, c // NPU_NUM
    start = np.where(lane < full, lane * planes, full * planes + (lane - full) * (planes - 1))
    return start + plane


def _one_user(value: SSAValue) -> Operation | None:
    uses = list(value.uses)
    return uses[0].operation if len(uses) == 1 else None


def fc_of(value: SSAValue) -> Operation | None:
    """The fc that alone reads pooled `value` [1, C, 1, 1] (C > 64) through a
    Reshape to [1, C], on matmul.py's int32 path; else None."""
    shape = shape_of(value)
    if not isinstance(value.owner, tpu.Pool2DOp) or shape is None or len(shape) != 4:
        return None
    if shape[0] != 1 or tuple(shape[2:]) != (1, 1) or shape[1] <= NPU_NUM:
        return None
    reshape = _one_user(value)
    if not isinstance(reshape, tpu.ReshapeOp) or shape_of(reshape.results[0]) != (1, shape[1]):
        return None
    fc = _one_user(reshape.results[0])
    if not isinstance(fc, tpu.MatMulOp) or fc.operands[0] is not reshape.results[0]:
        return None
    if any(fc.value(flag) for flag in ("left_transpose", "right_transpose", "hdim_is_batch")):
        return None
    right = fc.operands[1]
    if not isinstance(right.owner, top.WeightOp) or len(shape_of(right) or ()) != 2:
        return None
    if quant_of(value) is None or dtype_name(fc.results[0]) != "f32":
        return None
    return fc


def mark(plan: GroupPlan) -> None:
    """Store lane by lane each output of a one-step group an fc reads so."""
    if plan.steps != 1:
        return
    for key in plan.outputs:
        if fc_of(key) is not None:
            plan.tensors[key].lane_major = True


def _local_slice():
    from tpuc.passes.native.data import StrideSlice  # noqa: F401  (declares the common spec)
    from tpuc.target.vendor.params import DECLARED, declare

    if "strideslice_local_spec_t" not in DECLARED:
        declare("strideslice_local_spec_t", "strideslice_common_spec_t common; i32 buffer_addr")
    return DECLARED["strideslice_local_spec_t"]()


def compact(tensor: LocalTensor, dtype: str, name: str) -> tuple:
    """The local command that packs each lane's planes of the pooled vector
    into one run at the buffer's start, in place: the buffer read as
    [1, 64, planes, eu] (one EU row a plane), its column 0 written as
    [1, 64, planes, 1]. Only bytes 0 .. planes − 1 of the first EU row are
    written, and of those only byte 0 is read (as the same value), so the
    copy needs no second buffer (planes <= 64)."""
    from tpuc.passes.native.local.ops import SecInfo, spec

    _, c, _, _ = tensor.dims
    planes = -(-c // NPU_NUM)
    eu = 64 // tensor.dtype_bytes
    p = _local_slice()
    ends = (1, NPU_NUM, planes, 1)
    for axis in range(4):
        p.common.begin_index[axis], p.common.end_index[axis] = 0, ends[axis]
        p.common.strides[axis] = 1
    info = SecInfo()
    info.n_slice = info.out_n_slice = info.d_slice = 1
    info.h_slice = info.out_h_slice = planes
    info.w_slice, info.out_w_slice, info.c_slice = eu, 1, NPU_NUM
    addr = tensor.addr_at(0)
    return ("local", name, "backend_api_strideslice_local", p.to_bytes(), [], info.to_bytes(),
            [spec(None, dtype, (1, NPU_NUM, planes, eu), addr)],
            [spec(None, dtype, ends, addr)])  # fmt: skip


def compacts(op: Operation, plan: GroupPlan) -> list[tuple]:
    """`compact` of each result of `op` the group stores lane by lane."""
    found = []
    for value in op.results:
        tensor = plan.tensors.get(value)
        if tensor is not None and tensor.lane_major:
            found.append(compact(tensor, dtype_name(value), getattr(op, "names", ["op"])[0]))
    return found


def moves(tensor: LocalTensor, global_addr: int, gdma_format: int, direction: int,
          name: str) -> list[tuple]:  # fmt: skip
    """tensor_stride_move_gen_cmd of the lanes holding `planes` channels and
    of those holding one fewer, each lane's run packed by `compact`: local
    [1, lanes, 1, planes], global runs of `planes` bytes (a run the GDMA
    moves as one: with the planes' EU stride it moved them byte by byte)."""
    _, c, _, _ = tensor.dims
    size = tensor.dtype_bytes
    planes = -(-c // NPU_NUM)
    full = c - NPU_NUM * (planes - 1)
    found = []
    for first, lanes, count in ((0, full, planes), (full, NPU_NUM - full, planes - 1)):
        if not lanes or not count:
            continue
        local = (lanes * planes, planes, planes, 1)
        ddr = (lanes * count, count, count, 1)
        src, dst = (ddr, local) if direction == 0 else (local, ddr)
        offset = 0 if first == 0 else full * planes * size
        args = (tensor.addr_at(0), first, global_addr + offset, 1, lanes, 1, count,
                *src, *dst, gdma_format, direction, 0)  # fmt: skip
        found.append(("move", name, args))
    return found


def permuted_rows(fc: Operation, ctx: NativeContext) -> np.ndarray | None:
    """The row order of the fc's [K, N] weight when its input was stored lane
    by lane (row lane_order(K)[c] is channel c's), else None."""
    reshape = fc.operands[0].owner
    if not isinstance(reshape, tpu.ReshapeOp):
        return None
    value = reshape.operands[0]
    if value not in ctx.lane_major:
        return None
    order = lane_order(shape_of(value)[1])
    rows = np.empty_like(order)
    rows[order] = np.arange(order.size)
    return rows  # weight row j of the stored order is channel rows[j]


__all__ = ["fc_of", "lane_order", "mark", "moves", "permuted_rows"]
