"""Normalisations: LRN, after TPU-MLIR's `Interfaces/BM1684X/LRN.cpp` (the
old-style `backend_api_lrn_global(lrn_global_param_t*, sizeof)`, float only,
the tensor as getNCHW's n, c, h, w)."""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.passes.native.cast import nchw
from tpuc.passes.native.context import (
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    is_float,
)
from tpuc.passes.native.rules import native_rule
from tpuc.vendor.params import declare

ENABLED = False  # backend_api_lrn_global aborted the worker (f32, 1x4x6x8, size 3)
LrnGlobal = declare(
    "lrn_global_param_t",
    "u64 input_addr; u64 output_addr; i32 input_n; i32 input_c; i32 input_h; i32 input_w; "
    "i32 size; f32 alpha; f32 beta; f32 k; i32 dtype",
)


@native_rule(tpu.LRNOp)
def lrn(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """lrn_global_param_t {addresses, n, c, h, w, size, alpha, beta, k = bias, dtype}."""
    src, dst = op.operands[0], op.results[0]
    if not (is_float(src) and is_float(dst)) or dtype_code(src) != dtype_code(dst):
        raise NotExpressible("an LRN that is not float in and out of one type")
    p = LrnGlobal()
    p.input_addr, p.output_addr = ctx.address(src), ctx.address(dst)
    p.input_n, p.input_c, p.input_h, p.input_w = nchw(src)
    p.size = op.value("size")
    p.alpha, p.beta, p.k = op.value("alpha"), op.value("beta"), op.value("bias")
    p.dtype = dtype_code(src)
    if not ENABLED:
        raise NotExpressible(
            "LRN (the vendor library's lrn_global crashes on this call; unresolved)"
        )
    return [NativeCall("backend_api_lrn_global", p.to_bytes(), plain=True)]
