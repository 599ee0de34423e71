"""The local rule of an INT8 fc whose float epilogue its softmax does
(passes/native/softmax.py `deferred_epilogue`): the fc joins that softmax's
layer group and leaves its int32 sums (products plus the int32 bias) in
local memory, so they never go to DDR and back.

After TPU-MLIR's MatMul.cpp `codegen_local_bm1684x`:
`backend_api_batch_matmul_local` (`batch_matmul_local_spec_t`) on the left
[1, M, K] (M over the lanes, K along H), the right [1, K, N] (K over the
lanes, N along H, its planes EU-aligned as TPU-MLIR loads it) and the bias
[1, 1, N] (every lane holding it), requant_mode −1 and an int32 result;
getBufferSize_bm1684x gives no scratch for an int32 result without an
input zero point. ppocr_rec's classifier, [1, 40, 120] x [120, 6625]: the
int32 sums' store and reload cost 25.9k + 19.6k vendor cycles.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.weights import read_weight
from tpuc.passes.native.context import NativeContext, NotExpressible, dtype_name
from tpuc.passes.native.conv import coeff_table
from tpuc.passes.native.local.ops import (
    Coeff,
    LocalRule,
    dtype_code_of,
    local_command,
    local_rule,
    no_buffer,
    spec,
)
from tpuc.passes.native.local.plan import EU_BYTES, NPU_NUM, GroupPlan, Slice
from tpuc.passes.native.local.wide import plain_info
from tpuc.passes.native.matmul import BatchMatmulGlobal  # noqa: F401  (declares the common struct)
from tpuc.target.vendor.params import declare

BatchMatmulLocal = declare(
    "batch_matmul_local_spec_t", "batch_matmul_common_spec_t common; u32 buffer_addr"
)


def _dims(op: Operation) -> tuple[int, int, int]:
    """(M, K, N) of the deferred fc, else NotExpressible."""
    from tpuc.passes.native.matmul import deferred, fc_dims

    if not isinstance(op, tpu.MatMulOp) or not deferred(op):
        raise NotExpressible("a local MatMul other than an fc in its long-row softmax's group")
    if op.value("right_transpose"):
        raise NotExpressible("a local fc with a transposed weight")
    m, k, n = fc_dims(op)
    return m, k, n


def fc_backward(op: Operation, out: Slice) -> Slice:
    """Every row of the left operand: K whole along H."""
    k = shape_of(op.operands[0])[-1]
    return Slice(out.n_idx, out.n_slice, 0, k)


def lanes_aligned(weight: np.ndarray) -> np.ndarray:
    """[K, N] as the lanes hold it: row r on lane r % 64, plane r // 64,
    each plane EU-aligned; [64, planes · aligned N]."""
    k, n = weight.shape
    planes = -(-k // NPU_NUM)
    eu = EU_BYTES // weight.dtype.itemsize
    plane = -(-n // eu) * eu
    lanes = np.zeros((NPU_NUM, planes, plane), weight.dtype)
    for p in range(planes):
        part = weight[p * NPU_NUM : (p + 1) * NPU_NUM]
        lanes[: len(part), p, :n] = part
    return lanes.reshape(NPU_NUM, planes * plane)


def _types(op: Operation) -> tuple[str, str, str]:
    """(operand, bias, result) dtypes: INT8 sums i8, i32, i32; a half fc its
    type throughout (the bias rounded to it, as the global half form)."""
    dtype = dtype_name(op.operands[0])
    return (dtype, dtype, dtype) if dtype in ("f16", "bf16") else ("i8", "i32", "i32")


def fc_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """The weight (lanes_aligned) and the bias, every lane's copy."""
    from tpuc.base.dtypes import to_storage
    from tpuc.passes.native.matmul import rounded_bias

    _, k, n = _dims(op)
    name = op.names[0]
    operand, bias_type, _ = _types(op)
    weight = np.asarray(read_weight(op.operands[1].owner))
    if operand != "i8" and weight.dtype not in (np.float16, np.uint16):
        weight = to_storage(weight, operand)  # else already the stored bits (a bf16 weight)
    lanes = lanes_aligned(weight.reshape(k, n))
    w_addr = ctx.coeffs.add(f"{name}_weight_lanes", lanes)
    if bias_type == "i32":
        b_addr = ctx.coeffs.add(f"{name}_bias_i32", coeff_table(op, n)[:, 0].astype(np.int32))
    else:
        b_addr = rounded_bias(op, ctx, bias_type)
    return [
        Coeff(w_addr, (1, k, n, 1), operand, moved=(1, NPU_NUM, 1, lanes.shape[1])),
        Coeff(b_addr, (1, NPU_NUM, 1, n), bias_type, lanes_copy=True),
    ]


def fc_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    m, k, n = _dims(op)
    operand, bias_type, result = _types(op)
    param = BatchMatmulLocal()
    c = param.common
    c.Y_dtype = dtype_code_of(result)
    c.R_zp_is_const = True
    c.has_bias = True
    c.upper_limit = -1.0
    c.requant_mode = -1
    left, out = plan.tensors[op.operands[0]], plan.tensors[op.results[0]]
    s = out.slice_at(step)
    info = plain_info(out, step)
    info.h_slice = k
    inputs = [  # 3-D, as the ops' own shapes (the kernel reads batch, M, K from them)
        spec(None, operand, (s.n_slice, m, k), left.addr_at(step)),
        spec(None, operand, (1, k, n), plan.tensors[(op, 0)].addrs[0]),
        spec(None, bias_type, (1, 1, n), plan.tensors[(op, 1)].addrs[0]),
    ]
    outputs = [spec(None, result, (s.n_slice, m, n), out.addr_at(step))]
    return [local_command(op, "backend_api_batch_matmul_local", param, info, inputs, outputs)]


local_rule(
    tpu.MatMulOp,
    rule=LocalRule(fc_backward, fc_coeffs, no_buffer, fc_command, lambda op: False),
)

__all__ = ["BatchMatmulLocal", "lanes_aligned"]
