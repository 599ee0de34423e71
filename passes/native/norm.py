"""Normalisations, after TPU-MLIR's `Interfaces/BM1684X/{LRN,Scale,LayerNorm}.cpp`.

LRN is the old-style `backend_api_lrn_global(lrn_global_param_t*, sizeof)`
with the addresses in the struct and the tensor as getNCHW's n, c, h, w.
The library runs it in F32 and BF16 only (F16 fails an assertion; TPU-MLIR
lowers a F16 LRN to F32), and its kernel asserts that one channel's plane
(h·w, aligned to the execution unit) holds at least ALIGN(32) + ALIGN(192)
elements: h·w >= 209 in F32, >= 193 in BF16.

Scale (tpuc's float BatchNorm/Scale: x·scale[c] + bias[c]) and LayerNorm
are spec-style calls; a missing bias is a zero coefficient (TPU-MLIR's
Scale always has one).
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.weights import read_weight
from tpuc.passes.native.cast import nchw
from tpuc.passes.native.context import (
    DTYPE_F32,
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
    is_float,
)
from tpuc.passes.native.conv import raw_spec, to_float_storage
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import declare

EU_BYTES = 64  # BM1684X: one execution unit per lane
LANES = 64  # BM1684X: NPU lanes; the LRN kernel is cheapest on at most one plane a lane
LRN_TYPES = {"f32": 4, "bf16": 2}
LrnGlobal = declare(
    "lrn_global_param_t",
    "u64 input_addr; u64 output_addr; i32 input_n; i32 input_c; i32 input_h; i32 input_w; "
    "i32 size; f32 alpha; f32 beta; f32 k; i32 dtype",
)


declare("layer_norm_common_spec_t", "i32 axis; f32 eps; i32 affine; i32 need_mean; i32 need_rstd")
LayerNormGlobal = declare("layer_norm_global_spec_t", "layer_norm_common_spec_t common")
ScaleGlobal = declare(
    "scale_global_spec_t",
    "i32 axis; i32 axis_num; i32 has_bias; i32 if_relu; f32 relu_upper_limit; i32 scale_sign; "
    "i32 bias_sign; i32 merge_weight_bias; i32 round_mode; i32 version",
)
ROUND_UP = 1


def _align(x: int, step: int) -> int:
    return -(-x // step) * step


@native_rule(tpu.LRNOp)
def lrn(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """lrn_global_param_t {addresses, n, c, h, w, size, alpha, beta, k = bias, dtype}."""
    src, dst = op.operands[0], op.results[0]
    dtype = dtype_name(src)
    if dtype not in LRN_TYPES or dtype_name(dst) != dtype:
        raise NotExpressible(f"an LRN in {dtype} (the library has F32 and BF16 LRN)")
    p = LrnGlobal()
    p.input_addr, p.output_addr = ctx.address(src), ctx.address(dst)
    p.input_n, p.input_c, p.input_h, p.input_w = nchw(src)
    eu = EU_BYTES // LRN_TYPES[dtype]
    if _align(p.input_h * p.input_w, eu) < _align(32, eu) + _align(192, eu):
        raise NotExpressible(
            f"an LRN over {p.input_h}x{p.input_w} planes (the library's kernel needs "
            f"h*w > {_align(32, eu) + _align(192, eu) - eu} in {dtype})"
        )
    p.size = op.value("size")
    p.alpha, p.beta, p.k = op.value("alpha"), op.value("beta"), op.value("bias")
    p.dtype = dtype_code(src)
    if p.input_c <= LANES:
        return [NativeCall("backend_api_lrn_global", p.to_bytes(), plain=True)]
    return lrn_in_chunks(p, src, ctx, LRN_TYPES[dtype])


def lrn_chunks(channels: int, size: int, lanes: int = LANES) -> list[tuple[int, int, int, int]]:
    """(first, end) of each call's input channels, at most `lanes` of them,
    and (a, b): the outputs it computes with the whole window, the ones it
    keeps. Calls cover the channels in order; each but the first reads the
    window's `(size − 1) // 2` channels before `a`, each but the last its
    `size // 2` after `b`."""
    before, after = (size - 1) // 2, size // 2
    if channels <= lanes or before + after >= lanes:
        return [(0, channels, 0, channels)]
    chunks, a = [], 0
    while a < channels:
        first = max(a - before, 0)
        end = min(first + lanes, channels)
        b = end if end == channels else end - after
        chunks.append((first, end, a, b))
        a = b
    return chunks


def lrn_in_chunks(p, src, ctx: NativeContext, elem: int) -> list[NativeCall]:
    """The LRN as calls of at most 64 channels (one plane a lane) per image:
    the kernel's cycles grow with the square of its planes per lane
    (192×55×55 f32: 578k cycles at once, 3 × 96k + 29k in chunks). Each
    chunk writes its whole input range, so the `before` outputs under its
    window's lower halo, which the previous chunk kept, are saved to scratch
    before it runs and copied back after; the wrong ones past its `b` the next
    chunk overwrites."""
    from tpuc.passes.native.data import concat_call

    n, c, h, w = p.input_n, p.input_c, p.input_h, p.input_w
    plane = h * w * elem
    src_addr, dst_addr = p.input_addr, p.output_addr
    before = (p.size - 1) // 2
    saved = ctx.scratch(before * plane) if before else 0

    def move(frm: int, to: int) -> NativeCall:
        rows, code = (1, before * h * w), p.dtype
        return concat_call(ctx, [raw_spec(frm, code, rows)], raw_spec(to, code, rows), 1)

    calls = []
    for image in range(n):
        for first, end, a, _ in lrn_chunks(c, p.size):
            p.input_n, p.input_c = 1, end - first
            p.input_addr = src_addr + (image * c + first) * plane
            p.output_addr = kept = dst_addr + (image * c + first) * plane
            if a > first:
                calls.append(move(kept, saved))
            calls.append(NativeCall("backend_api_lrn_global", p.to_bytes(), plain=True))
            if a > first:
                calls.append(move(saved, kept))
    return calls


@native_rule(tpu.ScaleOp)
def scale(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """scale_global_spec_t {axis 1, axis_num 1, has_bias, if_relu, relu_upper_limit,
    round_mode ROUND_UP}; inputs [x, scale, bias] as [1, C, 1, 1], the bias in
    the input's type (TPU-MLIR's float lowering rounds every weight to it)."""
    src, weight, bias = op.operands
    if not is_float(src) or not is_float(op.results[0]):
        raise NotExpressible("a quantized Scale (tpuc makes INT8 Scale a convolution)")
    shape = shape_of(src)
    if len(shape) < 2:
        raise NotExpressible(f"a Scale of a {len(shape)}-D tensor")
    channels = shape[1]
    p = ScaleGlobal()
    p.axis, p.axis_num, p.has_bias = 1, 1, 1
    p.if_relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit")
    p.relu_upper_limit = -1.0 if limit is None else float(limit)
    p.round_mode = ROUND_UP
    rows, dtype = (1, channels, 1, 1), dtype_name(src)
    inputs = [ctx.spec(src), ctx.spec(weight, rows)]
    values = np.zeros(channels, np.float32)
    if not isinstance(bias.owner, top.NoneOp):
        if not isinstance(bias.owner, top.WeightOp):
            raise NotExpressible("a Scale whose bias is not a weight")
        values = np.asarray(read_weight(bias.owner), np.float32).reshape(channels)
    stored = values if dtype == "f32" else to_float_storage(values, dtype)
    addr = ctx.coeffs.add(f"{op.names[0]}_bias_{dtype}", stored)
    inputs.append(raw_spec(addr, dtype_code(src), rows))
    return [ctx.call("backend_api_scale_global", p, op, inputs=inputs)]


@native_rule(tpu.LayerNormOp)
def layer_norm(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """layer_norm_global_spec_t {axis, eps, affine = weight | bias << 1, no
    mean/rstd}; inputs [x, weight?, bias?] as they are (float only)."""
    src = op.operands[0]
    if not is_float(src) or not is_float(op.results[0]):
        raise NotExpressible("a quantized LayerNorm")
    present = [not isinstance(v.owner, top.NoneOp) for v in op.operands[1:3]]
    p = LayerNormGlobal()
    axis = op.value("axis")
    p.common.axis = axis if axis >= 0 else axis + len(shape_of(src))
    p.common.eps = op.value("eps")
    p.common.affine = int(present[0]) + (int(present[1]) << 1)
    if dtype_name(src) == "f32":
        return [ctx.call("backend_api_layer_norm_global", p, op)]
    return half_layer_norm(op, ctx, p, present)


def half_layer_norm(op: Operation, ctx: NativeContext, p, present) -> list[NativeCall]:
    """An f16/bf16 LayerNorm in f32 between casts, weight and bias as f32:
    tpuc computes it in f32 and rounds once; the chip's half-float LayerNorm
    drifts (ppocr_rec BF16)."""
    from tpuc.passes.native.conv import as_f32
    from tpuc.passes.native.f32 import between_casts

    affine = []
    for value, there in zip(op.operands[1:3], present, strict=True):
        if there:
            values = as_f32(value, dtype_name(value))
            addr = ctx.coeffs.add(f"{value.owner.names[0]}_f32", values)
            affine.append(raw_spec(addr, DTYPE_F32, tuple(shape_of(value))))
    return between_casts(op, ctx, lambda wide_in, wide_out: [
        ctx.call("backend_api_layer_norm_global", p, op, [wide_in, *affine], [wide_out])
    ])  # fmt: skip
