"""Permutes as the GDMA's own moves instead of `backend_api_transpose_global`.

- **A swap of the last two axes** ([N, C, W] -> [N, W, C] after
  permute_reset): one S2S `general_cwtrans_gen_cmd`, the GDMA's C/W
  transpose. The vendor's transpose moves such a matrix one element per
  GDMA row (ppocr_rec's transpose_43, [120, 40] -> [40, 120]: 30.5k
  cycles in int8, 20.0k in f16), and an identity matmul with R_trans (this
  module's int8-only predecessor) 2.8k; the C/W transpose costs 75 (int8)
  and 150 (f16) cycles. Whole nets with the transpose between two Muls:
  int8 [120, 40] 5,352 -> 2,987, [256, 256] 23,507 -> 19,354,
  [64, 1000] 35,028 -> 18,902; f16 [120, 40] 23,121 -> 2,895, [256, 256]
  107,222 -> 28,296. With H > 1 ([N, C, H, W] -> [N, W, H, C]) the runtime
  stops on the command (a dst address of 0): not taken.
- **A permute that keeps its last axis**: the vendor's one S2S tensor
  move, whose rows are the innermost runs, is priced high per run:
  ppocr_rec's attention-head permutes ([1, 40, 3, 8, 15] -> [3, 1, 8, 40,
  15] and [1, 8, 40, 15] -> [1, 40, 8, 15], runs of 15 int8) cost 9,424
  and 12,565 cycles. Once the dims that stay together are merged, such a
  permute is [X, Y, W] -> [Y, X, W], and two C/W transposes through a
  scratch buffer make it: [X, Y·W] -> [Y·W, X] = [Y, W, X], then each of
  the Y [W, X] planes -> [X, W]: 450 and 150 cycles. Channel shuffles
  ([2, C, H·W] -> [C, 2, H·W], whole nets): int8 7x7 planes 11,748 ->
  7,903, 14x14 15,583 -> 14,726, 28x28 30,103 -> 29,458; f16 alike.
  Where Y·W exceeds the command's 16-bit fields (a shuffle of 56x56
  planes), a permute with short runs (MAX_RUN_BYTES) goes through local
  memory instead: read into [C, H, W] with C over the lanes (S2L), written
  back one contiguous run per lane (L2S), `tensor_general_move_gen_cmd`
  (ppocr_rec's head permutes 4,549 + 351 and 3,033 + 499 cycles this
  way); longer runs keep the vendor's move (a shuffle of 56x56 planes:
  50,511 against 49,824).

Copies are exact for every dtype (float data included: no arithmetic).
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
GDMA_S2L, GDMA_L2S, GDMA_S2S = 0, 1, 2
MAX_DIM = 65535  # the command's N/C/H/W fields are 16 bits
NPU_NUM = 64
MAX_LANE_BYTES = 1 << 17  # half a lane's 256 KiB
MAX_RUN_BYTES = 128
"""Longest innermost run worth the local round trip: channel shuffles of
[2, C, H, W] (whole-net cycles, local against the vendor's S2S): int8
runs of 49 bytes 10,841 vs 11,748, 196 bytes 15,514 vs 15,583, 784 bytes
30,518 vs 30,103; f16 98 bytes 12,803 vs 13,710, 392 bytes 22,116 vs
21,701."""


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


def outer_swap(dims: list[int], src: list[int]) -> tuple[int, int, int] | None:
    """(X, Y, W) when the view is [X, Y, W] -> [Y, X, W] (two outer dims
    swapped, the innermost kept), else None."""
    if len(dims) != 3:
        return None
    y, x, w = dims
    return (x, y, w) if src == [w, y * w, 1] else None


def cw_swappable(x: int, y: int, w: int) -> bool:
    """Both transposes' dims within MAX_DIM."""
    return max(x, y * w) <= MAX_DIM


def swap_by_cw(op: Operation, ctx: NativeContext, x: int, y: int, w: int, dtype: str
               ) -> list[NativeCall]:  # fmt: skip
    """[X, Y, W] -> [Y, X, W] as two C/W transposes through a scratch buffer:
    [1, X, 1, Y·W] -> [Y·W, X] = [Y, W, X], then [Y, W, 1, X] -> [Y, X, W]."""
    fmt, size = GDMA_FORMATS[dtype], ELEMENT_BYTES[dtype]
    mid = ctx.scratch(x * y * w * size)
    first = _cw_args(ctx.address(op.operands[0]), mid, (1, x, 1, y * w), fmt)
    second = _cw_args(mid, ctx.address(op.results[0]), (y, w, 1, x), fmt)
    return [NativeCall("general_cwtrans_gen_cmd", b"", cw=args) for args in (first, second)]


def gdma_permute(op: Operation, ctx: NativeContext) -> list[NativeCall] | None:
    """The permute as two C/W transposes or an S2L and an L2S move, or None
    when it is neither."""
    view = strided_view(shape_of(op.operands[0]), list(op.value("order")))
    dtype = dtype_name(op.operands[0])
    if view is None or dtype not in GDMA_FORMATS:
        return None
    dims, src = view
    swap = outer_swap(dims, src)
    if swap is not None and cw_swappable(*swap):
        return swap_by_cw(op, ctx, *swap, dtype)
    while len(dims) < 3:  # [C, W] as [C, 1, W]: the lanes take the outer dim
        dims.insert(len(dims) - 1 if len(dims) > 1 else 0, 1)
        src.insert(len(src) - 1 if len(src) > 1 else 0, dims[-1])
    c, h, w = dims
    plane = h * w
    size = ELEMENT_BYTES[dtype]
    if w * size > MAX_RUN_BYTES or -(-c // NPU_NUM) * plane * size > MAX_LANE_BYTES:
        return None
    shape = (1, c, h, w)
    local = (-(-c // NPU_NUM) * plane, plane, w, 1)
    fmt = GDMA_FORMATS[dtype]
    load = (ctx.address(op.operands[0]), 0, *shape, c * plane, *src, fmt, 0, 0, *shape, *local,
            GDMA_S2L, 0)  # fmt: skip
    store = (0, 0, *shape, *local, fmt, ctx.address(op.results[0]), 0, *shape,
             c * plane, plane, w, 1, GDMA_L2S, 0)  # fmt: skip
    return [NativeCall("tensor_general_move_gen_cmd", b"", move=m) for m in (load, store)]


def cw_dims(shape: list[int], order: list[int]) -> tuple[int, int, int, int] | None:
    """[N, C, 1, W] of a permute_reset 4-D permute that is the GDMA's C/W
    transpose ([N, C, H, W] -> [N, W, H, C]) with H = 1, or None (with H > 1
    the runtime stops on the command: a dst address of 0)."""
    if order == [0, 1, 3, 2] and shape[0] == 1:
        return (shape[1], shape[2], 1, shape[3])
    return None


def cw_permute(op: Operation, ctx: NativeContext, shape: list[int], order: list[int]
               ) -> list[NativeCall] | None:  # fmt: skip
    """The permute as one S2S `general_cwtrans_gen_cmd`, or None when it is not one."""
    dims = cw_dims(shape, order)
    dtype = dtype_name(op.operands[0])
    if dims is None or dtype not in GDMA_FORMATS or max(dims) > MAX_DIM:
        return None
    args = _cw_args(ctx.address(op.operands[0]), ctx.address(op.results[0]), dims,
                    GDMA_FORMATS[dtype])  # fmt: skip
    return [NativeCall("general_cwtrans_gen_cmd", b"", cw=args)]


def cw_call(src: int, dst: int, dims: tuple[int, int, int, int], dtype: str) -> NativeCall:
    """One C/W transpose [N, C, H, W] -> [N, W, H, C] of `dtype` data, DDR to DDR."""
    args = _cw_args(src, dst, dims, GDMA_FORMATS[dtype])
    return NativeCall("general_cwtrans_gen_cmd", b"", cw=args)


def _cw_args(src: int, dst: int, dims: tuple[int, int, int, int], fmt: int) -> tuple:
    """general_cwtrans_gen_cmd's arguments for [N, C, H, W] -> [N, W, H, C], DDR to DDR."""
    n, c, h, w = dims
    return (src, 0, dst, 0, n, c, h, w, fmt, c * h * w, h * w, w, w * h * c, h * c, c, 1,
            GDMA_S2S)  # fmt: skip


__all__ = ["cw_call", "cw_permute", "gdma_permute", "strided_view"]
