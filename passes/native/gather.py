"""Gather, after TPU-MLIR's `Interfaces/BM1684X/Gather.cpp`:
`backend_api_index_select_global(index_select_global_spec_t*)` over
[input, indices] -> [output].

tpuc keeps a Gather's indices as float-valued integers; the library takes
them as an INT32 tensor, so constant indices become an INT32 coefficient
(negative ones already wrapped, as tpuc's kernel wraps them). Gather moves
values only: an INT8 gather keeps its input's quantized type.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.weights import read_weight
from tpuc.passes.native.context import (
    DTYPE_CODES,
    NativeCall,
    NativeContext,
    NotExpressible,
)
from tpuc.passes.native.conv import raw_spec
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import declare

declare("index_select_common_spec_t", "i32 axis; i32 index_is_coeff; i32 if_neg_index")
IndexSelectGlobal = declare("index_select_global_spec_t", "index_select_common_spec_t common")


@native_rule(tpu.GatherOp)
def gather(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """index_select_global_spec_t {axis, index_is_coeff 0, if_neg_index 1}."""
    src, indices = op.operands[0], op.operands[1]
    dst = op.results[0]
    if src.type.element_type != dst.type.element_type:
        raise NotExpressible("a Gather that changes the element type")
    if not isinstance(indices.owner, top.WeightOp):
        raise NotExpressible("a Gather whose indices are not a weight")
    shape = shape_of(src)
    axis = op.value("axis")
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis < len(shape):
        raise NotExpressible(f"a Gather on axis {op.value('axis')} of a {len(shape)}-D tensor")
    idx = np.rint(np.asarray(read_weight(indices.owner), np.float64)).astype(np.int64)
    dim = shape[axis]
    if idx.size and (idx.min() < -dim or idx.max() >= dim):
        raise NotExpressible(f"a Gather with indices out of [{-dim}, {dim})")
    idx = np.where(idx < 0, idx + dim, idx).astype(np.int32)
    idx_shape = tuple(idx.shape) or (1,)
    addr = ctx.coeffs.add(f"{op.names[0]}_indices_i32", idx.reshape(idx_shape))
    p = IndexSelectGlobal()
    p.common.axis, p.common.index_is_coeff, p.common.if_neg_index = axis, 0, 1
    inputs = [ctx.spec(src), raw_spec(addr, DTYPE_CODES["i32"], idx_shape)]
    out_shape = tuple(shape[:axis]) + idx_shape + tuple(shape[axis + 1 :])
    return [ctx.call("backend_api_index_select_global", p, op, inputs=inputs,
                     outputs=[ctx.spec(dst, out_shape)])]  # fmt: skip
