"""The local rule of tpu.Deconv: INT8 with its requant merged (ppocr_det's
head: two 2x2 stride-2 transposed convolutions), after TPU-MLIR's
`Deconv.cpp` and `RequantIntAxis.cpp` `codegen_local_bm1684x`, which
TPU-MLIR runs as two ops of one group (a Deconv with an int32 result, then
a per-channel requant); here they are two calls of one op:

1. `backend_api_deconv_local` (`deconv_local_param_t`: local addresses
   in the struct, the slice's input shape, the pads in the zero-insert
   convention: an output slice [o0, o1) reads the padded rows
   [o0, o1 + k − 2], the input row i sits at padded row k − 1 − pad + i·s,
   so the slice's pads are what the held input rows leave uncovered at
   either end) writes Σ q_in·q_w + bias as int32 into the op's buffer;
2. `backend_api_requant_int_local` per channel (the [1, oc, 1, 3] table
   {multiplier, −rshift, zero point} TPU-MLIR's lowering makes, one plane
   per lane EU-aligned as bm1684x keeps it) from there into the result.

F16/BF16: one call, the result written directly (the global rule's
filter in blocks of 32 input channels and its f32 bias), bit for bit with
the interpreter's half deconvolution.

The global rule (deconv.int8_deconv) moves that int32 tensor through DDR
and requantizes it with a scalar call per channel; in a group it never
leaves local memory. Symmetric only (the input zero point is the kernel's
pad and insert value, as globally; the group refuses zero points anyway),
ungrouped, dilation 1, no output padding, stride at most the kernel
(every output row reads an input row), no relu limit.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.cast import nchw
from tpuc.passes.native.context import (
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
    quant_of,
)
from tpuc.passes.native.local.ops import (
    EU_BYTES,
    Coeff,
    LocalRule,
    _fact,
    lane_major,
    local_rule,
)
from tpuc.passes.native.local.plan import NPU_NUM, GroupPlan, Slice
from tpuc.target.vendor.params import declare

DeconvLocal = declare(
    "deconv_local_param_t",
    "u32 input_local_addr; u32 weight_local_addr; u32 bias_local_addr; u32 buffer_local_addr; "
    "u32 output_local_addr; i32 input_shape[4]; i32 groups; i32 output_c; i32 kernel[2]; "
    "i32 stride[2]; i32 dilation[2]; i32 pad[4]; i32 has_bias; i32 input_dtype; "
    "i32 weight_dtype; i32 bias_dtype; i32 output_dtype; i32 if_relu; f32 upper_limit; "
    "bool is_asym; u8 rshift; u32 kzp_local_addr; u32 pad_insert_local_addr; "
    "bool kzp_is_const; bool pad_insert_is_const; i32 kzp_val; i32 pad_val; i32 insert_val; "
    "i32 kzp_dtype",
)
I32_EU = EU_BYTES // 4  # int32 elements of one EU row: the requant table's plane


def check(op: Operation) -> None:
    _fact(op, "deconv_check", _check)


def _check(op: Operation) -> None:
    src, dst = op.operands[0], op.results[0]
    qin, qout = quant_of(src), quant_of(dst)
    if half(op):
        bias = op.operands[2].owner
        if not isinstance(bias, top.NoneOp | top.WeightOp):
            raise NotExpressible("a local deconv bias that is not a weight")
    elif qin is None or qout is None:
        raise NotExpressible("a local deconv other than INT8, F16 or BF16")
    elif qin.zero_point or qout.zero_point:
        raise NotExpressible("a local asymmetric INT8 deconv")
    if len(shape_of(src)) != 4 or len(op.value("kernel_shape") or ()) != 2:
        raise NotExpressible("a local deconv that is not 2-D")
    if (op.value("group") or 1) != 1:
        raise NotExpressible("a local grouped deconv (not written yet)")
    if any(d != 1 for d in op.value("dilations") or [1, 1]):
        raise NotExpressible("a local dilated deconv")
    if any(op.value("output_padding") or [0, 0]):
        raise NotExpressible("a local deconv with output padding")
    kh, kw = op.value("kernel_shape")
    sh, sw = op.value("strides") or [1, 1]
    pads = op.value("pads") or [0, 0, 0, 0]
    if sh > kh or sw > kw or max(pads[0], pads[2]) > kh - 1 or max(pads[1], pads[3]) > kw - 1:
        raise NotExpressible("a local deconv with a stride above its kernel or pads past it")
    if op.value("do_relu") and (op.value("relu_limit") or -1.0) >= 0:
        raise NotExpressible("a local deconv with a relu limit")


def half(op: Operation) -> bool:
    """An F16/BF16 deconv (input, filter and result of one half type)."""
    kinds = {dtype_name(op.operands[0]), dtype_name(op.operands[1]), dtype_name(op.results[0])}
    return len(kinds) == 1 and kinds <= {"f16", "bf16"}


def padded_start(op: Operation) -> int:
    """The padded row of input row 0 (zero-insert convention)."""
    return op.value("kernel_shape")[0] - 1 - (op.value("pads") or [0, 0, 0, 0])[0]


def deconv_backward(op: Operation, out: Slice) -> Slice:
    """The input rows an output slice reads: those at padded rows
    [o0, o1 + k − 2], clamped to the input."""
    k, s = op.value("kernel_shape")[0], (op.value("strides") or [1, 1])[0]
    ih, start = nchw(op.operands[0])[2], padded_start(op)
    o0, o1 = out.h_idx, out.h_idx + out.h_slice
    first = max(0, -(-(o0 - start) // s))
    last = min(ih - 1, (o1 + k - 2 - start) // s)
    return Slice(out.n_idx, out.n_slice, first, max(0, last - first + 1))


def _table(op: Operation) -> np.ndarray:
    from tpuc.passes.native.conv import coeff_table

    return coeff_table(op, shape_of(op.results[0])[1])


def deconv_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """The global rule's filter (int8, blocks of 64 input channels) and int32
    bias, and the requant table {M, −r, 0} padded to an EU row per channel
    (so compact per lane is bm1684x's EU-aligned layout)."""
    from tpuc.passes.native.conv import ic_blocks
    from tpuc.passes.native.deconv import oihw_filter

    check(op)
    oc = shape_of(op.results[0])[1]
    if half(op):
        return half_coeffs(op, ctx)
    table = _table(op)
    if np.any(np.abs(table[:, 0]) >= 1 << 31):
        raise NotExpressible("an INT8 deconv bias beyond int32")
    name = op.names[0]
    filt = ic_blocks(oihw_filter(op, 1), 64).astype(np.int8).reshape(oc, -1)
    bias = table[:, :1].astype(np.int32)
    quant = np.zeros((oc, I32_EU), np.int32)
    quant[:, 0], quant[:, 1] = table[:, 1], -table[:, 2]
    return [
        lane_major(ctx, f"{name}_filter_ic64", filt, "i8"),
        lane_major(ctx, f"{name}_bias_i32", bias, "i32"),
        lane_major(ctx, f"{name}_requant_i32", quant, "i32"),
    ]


def half_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """The global rule's filter (blocks of 32 input channels) and f32 bias."""
    from tpuc.ir.weights import read_weight
    from tpuc.passes.native.deconv import filter_layout

    oc, name = shape_of(op.results[0])[1], op.names[0]
    dtype = dtype_name(op.operands[0])
    filt = filter_layout(op, 1, dtype).reshape(oc, -1)
    coeffs = [lane_major(ctx, f"{name}_filter_ic32", filt, dtype)]
    if isinstance(op.operands[2].owner, top.WeightOp):
        bias = np.asarray(read_weight(op.operands[2].owner), np.float32).reshape(oc, 1)
        coeffs.append(lane_major(ctx, f"{name}_bias_f32", bias, "f32"))
    return coeffs


def deconv_buffer(op: Operation, plan: GroupPlan) -> int:
    """INT8: the int32 sums of the output slice (EU-aligned planes), and an
    EU row of slack; a half deconv writes its result directly."""
    if half(op):
        return 0
    out = plan.tensors[op.results[0]]
    _, c, _, w = out.dims
    plane = max(s.h_slice for s in out.slices) * w
    plane = -(-plane // I32_EU) * I32_EU
    n = max(s.n_slice for s in out.slices)
    return n * -(-c // NPU_NUM) * plane * 4 + EU_BYTES


def deconv_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list:
    from tpuc.passes.native.conv import DTYPE_I32, round_mode
    from tpuc.passes.native.requant import MULTIPLIER_SHIFT, RequantIntParam

    src, dst = op.operands[0], op.results[0]
    ins, out = plan.tensors[src].slice_at(step), plan.tensors[dst].slice_at(step)
    (_, ic, _, iw), (_, oc, _, ow) = nchw(src), nchw(dst)
    kh, kw = op.value("kernel_shape")
    sh, sw = op.value("strides") or [1, 1]
    pads = op.value("pads") or [0, 0, 0, 0]
    deconv_coeffs(op, ctx)  # registers the coefficients (the struct carries their addresses)
    start = padded_start(op)
    top_pad = start + ins.h_idx * sh - out.h_idx
    bottom_pad = out.h_idx + out.h_slice + kh - 2 - (start + (ins.h_idx + ins.h_slice - 1) * sh)
    buffer = plan.local(op).buffer_addr
    p = DeconvLocal()
    p.input_local_addr = plan.tensors[src].addr_at(step)
    p.weight_local_addr = plan.tensors[(op, 0)].addrs[0]
    if (op, 1) in plan.tensors:
        p.bias_local_addr = plan.tensors[(op, 1)].addrs[0]
    p.output_local_addr = buffer
    p.input_shape[:] = [ins.n_slice, ic, ins.h_slice, iw]
    p.groups, p.output_c = 1, oc
    p.kernel[:], p.stride[:], p.dilation[:] = [kh, kw], [sh, sw], [1, 1]
    p.pad[:] = [top_pad, bottom_pad, kw - 1 - pads[1], kw - 1 - pads[3]]
    p.has_bias = 1
    p.input_dtype, p.weight_dtype = dtype_code(src), dtype_code(op.operands[1])
    p.bias_dtype = p.output_dtype = DTYPE_I32
    p.if_relu, p.upper_limit = bool(op.value("do_relu")), -1.0
    p.is_asym = p.kzp_is_const = p.pad_insert_is_const = True
    p.kzp_dtype = p.weight_dtype
    name = op.names[0]
    if half(op):
        return [("plain_local", name, "backend_api_deconv_local", half_fields(op, plan, step, p))]
    r = RequantIntParam()
    r.input_addr, r.output_addr = buffer, plan.tensors[dst].addr_at(step)
    r.requant_addr = plan.tensors[(op, 2)].addrs[0]
    r.n, r.c, r.h, r.w = out.n_slice, oc, out.h_slice, ow
    r.is_perchannel = True
    r.input_dtype, r.output_dtype = DTYPE_I32, dtype_code(dst)
    r.mode, r.round_mode = MULTIPLIER_SHIFT, round_mode(op)
    return [
        ("plain_local", name, "backend_api_deconv_local", p.to_bytes()),
        ("plain_local", name, "backend_api_requant_int_local", r.to_bytes()),
    ]


def half_fields(op: Operation, plan: GroupPlan, step: int, p) -> bytes:
    """The half form of the struct: the result written directly, the bias
    f32 when there is one, no quantization fields."""
    from tpuc.passes.native.context import DTYPE_F32

    p.output_local_addr = plan.tensors[op.results[0]].addr_at(step)
    p.has_bias = int((op, 1) in plan.tensors)
    p.bias_dtype = DTYPE_F32
    p.output_dtype = dtype_code(op.results[0])
    p.is_asym = p.kzp_is_const = p.pad_insert_is_const = False
    p.kzp_dtype = 0
    return p.to_bytes()


local_rule(tpu.DeconvOp, rule=LocalRule(deconv_backward, deconv_coeffs, deconv_buffer,
                                        deconv_command))  # fmt: skip
