"""Deconv (a 2-D transposed convolution), after TPU-MLIR's
`Interfaces/BM1684X/Deconv.cpp`: the old-style
`backend_api_deconv_global(deconv_global_param_t*, sizeof)` with the
addresses in the struct.

tpuc keeps ONNX's filter [ic, oc/g, kh, kw]; the library reads TPU-MLIR's
[oc, ic/g, kh, kw] (its converter's transpose per group), laid out as in
`WeightReorder/BM1684X/Deconv.cpp`: F32 [1, oc, ic/g, kh·kw]; F16/BF16 in
blocks of 32 input channels ([oc][ic/32][kh·kw][32], `filter_reorder`), or
[1, oc, kh, kw] when depthwise; the bias [1, oc, 1, 1] in its own type.

INT8 (`int8_deconv`): the library's quantized deconv writes the int32
accumulator into a scratch buffer (as TPU-MLIR's older lowering: a Deconv
with an int32 result, then a requant), and scalar requant_int calls per
channel (requant.py `RequantInt.per_channel_calls`) requantize it into the output, bit
for bit with tpuc's interpreter (measured on the chip model: 31-bit
multipliers, shifts up to 40, ties in HalfAwayFromZero/HalfUp/HalfToEven/
Down). Not expressible: a relu with an upper limit, an asymmetric
depthwise one (the library's int8 depthwise kernel treats the input zero
point in an unknown way; the dense kernel pads and inserts Z_in, so
−Z_in·Σw goes into the bias).
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.weights import read_weight
from tpuc.passes.native.cast import round_mode
from tpuc.passes.native.context import (
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
    is_float,
    quant_of,
)
from tpuc.passes.native.conv import DTYPE_I32, coeff_table, ic_blocks, raw_spec
from tpuc.passes.native.requant import RequantInt
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import BcBinaryGlobal, declare

DeconvGlobal = declare(
    "deconv_global_param_t",
    "u64 input_global_addr; u64 weight_global_addr; u64 bias_global_addr; "
    "u64 output_global_addr; i32 input_shape[4]; i32 groups; i32 output_c; i32 kernel[2]; "
    "i32 stride[2]; i32 dilation[2]; i32 pad[4]; i32 output_pad[2]; i32 has_bias; "
    "i32 input_dtype; i32 weight_dtype; i32 bias_dtype; i32 output_dtype; i32 if_relu; "
    "f32 upper_limit; bool is_asym; u8 rshift; u64 kzp_global_addr; "
    "u64 pad_insert_global_addr; bool kzp_is_const; bool pad_insert_is_const; i32 kzp_val; "
    "i32 pad_val; i32 insert_val; i32 kzp_dtype",
)


def oihw_filter(op: Operation, groups: int) -> np.ndarray:
    """ONNX's [ic, oc/g, kh, kw] as [oc, ic/g, kh·kw] (TPU-MLIR's order)."""
    weight = op.operands[1].owner
    if not isinstance(weight, top.WeightOp):
        raise NotExpressible("a deconv filter that is not a weight")
    ic, ocg, kh, kw = shape_of(op.operands[1])
    data = np.asarray(read_weight(weight)).reshape(groups, ic // groups, ocg, kh * kw)
    return data.transpose(0, 2, 1, 3).reshape(groups * ocg, ic // groups, kh * kw)


def filter_layout(op: Operation, groups: int, dtype: str) -> np.ndarray:
    """The filter as the library reads it (see the module docstring)."""
    filt = oihw_filter(op, groups)
    oc, icg, _ = filt.shape
    depthwise = groups > 1 and icg == 1 and oc == groups
    if dtype == "f32" or depthwise:
        return filt
    return ic_blocks(filt, 32)


@native_rule(tpu.DeconvOp)
def deconv(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """deconv_global_param_t {addresses, input_shape, groups, output_c, kernel,
    stride, dilation, pad (h0, h1, w0, w1), output_pad, has_bias, dtypes,
    if_relu, upper_limit}; INT8: int8_deconv."""
    src, dst, bias = op.operands[0], op.results[0], op.operands[2]
    if quant_of(src) is not None and quant_of(dst) is not None:
        return int8_deconv(op, ctx)
    if not (is_float(src) and is_float(dst)):
        raise NotExpressible("a deconv of these types (INT8 needs an 8-bit quantized result)")
    dtype = dtype_name(src)
    if dtype_name(op.operands[1]) != dtype:
        raise NotExpressible("a deconv filter of another type than the input")
    groups = op.value("group") or 1
    p = geometry(op)
    p.input_global_addr, p.output_global_addr = ctx.address(src), ctx.address(dst)
    stored = filter_layout(op, groups, dtype)
    p.weight_global_addr = ctx.coeffs.add(f"{op.names[0]}_filter_reordered", stored)
    p.input_dtype = p.weight_dtype = p.output_dtype = dtype_code(src)
    if not isinstance(bias.owner, top.NoneOp):
        if not isinstance(bias.owner, top.WeightOp):
            raise NotExpressible("a deconv bias that is not a weight")
        p.has_bias, p.bias_dtype = 1, dtype_code(bias)
        p.bias_global_addr = ctx.address(bias)
    p.if_relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit")
    p.upper_limit = -1.0 if limit is None else float(limit)
    return [NativeCall("backend_api_deconv_global", p.to_bytes(), plain=True)]


def geometry(op: Operation):
    """A deconv_global_param_t with the shapes and the window filled."""
    kernel = op.value("kernel_shape")
    in_shape = shape_of(op.operands[0])
    if len(kernel) != 2 or len(in_shape) != 4:
        raise NotExpressible(f"a {len(kernel)}-D deconv (the native target has 2-D)")
    p = DeconvGlobal()
    p.input_shape[:] = in_shape
    p.groups, p.output_c = op.value("group") or 1, shape_of(op.results[0])[1]
    p.kernel[:] = kernel
    p.stride[:] = op.value("strides") or [1, 1]
    p.dilation[:] = op.value("dilations") or [1, 1]
    top_, left, bottom, right = op.value("pads") or [0, 0, 0, 0]
    p.pad[:] = [top_, bottom, left, right]
    p.output_pad[:] = op.value("output_padding") or [0, 0]
    return p


def int8_deconv(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """An INT8 deconv in steps, as TPU-MLIR's older lowering (a Deconv with
    an int32 result, then a requant): the library's quantized deconv (int8
    filter in blocks of 64 input channels, raw [oc, kh·kw] when depthwise;
    int32 bias; is_asym with pad/insert value Z_in, so −Z_in·Σw goes into
    the bias) writes Σ q_in·q_w + bias into an int32 scratch buffer; then
    `RequantInt.per_channel_calls` requantize it into the output. The library's int8
    depthwise deconv asserts with a bias: it writes Σ q_in·q_w and a
    bcbinary ADD (int32 + int32 [1, oc, 1, 1], exact) adds the bias. A
    fused relu clamps the accumulator at 0 (the requant is monotonic and
    keeps 0 at Z_out: that is clamping the output at Z_out)."""
    src, dst = op.operands[0], op.results[0]
    qin, qout = quant_of(src), quant_of(dst)
    if dtype_name(dst) not in ("i8", "u8"):
        raise NotExpressible(f"an INT8 deconv with a {dtype_name(dst)} result")
    if dtype_name(op.operands[1]) not in ("i8", "u8"):
        raise NotExpressible("an INT8 deconv with a filter that is not 8-bit")
    relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit")
    if relu and limit is not None and float(limit) >= 0:
        raise NotExpressible(f"an INT8 deconv with relu_limit {limit}")
    groups = op.value("group") or 1
    n, (_, oc, oh, ow) = shape_of(src)[0], shape_of(dst)
    filt = oihw_filter(op, groups)
    depthwise = groups > 1 and filt.shape[1] == 1 and oc == groups
    table = coeff_table(op, oc)
    bias = table[:, 0].copy()
    if qin.zero_point and depthwise:
        raise NotExpressible(
            "an asymmetric INT8 depthwise deconv (the library's int8 depthwise kernel "
            "handles the input zero point in some other, unknown way)"
        )
    if qin.zero_point:  # the library's sum has padding and insertions worth Z_in
        bias -= qin.zero_point * filt.astype(np.int64).reshape(oc, -1).sum(axis=1)
    if np.any(np.abs(bias) >= 1 << 31):
        raise NotExpressible("an INT8 deconv bias beyond int32")
    bias = bias.astype(np.int32)
    add_bias = depthwise and bool(np.any(bias != 0))
    shape = (n, oc, oh, ow)
    scratch = ctx.scratch(4 * math.prod(shape))
    p = geometry(op)
    p.input_global_addr, p.output_global_addr = ctx.address(src), scratch
    stored = (filt if depthwise else ic_blocks(filt, 64)).astype(np.int8)
    p.weight_global_addr = ctx.coeffs.add(f"{op.names[0]}_filter_ic64", stored)
    p.input_dtype, p.weight_dtype = dtype_code(src), dtype_code(op.operands[1])
    p.output_dtype = DTYPE_I32
    if not depthwise:
        p.has_bias, p.bias_dtype = 1, DTYPE_I32
        p.bias_global_addr = ctx.coeffs.add(f"{op.names[0]}_bias_i32", bias)
    p.if_relu, p.upper_limit = relu and not add_bias, -1.0
    p.is_asym, p.kzp_is_const, p.pad_insert_is_const = True, True, True
    p.pad_val = p.insert_val = qin.zero_point
    p.kzp_dtype = p.input_dtype
    calls = [NativeCall("backend_api_deconv_global", p.to_bytes(), plain=True)]
    if add_bias:
        add = BcBinaryGlobal()
        add.spec.binary_type, add.spec.if_relu, add.spec.relu_upper_limit = 0, relu, -1.0
        add.spec.scale_A = add.spec.scale_B = 1
        add.spec.f8_scale_A = add.spec.f8_scale_B = 1.0
        acc = raw_spec(scratch, DTYPE_I32, shape)
        coeff = raw_spec(ctx.coeffs.add(f"{op.names[0]}_bias_i32", bias), DTYPE_I32, (1, oc, 1, 1))
        calls.append(ctx.call("backend_api_bcbinary_global", add, op, [acc, coeff], [acc]))
    return [
        *calls,
        *RequantInt(
            (scratch, ctx.address(dst)),
            shape,
            (DTYPE_I32, dtype_code(dst)),
            table[:, 1],
            table[:, 2],
            (0, qout.zero_point),
            round_mode(op),
        ).per_channel_calls(),
    ]
