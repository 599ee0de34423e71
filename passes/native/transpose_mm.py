"""A small 8-bit 2-D transpose as a matmul by the identity.

`backend_api_transpose_global` swaps the last two dims of a small int8
matrix by storing it one byte per GDMA element: ppocr_rec's transpose_43
and transpose_51 ([120, 40] -> [40, 120], 4,800 bytes) cost 30.5k vendor
cycles each at 0.15 bytes a cycle, in TPU-MLIR 1.30.2 as in tpuc. The
matmul unit transposes its right operand on the way in: with
`batch_matmul_global_spec_t.R_trans` and the identity on the left,
Y = I_w · Xᵀ is Xᵀ for X [h, w]; the int32 sums are the int8 values
themselves, and MultiplierShift by 1 >> 0 (offset 0) gives them back
unchanged, so the result is bit for bit the transpose. (`fc_global` with
R_transpose and an activation on the right scrambles rows past the first
40; L_trans asserts in the kernel.)

Measured (vendor cycles of a net with the transpose between two ReLUs):
[120, 40] 33,470 -> 5,352; [40, 120] 26,413 -> 5,410; [256, 256]
97,641 -> 23,507; [1000, 64] 39,477 -> 25,791; [49, 512] 23,463 ->
17,344; [64, 1000] 35,028 -> 48,069 (the 1 MB identity costs more than
the vendor's own transpose of wide rows): taken while the identity,
w x w bytes, stays within MAX_IDENTITY.

Only 8-bit data without a zero point: a zero point would need the offset
in the requant, and float data is not exact under a matmul (0 x inf, the
sign of -0).
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.passes.native.context import (
    NativeCall,
    NativeContext,
    dtype_code,
    dtype_name,
    quant_of,
)

MAX_IDENTITY = 256 * 256
"""Largest identity (w x w bytes) worth loading: [256, 256] pays off 4x, [64, 1000]'s 1 MB loses."""

MULTIPLIER_SHIFT = 2  # RequantMode::MultiplierShift


def transposable(op: Operation, shape: list[int], order: list[int]) -> bool:
    """An 8-bit [1, 1, h, w] -> [1, 1, w, h] swap without a zero point, its
    identity within MAX_IDENTITY."""
    if order != [0, 1, 3, 2] or shape[0] != 1 or shape[1] != 1:
        return False
    if dtype_name(op.operands[0]) not in ("i8", "u8"):
        return False
    q = quant_of(op.operands[0])
    if q is not None and q.zero_point != 0:
        return False
    return shape[3] * shape[3] <= MAX_IDENTITY


def identity_transpose(op: Operation, ctx: NativeContext, h: int, w: int) -> list[NativeCall]:
    """`backend_api_batch_matmul_global`: I_w [1, w, w] by X [1, h, w] with
    R_trans, requantized by 1 >> 0, into the result [1, w, h]."""
    from tpuc.passes.native.conv import raw_spec
    from tpuc.passes.native.matmul import BatchMatmulGlobal

    spec = BatchMatmulGlobal()
    c = spec.common
    c.Y_dtype = dtype_code(op.results[0])
    c.R_trans = 1
    c.upper_limit = -1.0
    c.R_zp_is_const = True
    c.requant_mode = MULTIPLIER_SHIFT
    c.mul_val, c.shift_val, c.offset_val = 1, 0, 0
    code = dtype_code(op.operands[0])
    eye = ctx.coeffs.add(f"{op.names[0]}_identity", np.eye(w, dtype=np.int8))
    inputs = [raw_spec(eye, code, (1, w, w)), ctx.spec(op.operands[0], (1, h, w))]
    outputs = [ctx.spec(op.results[0], (1, w, h))]
    return [ctx.call("backend_api_batch_matmul_global", spec, op, inputs, outputs)]


__all__ = ["MAX_IDENTITY", "identity_transpose", "transposable"]
