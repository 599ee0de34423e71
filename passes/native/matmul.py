"""MatMul (TPU-MLIR Interfaces/BM1684X/MatMul.cpp, parseParam of Common/MatMul.cpp).

- A weight right operand without batch ([K, N], or [1, …, K, N]) folds every
  leading dim of the left operand into M:
  - F32: `backend_api_fc_global` (`fc_global_spec_t`), right as [K, N] (the
    flag `R_transpose` says it is really [N, K]), bias [N] as lowering left it;
  - F16/BF16/INT8: a 1x1 convolution over M images of K channels
    (`backend_api_conv_global`, filter [N, K] packed as conv.py packs it):
    F16/BF16 keep the f32 bias (the FC call wants it in f16/bf16, which
    rounds it), and tpuc requantizes INT8 per output column, which the FC
    call cannot (one `mul_val`/`shift_val`).
- Two activations (or a batched right operand):
  `backend_api_batch_matmul_global` (`batch_matmul_global_spec_t`) on
  [B, M, K] x [B, K, N] (or [B, N, K]) -> [B, M, N]; INT8 with one multiplier
  (`requant_mode = 2` MultiplierShift, `shift_val = -rshift`).
- An INT8 matmul with an f32 result (tpuc's float epilogue): the int32
  product (the 1x1 convolution with `merge_coeff = 1`, or the batch matmul
  with `Y_dtype` int32), then epilogue.py's cast and scale.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.weights import read_weight
from tpuc.passes.native.context import (
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
    coeff_shape,
    coeff_table,
    ic_blocks,
    int8_spec,
    pack_int8,
    raw_spec,
    round_mode,
)
from tpuc.passes.native.epilogue import channel_scales, check_f32, epilogue_calls
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
    if dtype_name(op.operands[0]) == "f32":
        return [float_fc(op, ctx, *dims)]
    return fc_as_conv(op, ctx, *dims)


def float_fc(op: Operation, ctx: NativeContext, m: int, k: int, n: int) -> NativeCall:
    """F32: `backend_api_fc_global`, requant_mode −1."""
    spec = FcGlobal()
    spec.have_bias = has_bias(op)
    spec.if_relu = bool(op.value("do_relu"))
    spec.relu_limit = relu_limit(op)
    spec.requant_mode = -1
    spec.R_transpose = 0 if n == 1 else bool(op.value("right_transpose"))
    inputs = [ctx.spec(op.operands[0], (m, k)), ctx.spec(op.operands[1], (k, n))]
    if spec.have_bias:
        inputs.append(ctx.spec(op.operands[2]))
    return ctx.call("backend_api_fc_global", spec, op, inputs=inputs,
                    outputs=[ctx.spec(op.results[0], (m, n))])  # fmt: skip


def fc_as_conv(op: Operation, ctx: NativeContext, m: int, k: int, n: int
               ) -> list[NativeCall]:  # fmt: skip
    """A 1x1 convolution of [M, K, 1, 1] by the filter [N, K]: INT8 with the
    per-channel requant in the merged coefficient, F16/BF16 with the filter
    in blocks of 32 input channels and the f32 bias (conv.py's packing)."""
    spec = ConvGlobal()
    c = spec.common
    c.groups = c.kh = c.kw = c.stride_h = c.stride_w = c.dh = c.dw = 1
    c.input_c, c.output_c = k, n
    c.if_relu = bool(op.value("do_relu"))
    c.upper_limit = relu_limit(op)
    c.round_mode = round_mode(op)
    c.bias_sign = c.ipad_is_const = c.kzp_is_const = c.weight_is_coeff = 1
    weight = np.asarray(read_weight(op.operands[1].owner)).reshape(-1)
    filt = weight.reshape(n, k) if op.value("right_transpose") else weight.reshape(k, n).T
    inputs = [ctx.spec(op.operands[0], (m, k, 1, 1))]
    if is_float(op.operands[0]):
        c.has_bias = has_bias(op)
        blocked = ic_blocks(np.ascontiguousarray(filt).reshape(n, k, 1), 32)
        addr = ctx.coeffs.add(f"{op.names[0]}_filter_ic32", blocked)
        inputs.append(raw_spec(addr, dtype_code(op.operands[1]), (1, n, 1, blocked[0].size)))
        if c.has_bias:
            inputs.append(ctx.spec(op.operands[2], (1, n, 1, 1)))
    else:
        table = coeff_table(op, n)
        int32 = is_float(op.results[0])  # the float epilogue (epilogue.py)
        if int32:
            check_f32(op)
        int8_spec(spec, op, table, int32)
        zp = 0 if int32 else quant_of(op.results[0]).zero_point
        coeff = pack_int8(table, zp, filt.reshape(n, k, 1), depthwise=False, requant=not int32)
        addr = ctx.coeffs.add(f"{op.names[0]}_coeff_lanes", coeff)
        shape = coeff_shape(coeff, depthwise=False)
        inputs.append(raw_spec(addr, dtype_code(op.operands[1]), shape))
        if int32:
            out = raw_spec(ctx.address(op.results[0]), DTYPE_I32, (m, n, 1, 1))
            conv = ctx.call("backend_api_conv_global", spec, op, inputs=inputs, outputs=[out])
            return [conv, *epilogue_calls(op, ctx, (m, n, 1, 1), channel_scales(table))]
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
        c.R_zp_is_const = True
        c.izp_const_val = quant_of(op.operands[0]).zero_point
        right_q = quant_of(op.operands[1])
        c.R_zp_const_val = right_q.zero_point if right_q is not None else 0
        out_q = quant_of(op.results[0])
        if out_q is None and not is_float(op.results[0]):
            raise NotExpressible("a batched INT8 matmul with a 32-bit result")
        if out_q is not None:
            c.requant_mode = MULTIPLIER_SHIFT
            c.mul_val, c.shift_val, c.offset_val = multiplier[0], -rshift[0], out_q.zero_point
            c.round_mode = round_mode(op)
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
