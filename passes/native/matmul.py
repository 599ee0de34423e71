"""MatMul (TPU-MLIR Interfaces/BM1684X/MatMul.cpp, parseParam of Common/MatMul.cpp).

- A weight right operand without batch ([K, N], or [1, …, K, N]) folds every
  leading dim of the left operand into M and goes through the vendor's fc
  call, `backend_api_fc_global` (`fc_global_spec_t`), as TPU-MLIR's does;
  right as [K, N] (`R_transpose`: really [N, K]):
  - F32: the f32 bias as lowering left it;
  - F16/BF16: without a bias the call as is; with one, where the call's
    MM2 path runs and is the cheaper (`half_conv.fc_half_form`) the bias
    rounded to the half type and a half result, TPU-MLIR's form: the chip
    rounds the product, adds the bias and rounds again, which tpuc's
    kernel computes; otherwise the result in f32 (the kernel then takes
    the f32 bias and adds it to its f32 sums) cast once to the result type;
  - INT8 with one (multiplier, rshift) for all columns: the call's own
    requant (MultiplierShift, the op's round mode), the int32 bias from
    weight-reorder's merged table;
  - INT8 per column (tpuc quantizes a weight per output column) with one
    right shift (INT8 lowering gives a matmul's columns one) and an i8
    result: the call's requant with the columns' multipliers as a fourth
    operand (`fuse_rq`, TPU-MLIR's per-channel MatMul); one row as two
    (`two_rows`: with one the call is wrong) unless `one_row_exact`;
  - INT8 per column otherwise (shifts that differ, a u8 result): the int32
    product and bias, transposed, requant_int per channel, transposed back
    (`per_column_fc`); with M = 1, or a relu the requant's saturation does
    not do, the 1x1 convolution over M images (`fc_as_conv`), which
    requantizes per channel itself;
  - an int32 result (tpuc's float epilogue): the product and bias, then
    epilogue.py's cast and per-column scale.
- Two activations (or a batched right operand):
  `backend_api_batch_matmul_global` (`batch_matmul_global_spec_t`) on
  [B, M, K] x [B, K, N] (or [B, N, K]) -> [B, M, N]; INT8 with one multiplier
  (`requant_mode = 2` MultiplierShift, `shift_val = -rshift`).
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import Operation

from tpuc.base.dtypes import ELEMENT_TYPES, STORAGE, to_storage
from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.weights import read_weight
from tpuc.kernels.half_conv import fc_half_form
from tpuc.passes.native.context import (
    DTYPE_F32,
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
    is_float,
    quant_of,
)
from tpuc.passes.native.conv import (
    DTYPE_I32,
    NPU_NUM,
    coeff_shape,
    coeff_table,
    input_zero_point_bias,
    int8_spec,
    pack_int8,
    raw_spec,
    round_mode,
)
from tpuc.passes.native.epilogue import channel_scales, check_f32, epilogue_calls
from tpuc.passes.native.matmul_swap import swappable, transposed_product
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import ConvGlobal, FcGlobal, declare

declare(
    "batch_matmul_common_spec_t",
    "i32 Y_dtype; i32 L_trans; i32 R_trans; bool R_zp_is_const; i32 R_zp_const_val; "
    "i32 izp_const_val; bool has_bias; bool hdim_is_batch; bool do_relu; f32 upper_limit; "
    "i32 requant_mode; i32 mul_val; i32 shift_val; i32 offset_val; i32 round_mode; "
    "i32 left_reuse; bool fuse_rq",
)
BatchMatmulGlobal = declare("batch_matmul_global_spec_t", "batch_matmul_common_spec_t common")
MULTIPLIER_SHIFT = 2  # RequantMode::MultiplierShift


def has_bias(op: Operation) -> bool:
    return not isinstance(op.operands[2].owner, top.NoneOp)


def relu_limit(op: Operation) -> float:
    limit = op.value("relu_limit")
    return -1.0 if limit is None else float(limit)


def fc_dims(op: Operation) -> tuple[int, int, int] | None:
    """(M, K, N) when the right operand is a weight without batch, else None."""
    left, right = shape_of(op.operands[0]), shape_of(op.operands[1])
    if not isinstance(op.operands[1].owner, top.WeightOp) or math.prod(right[:-2]) != 1:
        return None
    k, n = right[-2:]
    if op.value("right_transpose"):
        k, n = n, k
    return math.prod(left) // k, k, n


@native_rule(tpu.MatMulOp)
def matmul(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    if op.value("left_transpose") or op.value("hdim_is_batch"):
        raise NotExpressible("a transposed left operand (not written for the native target)")
    dims = fc_dims(op)
    floats = is_float(op.operands[0]) and is_float(op.results[0])
    if not floats and quant_of(op.operands[0]) is None:
        raise NotExpressible("a matmul of these types")
    if dims is None:
        return batch_matmul(op, ctx, floats)
    if floats:
        return float_fc(op, ctx, *dims)
    return int8_fc(op, ctx, *dims)


def fc_spec(op: Operation, n: int) -> FcGlobal:
    """The fields of fc_global_spec_t every form shares (MatMul.cpp)."""
    spec = FcGlobal()
    spec.if_relu = bool(op.value("do_relu"))
    spec.relu_limit = relu_limit(op)
    spec.requant_mode = -1
    spec.R_transpose = 0 if n == 1 else bool(op.value("right_transpose"))
    return spec


def permuted_rows(op: Operation, ctx: NativeContext) -> np.ndarray | None:
    """local/lane_store.py's row order for an fc whose pooled input a layer
    group stored lane by lane, else None."""
    from tpuc.passes.native.local.lane_store import permuted_rows as rows

    return rows(op, ctx)


def right_spec(op: Operation, ctx: NativeContext, k: int, n: int) -> bytes:
    transposed = op.value("right_transpose") and n != 1
    rows = permuted_rows(op, ctx)
    if rows is not None:  # its input was stored lane by lane (local/lane_store.py)
        right = op.operands[1]
        values = np.asarray(read_weight(right.owner)).reshape(k, n)[rows]
        stored = np.ascontiguousarray(values).astype(STORAGE[dtype_name(right)])
        addr = ctx.coeffs.add(f"{right.owner.names[0]}_lane_rows", stored)
        return raw_spec(addr, dtype_code(right), (k, n))
    return ctx.spec(op.operands[1], (n, k) if transposed else (k, n))


def float_fc(op: Operation, ctx: NativeContext, m: int, k: int, n: int) -> list[NativeCall]:
    """`backend_api_fc_global` with requant_mode −1. F16/BF16 with a bias:
    the half form where `fc_half_form` says so, the bias rounded to the
    half type and a half result (smallcnn's fc1, 1x2048x128: 13,404 cycles
    against 35,379 for the f32 result and cast); otherwise the result in f32 (the kernel then
    takes lowering's f32 bias and adds it to its f32 sums) cast once to the
    result type, tpuc's arithmetic for that path."""
    if deferred(op):
        return []  # in its softmax's layer group (softmax.half_fc)
    spec = fc_spec(op, n)
    spec.have_bias = has_bias(op)
    inputs = [ctx.spec(op.operands[0], (m, k)), right_spec(op, ctx, k, n)]
    dtype = dtype_name(op.operands[0])
    half_bias = dtype != "f32" and spec.have_bias and fc_half_form(m, k, n)
    if half_bias:
        inputs.append(raw_spec(rounded_bias(op, ctx, dtype), dtype_code(op.results[0]), (1, n)))
    elif spec.have_bias:
        inputs.append(ctx.spec(op.operands[2], (1, n)))
    if dtype == "f32" or not spec.have_bias or half_bias:
        return [ctx.call("backend_api_fc_global", spec, op, inputs=inputs,
                         outputs=[ctx.spec(op.results[0], (m, n))])]  # fmt: skip
    from tpuc.passes.native.f32 import cast_call

    wide = raw_spec(ctx.scratch(4 * m * n), DTYPE_F32, (m, n))
    code = dtype_code(op.results[0])
    return [
        ctx.call("backend_api_fc_global", spec, op, inputs=inputs, outputs=[wide]),
        cast_call(ctx, op, wide, ctx.spec(op.results[0], (m, n)), (DTYPE_F32, code)),
    ]


def rounded_bias(op: Operation, ctx: NativeContext, dtype: str) -> int:
    """The address of lowering's f32 bias rounded to the half type `dtype`."""
    bias = np.asarray(read_weight(op.operands[2].owner), np.float32).reshape(-1)
    rounded = ELEMENT_TYPES[dtype].rounding(bias)
    return ctx.coeffs.add(f"{op.names[0]}_bias_{dtype}", to_storage(rounded, dtype))


def int8_fc(op: Operation, ctx: NativeContext, m: int, k: int, n: int) -> list[NativeCall]:
    """INT8 `backend_api_fc_global`: the int32 bias from weight-reorder's
    merged table; one (multiplier, rshift) for every column requantizes in
    the call (MultiplierShift, the op's round mode), and so do per-column
    multipliers over one shift (`fuse_rq`); other per-column requants take
    `per_column_fc` or `fc_as_conv`; an int32 result (the float epilogue)
    takes the product and bias from the call and scales per column in
    epilogue.py."""
    if deferred(op):
        return []  # in its softmax's layer group (softmax.deferred_epilogue)
    table = coeff_table(op, n)
    int32 = is_float(op.results[0])
    per_tensor = bool(np.all(table[:, 1:] == table[0, 1:]))
    per_column = not int32 and not per_tensor
    out_q = quant_of(op.results[0])
    clamps = dtype_name(op.results[0]) == "u8" and out_q is not None and out_q.zero_point == 0
    # the call requantizes per column itself: a symmetric i8 result (with
    # fuse_rq a u8 one fails the kernel's dtype check, and zero points
    # differ from the TPU interpreter); one row runs as two (two_rows)
    fused = per_column and dtype_name(op.results[0]) == "i8" and symmetric(op)
    common = common_shift(table) if fused else None
    if common is not None:
        per_column = False
        multipliers = ctx.coeffs.add(f"{op.names[0]}_multi_i32", common[0])
        table = np.stack([table[:, 0], np.full(n, common[0][0]), np.full(n, common[1])], axis=1)
    if per_column and (m == 1 or op.value("do_relu") and (not clamps or relu_limit(op) >= 0)):
        # M = 1: the requant's per-channel moves cost more than the convolution;
        # a relu its saturation does not do
        return fc_as_conv(op, ctx, m, k, n)
    if int32:
        check_f32(op)
    spec = fc_spec(op, n)
    in_q = quant_of(op.operands[0])
    spec.is_asymmetric, spec.rzp_is_const = 1, 1
    right_q = quant_of(op.operands[1])
    spec.rzp_const_val = right_q.zero_point if right_q is not None else 0
    spec.izp_const_val = in_q.zero_point
    spec.have_bias = bool(np.any(table[:, 0] != 0))
    inputs = [ctx.spec(op.operands[0], (m, k)), right_spec(op, ctx, k, n)]
    if spec.have_bias:
        bias = ctx.coeffs.add(f"{op.names[0]}_bias_i32", table[:, 0].astype(np.int32))
        inputs.append(raw_spec(bias, DTYPE_I32, (1, n)))
    if int32:
        return int32_fc(op, ctx, spec, inputs, table, (m, k, n))
    if per_column:
        return per_column_fc(op, ctx, spec, inputs, table, (m, n))
    if common is not None:
        inputs.append(raw_spec(multipliers, DTYPE_I32, (1, n)))
        spec.fuse_rq = 1
    out_q = quant_of(op.results[0])
    spec.requant_mode = MULTIPLIER_SHIFT
    spec.mul_val, spec.shift_val = int(table[0, 1]), -int(table[0, 2])
    spec.offset_val = out_q.zero_point
    spec.round_mode = round_mode(op)
    if dtype_name(op.results[0]) == "u8":
        spec.if_relu = 1
    if common is not None and m == 1 and not one_row_exact(k, n):
        return two_rows(op, ctx, spec, inputs, k, n)
    return [ctx.call("backend_api_fc_global", spec, op, inputs=inputs,
                     outputs=[ctx.spec(op.results[0], (m, n))])]  # fmt: skip


NARROW_N = 4
"""At most these columns take the transposed weight (`narrow_right`)."""


def int32_fc(op: Operation, ctx: NativeContext, spec, inputs: list, table: np.ndarray,
             mkn: tuple[int, int, int]) -> list[NativeCall]:  # fmt: skip
    """The fc's int32 product and bias, then its per-column float scale
    (epilogue.py); a narrow weight is loaded transposed (`narrow_right`)."""
    m, k, n = mkn
    spec.if_relu, spec.relu_limit = 0, -1.0
    if narrow_right(op, m, k, n):
        inputs[1] = transposed_right(op, ctx, k, n)
        spec.R_transpose = 1
    out = raw_spec(ctx.address(op.results[0]), DTYPE_I32, (m, n))
    fc = ctx.call("backend_api_fc_global", spec, op, inputs=inputs, outputs=[out])
    # the columns along W, the rows over the lanes: on [M, N, 1, 1] each
    # column's scale is a 4-byte plane (ppocr_rec's classifier, M = 40,
    # N = 6,625: 3.0M vendor cycles, GDMA at 0.8 bytes a cycle)
    return [fc, *epilogue_calls(op, ctx, (1, m, 1, n), channel_scales(table), axis=3)]


def narrow_right(op: Operation, m: int, k: int, n: int) -> bool:
    """Whether an int32-result fc loads its weight [K, N] as [N, K]
    (`R_transpose`): with N of a few columns the kernel moves [K, N] as K
    runs of N bytes (ppocr_cls's classifier, 200x2: 3,791 GDMA cycles for
    400 bytes), [N, K] as N runs of K bytes; one call 4,527 -> 1,966 vendor
    cycles. Measured exact on one row at N <= 4; not on three rows (3 x 40
    x 2: 4 of 6 values), nor at 100x300 (and dearer from N = 64 on)."""
    return m == 1 and 1 < n <= NARROW_N and not op.value("right_transpose")


def transposed_right(op: Operation, ctx: NativeContext, k: int, n: int) -> bytes:
    """The weight [K, N] stored as [N, K], as a coefficient of its own."""
    right = op.operands[1]
    values = np.asarray(read_weight(right.owner)).reshape(k, n)
    rows = permuted_rows(op, ctx)
    if rows is not None:  # its input was stored lane by lane (local/lane_store.py)
        values = values[rows]
    stored = np.ascontiguousarray(values.T).astype(STORAGE[dtype_name(right)])
    suffix = "_transposed" if rows is None else "_lane_rows_transposed"
    addr = ctx.coeffs.add(f"{right.owner.names[0]}{suffix}", stored)
    return raw_spec(addr, dtype_code(right), (n, k))


def deferred(op: Operation) -> bool:
    """Whether the fc is in its only reader's layer group (a long-row
    softmax's, softmax.grouped_fc)."""
    from tpuc.passes.native.softmax import grouped_fc

    uses = list(op.results[0].uses)
    reader = uses[0].operation if len(uses) == 1 else None
    return isinstance(reader, tpu.SoftmaxOp) and grouped_fc(reader) is op


def one_row_exact(k: int, n: int) -> bool:
    """Whether the fused per-column call is exact on one row [1, K] x [K, N].
    For some shapes the kernel takes an MM + RQDQ path that misses the
    columns' multipliers (measured 2026-11-27, vendor 1.30.2: wrong at
    K x N = 3x64, 16x256, 32x500, 65x512, 64x513, 1024x1000; exact at
    3x10, 32x10, 32x64, 63x10, 64x10..512, 100x300, 1024x10, 2048x64,
    2048x512). Within K >= 32, N <= 64 every shape tried was exact, and the
    row needs no doubling (resblock's classifier, 64x10: 1,217 -> ~700
    vendor cycles)."""
    return k >= 32 and n <= 64


def two_rows(op: Operation, ctx: NativeContext, spec: FcGlobal, inputs: list[bytes],
             k: int, n: int) -> list[NativeCall]:  # fmt: skip
    """The fused per-column call on one row gives every column wrong values
    (inception_v1's fc before its softmax, all 1000 differed from the
    interpreter; with two rows or more it is exact): the row twice in a
    scratch [2, K], the call on it, the first result row copied out. Two
    1 KB copies cost far less than fc_as_conv (51.6k vendor cycles against
    the call's ~20k at K = 1024, N = 1000)."""
    from tpuc.passes.native.data import concat_call

    x, y = op.operands[0], op.results[0]
    rows_in, rows_out = ctx.scratch(2 * k + 2 * n, 0), ctx.scratch(2 * k + 2 * n, 1)
    x_code, y_code = dtype_code(x), dtype_code(y)
    row = ctx.spec(x, (1, k))
    fc = ctx.call("backend_api_fc_global", spec, op,
                  inputs=[raw_spec(rows_in, x_code, (2, k)), *inputs[1:]],
                  outputs=[raw_spec(rows_out, y_code, (2, n))])  # fmt: skip
    return [
        concat_call(ctx, [row, row], raw_spec(rows_in, x_code, (2, k)), 0),
        fc,
        concat_call(ctx, [raw_spec(rows_out, y_code, (1, n))], ctx.spec(y, (1, n)), 1),
    ]


def symmetric(op: Operation) -> bool:
    """No zero point on the left operand or the result."""
    quants = (quant_of(op.operands[0]), quant_of(op.results[0]))
    return all(q is None or q.zero_point == 0 for q in quants)


def common_shift(table: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Per-column multipliers over one right shift, as TPU-MLIR's per-channel
    MatMul lowering gives the fc call (`fuse_rq`, the multipliers a fourth
    operand): m << (s − r) over the largest shift s, exact when every one
    stays below 2**31, else None."""
    rshift = table[:, 2].astype(np.int64)
    shift = int(rshift.max())
    scaled = table[:, 1].astype(np.int64) << (shift - rshift)
    if np.any(scaled >= 2**31) or np.any(scaled < -(2**31)):
        return None
    return scaled.astype(np.int32), shift


def per_column_fc(op: Operation, ctx: NativeContext, spec: FcGlobal, inputs: list[bytes],
                  table: np.ndarray, dims: tuple[int, int]) -> list[NativeCall]:  # fmt: skip
    """INT8 with one (multiplier, rshift) per column, M > 1: the fc call's
    int32 product and bias [M, N]; transposed to [N, M]; requant_int per
    channel of the [1, N, M, 1] view ([multiplier, −rshift, zero point] per
    column); the 8-bit [N, M] transposed back into the result. Requant on
    the [M, N, 1, 1] view instead (no transposes) is exact too, but moves
    one-element channel planes: 3x the cycles at 64x256x256. (The
    transposed product Yᵀ = Wᵀ·Xᵀ straight from the call, which would save
    the first transpose, left all rows but the first at zero: not used.)"""
    from tpuc.passes.native.requant import RequantIntParam

    m, n = dims
    spec.if_relu, spec.relu_limit = 0, -1.0
    acc, acc_t, out_t = (ctx.scratch(4 * m * n, i) for i in range(3))
    code = dtype_code(op.results[0])
    out_q = quant_of(op.results[0])
    quant = np.stack([table[:, 1], -table[:, 2], np.full(n, out_q.zero_point)], axis=1)
    p = RequantIntParam()
    p.input_addr, p.output_addr = acc_t, out_t
    p.requant_addr = ctx.coeffs.add(f"{op.names[0]}_requant", quant.astype(np.int32))
    p.n, p.c, p.h, p.w = 1, n, m, 1
    p.is_perchannel = True
    p.input_dtype, p.output_dtype = DTYPE_I32, code
    p.mode, p.round_mode = MULTIPLIER_SHIFT, round_mode(op)
    return [
        ctx.call("backend_api_fc_global", spec, op, inputs=inputs,
                 outputs=[raw_spec(acc, DTYPE_I32, (m, n))]),
        transposed(raw_spec(acc, DTYPE_I32, (1, 1, m, n)),
                   raw_spec(acc_t, DTYPE_I32, (1, 1, n, m))),
        NativeCall("backend_api_requant_int_global", p.to_bytes(), plain=True),
        transposed(raw_spec(out_t, code, (1, 1, n, m)), ctx.spec(op.results[0], (1, 1, m, n))),
    ]  # fmt: skip


def transposed(src: bytes, dst: bytes) -> NativeCall:
    """transpose_param_t swapping the last two dims (Permute.cpp's 4-D form)."""
    from tpuc.passes.native.data import Transpose

    t = Transpose()
    for i, axis in enumerate((0, 1, 3, 2)):
        t.spec.order[i] = axis
    t.num_core = 1
    return NativeCall("backend_api_transpose_global", t.to_bytes(), [src], [dst])


def lane_split(k: int) -> tuple[int, int]:
    """(channels, width) with channels · width = K: the most input channels
    up to the 64 lanes that divide K evenly. A [M, K, 1, 1] input puts one
    byte in each channel, and the GDMA moves each as its own transfer
    (resnet-style fc1, K = 2048: 38,824 of the layer's 47,097 cycles on
    the input load); [M, 64, 1, K/64] moves 64 rows of K/64 bytes."""
    channels = max(c for c in range(1, NPU_NUM + 1) if k % c == 0)
    if channels < NPU_NUM // 2:  # K = 67: one channel 67 wide costs more (3,975 vs 2,887)
        return k, 1
    return channels, k // channels


def fc_as_conv(op: Operation, ctx: NativeContext, m: int, k: int, n: int
               ) -> list[NativeCall]:  # fmt: skip
    """INT8 with per-column requant: a convolution of the M rows, each
    viewed as [C, 1, K/C] (lane_split), by the filter [N, C, 1, K/C] (the
    same products, summed over the same K), the per-channel requant in the
    merged coefficient."""
    channels, width = lane_split(k)
    spec = ConvGlobal()
    c = spec.common
    c.groups = c.kh = c.stride_h = c.stride_w = c.dh = c.dw = 1
    c.kw = width
    c.input_c, c.output_c = channels, n
    c.if_relu = bool(op.value("do_relu"))
    c.upper_limit = relu_limit(op)
    c.round_mode = round_mode(op)
    c.bias_sign = c.ipad_is_const = c.kzp_is_const = c.weight_is_coeff = 1
    weight = np.asarray(read_weight(op.operands[1].owner)).reshape(-1)
    filt = weight.reshape(n, k) if op.value("right_transpose") else weight.reshape(k, n).T
    table = input_zero_point_bias(op, coeff_table(op, n), filt.reshape(n, k, 1))
    int8_spec(spec, op, table)
    coeff = pack_int8(table, quant_of(op.results[0]).zero_point,
                      filt.reshape(n, channels, width), depthwise=False)  # fmt: skip
    addr = ctx.coeffs.add(f"{op.names[0]}_coeff_lanes", coeff)
    weights = raw_spec(addr, dtype_code(op.operands[1]), coeff_shape(coeff, depthwise=False))
    inputs = [ctx.spec(op.operands[0], (m, channels, 1, width)), weights]
    outputs = [ctx.spec(op.results[0], (m, n, 1, 1))]
    return [ctx.call("backend_api_conv_global", spec, op, inputs=inputs, outputs=outputs)]


def batch_dims(op: Operation) -> tuple[int, int, int, int]:
    """(B, M, K, N) of a batched matmul whose operands share their batch dims."""
    left, right, out = (shape_of(v) for v in (op.operands[0], op.operands[1], op.results[0]))
    if len(left) < 2 or len(right) < 2 or left[:-2] != right[:-2]:
        raise NotExpressible(f"a matmul of {list(left)} by {list(right)} (broadcast batch dims)")
    m, k = left[-2:]
    n = right[-2] if op.value("right_transpose") else right[-1]
    return math.prod(out[:-2]), m, k, n


def batch_matmul(op: Operation, ctx: NativeContext, floats: bool) -> list[NativeCall]:
    """`backend_api_batch_matmul_global` on [B, M, K] x [B, K, N]."""
    b, m, k, n = batch_dims(op)
    transpose = bool(op.value("right_transpose"))
    spec = BatchMatmulGlobal()
    c = spec.common
    c.Y_dtype = dtype_code(op.results[0])
    c.R_trans = transpose
    c.has_bias = has_bias(op)
    c.do_relu = bool(op.value("do_relu"))
    c.upper_limit = relu_limit(op)
    c.requant_mode = -1
    if not floats:
        if op.value("coeff_merged"):
            raise NotExpressible("a batched INT8 matmul with per-column requant")
        multiplier, rshift = op.value("multiplier") or [1], op.value("rshift") or [0]
        if len(multiplier) != 1 or len(rshift) != 1:
            raise NotExpressible("a batched INT8 matmul with per-column requant")
        right_q = quant_of(op.operands[1])
        if quant_of(op.operands[0]).zero_point or (right_q is not None and right_q.zero_point):
            raise NotExpressible(
                "an asymmetric INT8 matmul of two activations (the chip's zero points "
                "do not give Σ(q_l − Z_l)(q_r − Z_r), and TPU-MLIR lowers it in F32: name it "
                "F32 in a --quantize_table)"
            )
        c.R_zp_is_const = True
        c.izp_const_val = 0
        c.R_zp_const_val = right_q.zero_point if right_q is not None else 0
        out_q = quant_of(op.results[0])
        if out_q is None and not is_float(op.results[0]):
            raise NotExpressible("a batched INT8 matmul with a 32-bit result")
        if out_q is not None:
            c.requant_mode = MULTIPLIER_SHIFT
            c.mul_val, c.shift_val, c.offset_val = multiplier[0], -rshift[0], out_q.zero_point
            c.round_mode = round_mode(op)
    if swappable(op, b, m, k, n, c.has_bias):  # short result rows: Yᵀ = Rᵀ · Lᵀ
        return transposed_product(op, ctx, spec, (b, m, k, n))
    right = (b, n, k) if transpose else (b, k, n)
    inputs = [ctx.spec(op.operands[0], (b, m, k)), ctx.spec(op.operands[1], right)]
    if c.has_bias:
        inputs.append(ctx.spec(op.operands[2], (1, 1, n)))
    if floats or quant_of(op.results[0]) is not None:
        outputs = [ctx.spec(op.results[0], (b, m, n))]
        return [ctx.call("backend_api_batch_matmul_global", spec, op, inputs, outputs)]
    # the float epilogue (epilogue.py): the int32 product, then cast and scale
    check_f32(op)
    if c.has_bias:
        raise NotExpressible("a batched INT8 matmul with a bias and a float result")
    c.Y_dtype, c.do_relu, c.upper_limit = DTYPE_I32, False, -1.0
    outputs = [raw_spec(ctx.address(op.results[0]), DTYPE_I32, (b, m, n))]
    scale = channel_scales(np.array([[0, multiplier[0], rshift[0]]], np.int64))
    return [
        ctx.call("backend_api_batch_matmul_global", spec, op, inputs, outputs),
        *epilogue_calls(op, ctx, (b, m, 1, n), np.full(m, scale[0], np.float32)),
    ]
