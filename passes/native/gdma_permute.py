"""A permute that keeps its last axis as two strided GDMA moves through local memory.

`backend_api_transpose_global` moves a permute that keeps the innermost
axis with one DDR-to-DDR tensor move, whose rows are the innermost runs:
ppocr_rec's attention-head permutes ([1, 40, 3, 8, 15] -> [3, 1, 8, 40, 15]
and [1, 8, 40, 15] -> [1, 40, 8, 15], runs of 15 int8) cost 9,424 and
12,565 vendor cycles for 14.4 KB and 4.8 KB. The chip's model prices a
move into local memory far lower per run: once the dims that stay together
are merged, [C, H, W] in output order (at most three) goes to local memory
with C over the lanes, read with the input's strides (`S2L`), then back
with the output's (`L2S`), where each lane's H x W block is one contiguous
run: 4,549 + 351 and 3,033 + 499 cycles (F16: 4,549 + 702, 2,022 + 333;
the vendor's S2S 9,424 and 5,584). `tensor_general_move_gen_cmd` writes
both; GDMA runs its commands in order, and a copy is exact for every dtype.

Taken when the innermost source stride is 1 (a swap of the last two axes
would move single elements; transpose_mm.py handles the small 8-bit ones),
at most two dims remain besides it, they fit the command's 16-bit fields
and a lane's share fits MAX_LANE_BYTES.
"""

from __future__ import annotations

import math

from xdsl.ir import Operation

from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import NativeCall, NativeContext, dtype_name

ELEMENT_BYTES = {"i8": 1, "u8": 1, "f16": 2, "bf16": 2, "i16": 2, "u16": 2, "f32": 4, "i32": 4,
                 "u32": 4}  # fmt: skip
GDMA_FORMATS = {"i8": 0, "u8": 0, "f16": 1, "f32": 2, "i32": 2, "u32": 2, "i16": 3, "u16": 3,
                "bf16": 5}  # fmt: skip
GDMA_S2L, GDMA_L2S = 0, 1
MAX_DIM = 65535  # the command's N/C/H/W fields are 16 bits
NPU_NUM = 64
MAX_LANE_BYTES = 1 << 17  # half a lane's 256 KiB


def strided_view(shape: list[int], order: list[int]) -> tuple[list[int], list[int]] | None:
    """(dims, source element strides) of the permuted tensor read in output
    order, unit dims dropped and neighbours that are contiguous in the
    source merged; None unless the innermost stride is 1 and at most three
    dims of at most MAX_DIM remain."""
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    dims, src = [], []
    for axis in order:
        if shape[axis] == 1:
            continue
        if src and src[-1] == strides[axis] * shape[axis]:
            dims[-1] *= shape[axis]
            src[-1] = strides[axis]
            continue
        dims.append(shape[axis])
        src.append(strides[axis])
    if not dims or src[-1] != 1 or len(dims) > 3 or max(dims) > MAX_DIM:
        return None
    return dims, src


def gdma_permute(op: Operation, ctx: NativeContext) -> list[NativeCall] | None:
    """The permute as an S2L and an L2S move, or None when it is not one."""
    view = strided_view(shape_of(op.operands[0]), list(op.value("order")))
    dtype = dtype_name(op.operands[0])
    if view is None or dtype not in GDMA_FORMATS:
        return None
    dims, src = view
    while len(dims) < 3:  # [C, W] as [C, 1, W]: the lanes take the outer dim
        dims.insert(len(dims) - 1 if len(dims) > 1 else 0, 1)
        src.insert(len(src) - 1 if len(src) > 1 else 0, dims[-1])
    c, h, w = dims
    plane = h * w
    if -(-c // NPU_NUM) * plane * ELEMENT_BYTES[dtype] > MAX_LANE_BYTES:
        return None
    shape = (1, c, h, w)
    local = (-(-c // NPU_NUM) * plane, plane, w, 1)
    fmt = GDMA_FORMATS[dtype]
    load = (ctx.address(op.operands[0]), 0, *shape, c * plane, *src, fmt, 0, 0, *shape, *local,
            GDMA_S2L, 0)  # fmt: skip
    store = (0, 0, *shape, *local, fmt, ctx.address(op.results[0]), 0, *shape,
             c * plane, plane, w, 1, GDMA_L2S, 0)  # fmt: skip
    return [NativeCall("tensor_general_move_gen_cmd", b"", move=m) for m in (load, store)]


__all__ = ["gdma_permute", "strided_view"]
