"""Ops that move data: Reshape, Permute, Concat, Slice, Pad, Upsample,
Depth2Space, Split, Tile/Expand, after TPU-MLIR's `Interfaces/BM1684X/<Op>.cpp`.

Shapes are canonicalised as TPU-MLIR's permute_reset/pad_reset do (unit
dims dropped, dims that stay together merged, padded to 4-D); the vendor
kernels then see the same small problems TPU-MLIR gives them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native import mulshift
from tpuc.passes.native.cast import nchw, round_mode
from tpuc.passes.native.context import (
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
    quant_of,
)
from tpuc.passes.native.gdma_permute import cw_permute, gdma_permute
from tpuc.passes.native.requant import RequantInt
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import declare

declare("transpose_spec_t", "u64 buffer_global_addr; u32 order[8]; u32 is_dynamic")
Transpose = declare(
    "transpose_param_t",
    "transpose_spec_t spec; i32 if_getting_buffer_size; ptr buffer_size_ptr; i32 num_core",
)
declare("concat_common_spec_t", "i32 input_num; i32 concat_axis")
ConcatGlobal = declare("concat_global_spec_t", "concat_common_spec_t common; ptr is_st_concat_way")


def _same_quant(op: Operation) -> None:
    """Data movement keeps q values: input and output share their type."""
    ins = [v for v in op.operands if not isinstance(v.owner, top.NoneOp)]
    types = {v.type.element_type for v in ins} | {v.type.element_type for v in op.results}
    if len(types) != 1:
        raise NotExpressible("a data move that changes the element type")


def permute_reset(shape, order, rank: int = 4) -> tuple[list[int], list[int]]:
    """(shape, order) with unit dims dropped, dims that stay adjacent merged,
    left-padded with unit dims to `rank` (TPU-MLIR's permute_reset)."""
    keep = [d for d in range(len(shape)) if shape[d] != 1]
    order = [d for d in order if shape[d] != 1]
    rank_of = {d: i for i, d in enumerate(keep)}
    order = [rank_of[d] for d in order]
    shape = [shape[d] for d in keep]
    groups: list[list[int]] = []  # runs of input dims that stay adjacent, in output order
    for d in order:
        if groups and groups[-1][-1] + 1 == d:
            groups[-1].append(d)
        else:
            groups.append([d])
    by_start = sorted(groups, key=lambda g: g[0])
    new_shape = [math.prod(shape[d] for d in g) for g in by_start]
    new_order = [by_start.index(g) for g in groups]
    if len(new_shape) > rank:
        raise NotExpressible(f"a permute of {len(new_shape)} merged dims (at most {rank})")
    pad = rank - len(new_shape)
    return [1] * pad + new_shape, list(range(pad)) + [o + pad for o in new_order]


def transpose_call(ctx: NativeContext, src: SSAValue, dst: SSAValue, shape, order) -> NativeCall:
    """transpose_param_t over specs viewed as `shape` (in) and the permuted shape (out)."""
    p = Transpose()
    for i, o in enumerate(order):
        p.spec.order[i] = o
    p.num_core = 1
    out_shape = tuple(shape[o] for o in order)
    ins, outs = [ctx.spec(src, tuple(shape))], [ctx.spec(dst, out_shape)]
    return NativeCall("backend_api_transpose_global", p.to_bytes(), ins, outs)


@native_rule(tpu.PermuteOp)
def permute(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Permute.cpp: permute_reset to 4-D, fix_shape, transpose_param_t.order."""
    _same_quant(op)
    shape, order = shape_of(op.operands[0]), list(op.value("order"))
    for rank in (4, 5, 6):
        try:
            fixed, fixed_order = permute_reset(shape, order, rank)
            break
        except NotExpressible:
            if rank == 6:
                raise
    if fixed_order == sorted(fixed_order):
        return copy(op.operands[0], op.results[0], ctx)
    moved = cw_permute(op, ctx, fixed, fixed_order)  # the GDMA's own C/W transpose
    if moved is not None:
        return moved
    moved = gdma_permute(op, ctx)  # the last axis kept: one strided copy
    if moved is not None:
        return moved
    return [transpose_call(ctx, op.operands[0], op.results[0], fixed, fixed_order)]


def copy(
    src: SSAValue, dst: SSAValue, ctx: NativeContext, addr: int | None = None
) -> list[NativeCall]:
    """A plain copy of `src`'s bytes to `dst` (or to `addr`): a one-input concat."""
    if addr is None:
        addr = ctx.address(dst)
    if ctx.address(src) == addr:
        return []
    n = math.prod(shape_of(src) or ())
    return [concat_call(ctx, [ctx.spec(src, (1, n))], ctx.spec(src, (1, n), addr), 1)]


@native_rule(tpu.ReshapeOp, tpu.FlattenOp, tpu.SqueezeOp, tpu.UnsqueezeOp)
def reshape(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Reshape.cpp does nothing (in place); a reshape address-assign did not
    place in place is a copy."""
    _same_quant(op)
    return copy(op.operands[0], op.results[0], ctx)


def elem_bytes(value: SSAValue) -> int:
    from tpuc.base.dtypes import STORAGE

    return np.dtype(STORAGE[dtype_name(value)]).itemsize


def concat_call(ctx: NativeContext, ins: list[bytes], out: bytes, axis: int) -> NativeCall:
    """concat_global_spec_t; `is_st_concat_way` points at input_num zeros."""
    p = ConcatGlobal()
    p.common.input_num, p.common.concat_axis = len(ins), axis
    offset = ConcatGlobal.is_st_concat_way.offset
    return NativeCall(
        "backend_api_concat_global",
        p.to_bytes(),
        ins,
        [out],
        pointers=[(offset, bytes(4 * len(ins)))],
    )


def _requants(op: Operation) -> list[tuple[int, int] | None] | None:
    """Per input, (M, r) when tpuc's INT8 concat rescales it (M, r, Z or the
    storage type not the output's), else None; None when none is rescaled."""
    out, n = op.results[0], len(op.operands)
    qout = quant_of(out)
    if qout is None:
        return None
    mult, shift = list(op.value("multiplier") or [1]), list(op.value("rshift") or [0])
    mult, shift = (mult * n if len(mult) == 1 else mult), (shift * n if len(shift) == 1 else shift)
    pairs = [
        None
        if (m, r) == (1, 0)
        and quant_of(v).zero_point == qout.zero_point
        and dtype_code(v) == dtype_code(out)
        else (m, r)
        for v, m, r in zip(op.operands, mult, shift, strict=True)
    ]
    return None if all(p is None for p in pairs) else pairs


@native_rule(tpu.ConcatOp)
def concat(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Concat.cpp: concat_global_spec_t over every input. tpuc's INT8 concat
    may rescale inputs (requant(q − Z_i, M_i, r_i) + Z), which the library's
    concat cannot: with nothing before the axis, each input goes straight
    into its slot (a copy, or a requant_int call); otherwise each rescaled
    input (used by the concat alone) is requantized in place, then all are
    concatenated. (The library's per-channel requant_int did not compute
    tpuc's requant, so no per-channel pass after the concat.)"""
    return concat_calls(op, ctx) + fused_relu(op, ctx)


def fused_relu(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """A concat's fused relu, in place on its output (prelu with slope 0, as
    a Relu op): nothing for an INT8 output whose zero point is its storage
    minimum (u8 with 0, asymmetric i8 with −128), whose saturation already
    clamps there."""
    from tpuc.passes.native.active import ROUND_UP, PReluSpec

    if not op.value("do_relu"):
        return []
    out = op.results[0]
    limit = op.value("relu_limit")
    limit = -1.0 if limit is None else float(limit)
    quant = quant_of(out)
    if quant is not None:
        if quant.zero_point == quant.storage_min and limit < 0:
            return []
        if quant.zero_point:
            raise NotExpressible("an asymmetric INT8 concat with a fused relu")
        if limit >= 0:  # the clamp is on stored values
            limit = float(np.round(limit / quant.scale))
    spec = PReluSpec()
    spec.upper_limit, spec.slope_val, spec.is_channel_shared = limit, 0.0, 1
    spec.round_mode = ROUND_UP
    view = ctx.spec(out)
    return [NativeCall("backend_api_prelu_global", spec.to_bytes(), [view], [view])]


def concat_calls(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    out, shape = op.results[0], shape_of(op.results[0])
    axis = op.value("axis") % len(shape)
    pairs = _requants(op)
    if pairs is None:
        if {dtype_code(v) for v in op.operands} != {dtype_code(out)}:
            raise NotExpressible("a concat of inputs of another storage type than its result")
        if _in_place(op, ctx):
            return []
        return [concat_call(ctx, [ctx.spec(v) for v in op.operands], ctx.spec(out), axis)]
    rescale = _Rescale(ctx, round_mode(op), out, op.value("round_mode") or "")
    if math.prod(shape[:axis]) == 1:
        calls, addr = [], ctx.address(out)
        for v, pair in zip(op.operands, pairs, strict=True):
            calls += copy(v, out, ctx, addr) if pair is None else rescale(v, addr, pair)
            addr += math.prod(shape_of(v)) * elem_bytes(out)
        return calls
    calls = []
    for v, pair in zip(op.operands, pairs, strict=True):
        if pair is not None:
            if isinstance(v.owner, top.WeightOp) or sum(1 for _ in v.uses) != 1:
                raise NotExpressible("a rescaling concat of an input that has other users")
            if dtype_code(v) != dtype_code(out):
                raise NotExpressible("a rescaling concat of another storage type, not on axis 0")
            calls += rescale(v, ctx.address(v), pair)
    return calls + [concat_call(ctx, [ctx.spec(v) for v in op.operands], ctx.spec(out), axis)]


@dataclass
class _Rescale:
    """requant(q − Z_in, M, r) + Z_out of a whole input into `addr` (requant_int_param_t;
    the chip's MulShift where it computes the same)."""

    ctx: NativeContext
    rounding: int
    out: SSAValue
    mode: str  # the op's round_mode (a u8 pair rounded half up is the chip's MulShift)

    def __call__(self, v: SSAValue, addr: int, pair: tuple[int, int]) -> list[NativeCall]:
        addrs, dtypes = (self.ctx.address(v), addr), (dtype_code(v), dtype_code(self.out))
        if mulshift.fits(v, self.out, pair, self.mode):
            return [mulshift.global_call(v, self.out, addrs, nchw(v), pair)]
        zps = (quant_of(v).zero_point, quant_of(self.out).zero_point)
        m, r = pair
        return [RequantInt(addrs, nchw(v), dtypes, [m], [r], zps, self.rounding).call()]


def _in_place(op: Operation, ctx: NativeContext) -> bool:
    """Inputs address-assign laid out back to back in the output (only_merge)."""
    shape = shape_of(op.results[0])
    axis = op.value("axis") % len(shape)
    if math.prod(shape[:axis]) != 1:
        return False
    addr = ctx.address(op.results[0])
    for v in op.operands:
        if isinstance(v.owner, top.WeightOp) or ctx.address(v) != addr:
            return False
        addr += math.prod(shape_of(v)) * elem_bytes(v)
    return True


# --- slices, pads, resizes ---------------------------------------------------------------

StrideSlice = declare(
    "strideslice_common_spec_t",
    "i32 begin_mask; i32 end_mask; i32 begin_index[8]; i32 end_index[8]; i32 strides[8]",
)
PadParam = declare(
    "pad_param_t",
    "i32 pad[4][2]; i32 type; f32 constant; bool is_dynamic; bool with_insert_zero; "
    "i32 insert_zeros[2]",
)
Upsample = declare("upsample_spec_t", "i32 size; i32 if_relu")
declare(
    "depth2space_common_spec_t",
    "i32 block_sizes[2]; i32 in_is_nchw; i32 out_is_nchw; i32 is_inversed; i32 is_crd_mode; "
    "i32 swap_cr",
)
Depth2Space = declare("depth2space_global_spec_t", "depth2space_common_spec_t common")
PAD_MODES = {"constant": 0, "reflect": 1, "symmetric": 2, "edge": 3}


def merge_slice(shape, begins, steps, counts):
    """Unit dims dropped and a whole dim merged into the dim before it when
    that one has step 1; left-padded to 4 dims (at least)."""
    dims = [[n, b, s, c] for n, b, s, c in zip(shape, begins, steps, counts, strict=True) if n != 1]
    merged: list[list[int]] = []
    for n, b, s, c in dims:
        whole = b == 0 and s == 1 and c == n
        if merged and whole and merged[-1][2] == 1:
            last = merged[-1]
            last[:] = [last[0] * n, last[1] * n, 1, last[3] * n]
        else:
            merged.append([n, b, s, c])
    merged = [[1, 0, 1, 1]] * max(0, 4 - len(merged)) + merged
    return [list(col) for col in zip(*merged, strict=True)]


def strided_slice(ctx: NativeContext, src: SSAValue, dst: SSAValue, begins, steps) -> NativeCall:
    """Slice.cpp: strideslice_common_spec_t over the merged 4-D (or more) view."""
    counts = shape_of(dst)
    shape, begins, steps, counts = merge_slice(shape_of(src), begins, steps, counts)
    if len(shape) > 8:
        raise NotExpressible("a slice of more than 8 merged dims")
    p = StrideSlice()
    for i, (b, s, c) in enumerate(zip(begins, steps, counts, strict=True)):
        p.begin_index[i], p.end_index[i], p.strides[i] = b, b + c * s, s
    ins, outs = [ctx.spec(src, tuple(shape))], [ctx.spec(dst, tuple(counts))]
    return NativeCall("backend_api_strideslice_global", p.to_bytes(), ins, outs)


@native_rule(tpu.SliceOp)
def slice_op(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """ONNX bounds normalised (tpuc.kernels.data.slice_bounds); negative steps refused."""
    from tpuc.kernels.data import slice_bounds

    _same_quant(op)
    shape, rank = shape_of(op.operands[0]), len(shape_of(op.operands[0]))
    offset = op.value("offset") or [0] * rank
    steps = op.value("steps") or [1] * rank
    ends = op.value("ends") or [None] * rank
    bounds = [
        slice_bounds(offset[i], ends[i], steps[i], shape[i]).indices(shape[i]) for i in range(rank)
    ]
    if any(step < 0 for _, _, step in bounds):
        raise NotExpressible("a slice with a negative step")
    if math.prod(shape_of(op.results[0])) == 0:
        return []
    begins = [b for b, _, _ in bounds]
    return [strided_slice(ctx, op.operands[0], op.results[0], begins, [s for _, _, s in bounds])]


@native_rule(tpu.SplitOp)
def split(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """One strided slice per piece (TPU-MLIR lowers Split to Slices)."""
    _same_quant(op)
    src = op.operands[0]
    rank = len(shape_of(src))
    axis = op.value("axis") % rank
    calls, start = [], 0
    for out in op.results:
        begins = [0] * rank
        begins[axis] = start
        calls.append(strided_slice(ctx, src, out, begins, [1] * rank))
        start += shape_of(out)[axis]
    return calls


def pad_reset(shape, paddings) -> tuple[list[int], list[list[int]]]:
    """Unpadded neighbours merged, unit dims dropped, left-padded to 4 dims."""
    rank = len(shape)
    dims = [[shape[i], paddings[i], paddings[i + rank]] for i in range(rank)]
    merged: list[list[int]] = []
    for n, b, e in dims:
        if n == 1 and b == 0 and e == 0:
            continue
        if merged and b == 0 and e == 0 and merged[-1][1:] == [0, 0]:
            merged[-1][0] *= n
        else:
            merged.append([n, b, e])
    merged = [[1, 0, 0]] * max(0, 4 - len(merged)) + merged
    if len(merged) > 4:
        raise NotExpressible(f"a pad over {len(merged)} merged dims (at most 4)")
    return [m[0] for m in merged], [m[1:] for m in merged]


@native_rule(tpu.PadOp)
def pad(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Pad.cpp: pad_reset to 4-D, pad_param_t {pad[4][2], type, constant}."""
    _same_quant(op)
    shape = shape_of(op.operands[0])
    paddings = list(op.value("paddings") or [0] * (2 * len(shape)))
    if min(paddings) < 0:
        raise NotExpressible("a pad with negative paddings (a crop)")
    mode = op.value("mode") or "constant"
    if mode not in PAD_MODES:
        raise NotExpressible(f"pad mode {mode}")
    shape4, pads4 = pad_reset(shape, paddings)
    p = PadParam()
    for i, (b, e) in enumerate(pads4):
        p.pad[i][0], p.pad[i][1] = b, e
    p.type, p.constant = PAD_MODES[mode], float(op.value("val") or 0.0)
    out4 = tuple(n + b + e for n, (b, e) in zip(shape4, pads4, strict=True))
    ins, outs = [ctx.spec(op.operands[0], tuple(shape4))], [ctx.spec(op.results[0], out4)]
    return [NativeCall("backend_api_pad_global", p.to_bytes(), ins, outs)]


@native_rule(tpu.UpsampleOp)
def upsample(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Upsample.cpp: upsample_spec_t {size = scale_h = scale_w, if_relu}."""
    _same_quant(op)
    scale_h, scale_w = op.value("scale_h") or 1, op.value("scale_w") or 1
    if scale_h != scale_w:
        raise NotExpressible(f"an upsample by {scale_h}x{scale_w} (the library needs equal scales)")
    if len(shape_of(op.operands[0])) != 4:
        raise NotExpressible("an upsample of a tensor that is not 4-D")
    p = Upsample()
    p.size, p.if_relu = scale_h, bool(op.value("do_relu"))
    return [ctx.call("backend_api_upsample_global", p, op)]


@native_rule(tpu.Depth2SpaceOp)
def depth2space(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Depth2Space.cpp: depth2space_global_spec_t, specs as 4-D NCHW."""
    _same_quant(op)
    if len(shape_of(op.operands[0])) != 4:
        raise NotExpressible("a depth-to-space of a tensor that is not 4-D")
    p = Depth2Space()
    c = p.common
    c.block_sizes[0], c.block_sizes[1] = op.value("block_h") or 1, op.value("block_w") or 1
    c.in_is_nchw = c.out_is_nchw = 1
    c.is_inversed = bool(op.value("is_inversed"))
    c.is_crd_mode = bool(op.value("is_CRD"))
    return [ctx.call("backend_api_depth2space_global", p, op)]


@native_rule(tpu.TileOp, tpu.ExpandOp)
def tile(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """The input viewed at the output's rank (leading 1s, as Tile.cpp); a
    repeat along one axis: a concat of the input with itself; along more:
    backend_api_tile_global (tile_global_spec_t, a scratch buffer)."""
    from tpuc.passes.native.select import tile_call

    _same_quant(op)
    src, dst = op.operands[0], op.results[0]
    ins, outs = tuple(shape_of(src)), tuple(shape_of(dst))
    if len(ins) > len(outs):
        raise NotExpressible("a tile or expand that drops dims")
    ins = (1,) * (len(outs) - len(ins)) + ins
    axes = [i for i, (a, b) in enumerate(zip(ins, outs, strict=True)) if a != b]
    if not axes:
        return copy(src, dst, ctx)
    if any(outs[i] % ins[i] for i in axes):
        raise NotExpressible(f"a tile or expand of {list(ins)} into {list(outs)}")
    if len(axes) > 1:
        where = (ctx.address(src), dtype_code(src))
        return [tile_call(ctx, op, where, (ins, outs), ctx.address(dst), elem_bytes(dst), 0)]
    reps = outs[axes[0]] // ins[axes[0]]
    spec = ctx.spec(src, ins)
    return [concat_call(ctx, [spec] * reps, ctx.spec(dst), axes[0])]
