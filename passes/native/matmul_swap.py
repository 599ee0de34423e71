"""A batched matmul with short result rows, computed transposed.

`backend_api_batch_matmul_global` moves its operands and result in rows of
the last dim: ppocr_rec's attention-weighted values, [8, 40, 40] x [8, 40,
15] -> [8, 40, 15] (p2o.MatMul.5/17), load and store 15-byte rows and
cost 8,595 vendor cycles. Yᵀ = Rᵀ · Lᵀ is the same product with rows of
40: Rᵀ by one GDMA C/W transpose ([B, K, N] -> [B, N, K], or R itself when
the op already reads it transposed), L as the right operand with R_trans
(its [B, M, K] is the [B, N', K] R_trans wants), Yᵀ [B, N, M] into a
scratch buffer, and one C/W transpose back to [B, M, N]: 75 + 4,280 + 75.
Integer sums do not depend on the operands' roles, and the per-tensor
requant is elementwise, so the result is bit for bit the product's. The
half-float product is bit for bit too (measured: F16 and BF16 [8, 40, 40]
x [8, 40, 15] after a Softmax, 17,160 -> 14,626 whole-net cycles; the
kernel sums each output over K alike in both roles).

Taken for 8- and 16-bit results without a bias (a bias runs along N,
which the kernel would then see as rows) whose rows are shorter than the
columns and than half an execution unit (SHORT_ROW_BYTES).
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.passes.native.context import NativeCall, NativeContext, dtype_code, dtype_name
from tpuc.passes.native.conv import raw_spec
from tpuc.passes.native.gdma_permute import GDMA_FORMATS, MAX_DIM, cw_call

SHORT_ROW_BYTES = 32


ROW_TYPES = {"i8": 1, "u8": 1, "f16": 2, "bf16": 2}


def swappable(op: Operation, b: int, m: int, k: int, n: int, has_bias: bool) -> bool:
    """An 8- or 16-bit result of short rows (n < m, under SHORT_ROW_BYTES),
    no bias, every transpose within the GDMA command's fields."""
    size = ROW_TYPES.get(dtype_name(op.results[0]))
    if has_bias or size is None:
        return False
    if any(dtype_name(v) not in GDMA_FORMATS for v in op.operands[:2]):
        return False
    return n < m and n * size < SHORT_ROW_BYTES and max(b, m, k, n) <= MAX_DIM


def transposed_product(op: Operation, ctx: NativeContext, spec, dims) -> list[NativeCall]:
    """Rᵀ (C/W transpose unless the op reads R transposed), Yᵀ = Rᵀ · Lᵀ by
    the batched matmul with R_trans, Y by a C/W transpose of Yᵀ."""
    b, m, k, n = dims
    left, right = op.operands[0], op.operands[1]
    calls = []
    right_t = ctx.address(right)
    if not spec.common.R_trans:  # [B, K, N] -> [B, N, K]
        right_t = ctx.scratch(b * n * k, 0)
        calls.append(cw_call(ctx.address(right), right_t, (b, k, 1, n), dtype_name(right)))
    spec.common.R_trans = 1
    product = ctx.scratch(b * n * m, 1)
    out_code = dtype_code(op.results[0])
    inputs = [raw_spec(right_t, dtype_code(right), (b, n, k)), ctx.spec(left, (b, m, k))]
    outputs = [raw_spec(product, out_code, (b, n, m))]
    calls.append(ctx.call("backend_api_batch_matmul_global", spec, op, inputs, outputs))
    calls.append(cw_call(product, ctx.address(op.results[0]), (b, n, 1, m),
                         dtype_name(op.results[0])))  # fmt: skip
    return calls


__all__ = ["ROW_TYPES", "SHORT_ROW_BYTES", "swappable", "transposed_product"]
