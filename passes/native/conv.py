"""Conv2D: `backend_api_conv_global` with `conv_global_spec_t`.

The weights follow TPU-MLIR's BM1684X WeightReorder (Conv2D.cpp, ConvUtils.h)
from the forms tpuc's weight-reorder left
(filter [1, oc, ic/g, kh·kw] in OIHW order; INT8 `coeff_merged` [1, oc, 1, 3]
= bias, multiplier, rshift per channel):

- F32: filter as is, f32 bias [1, oc, 1, 1];
- F16/BF16: filter in blocks of 32 input channels ([oc][ic/32][kh·kw][32],
  `filter_reorder`), f32 bias; depthwise: filter as is, bias in the filter's
  type;
- INT8: one coefficient per output channel lane (`merge_coeff = 2`):
  requant [multiplier, −rshift, zp] | int32 bias | filter (blocks of 64
  input channels, raw for depthwise), channels above 64 folded onto the 64
  lanes (`reshape_coeff_for_broadcast_channel`). A convolution with few
  input channels (an image's first: 3 channels, 7x7) folds kernel rows,
  columns or both into the input channels (`use_3ic_optimize`, three_ic.py):
  the kernel then fills the 64 lanes' input-channel parallelism, 7x fewer
  TIU cycles on resnet50's first convolution.

A grouped (not depthwise) INT8 convolution is one call per group and
image, each an ordinary convolution over that group's channel slice of the
input and output (TPU-MLIR's merged layout for groups gives wrong results
after the first group). A symmetric INT8 depthwise 1x1 convolution over
at most 64 channels with planes above a 16 KiB bank is the ordinary
convolution with a diagonal filter (`dense_pointwise`, TPU-MLIR's form,
cheaper there). An INT8 convolution with a float result (tpuc's
float epilogue) is the sequence of epilogue.py.

Known gap: the chip's F16/BF16 depthwise kernel (which needs the bias in
the filter's type) rounds differently from tpuc's interpreter (about a
quarter of the elements one ulp apart; cosine ~0.99999 in BF16).
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.weights import read_weight
from tpuc.passes.native.context import (
    DTYPE_F32,
    DTYPE_I32,
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
    is_float,
    quant_of,
)
from tpuc.passes.native.rules import native_rule
from tpuc.passes.native.three_ic import OTHER_READERS, fold_3ic, folded_filter
from tpuc.target.vendor.params import ConvGlobal, TensorSpec

ROUND_MODES = {
    "HalfAwayFromZero": 0,
    "HalfUp": 1,
    "HalfDown": 2,
    "HalfToEven": 3,
    "HalfToOdd": 4,
    "HalfTowardsZero": 5,
    "TowardsZero": 6,
    "Up": 8,
    "Down": 9,
}


def round_mode(op: Operation) -> int:
    """The backend's code of the op's requant round mode; a mode the kernels
    lack (DoubleRound: TFLite's double rounding, which the lowering picks
    for a pre-quantized TFLite model) is not expressible."""
    mode = op.value("round_mode") or "HalfAwayFromZero"
    if mode not in ROUND_MODES:
        raise NotExpressible(f"round_mode {mode}")
    return ROUND_MODES[mode]


NPU_NUM = 64  # lanes of BM1684X
BANK_BYTES = 16 * 1024  # a local-memory bank of one lane
EU_INT32 = 16  # int32 elements in one execution unit (64 bytes)
MAX_DIM = 65535


def raw_spec(addr: int, dtype: int, shape: tuple[int, ...]) -> bytes:
    """A tensor_spec_t of coefficient bytes the rule laid out itself."""
    s = TensorSpec()
    s.addr, s.dtype, s.dims = addr, dtype, len(shape)
    for i, d in enumerate(shape):
        s.shape[i] = d
    return s.to_bytes()


def conv_common(op: Operation, spec) -> None:
    """The geometry TPU-MLIR's Conv2D codegen fills for every dtype."""
    in_shape, out_shape = shape_of(op.operands[0]), shape_of(op.results[0])
    kernel = op.value("kernel_shape")
    if len(kernel) != 2 or len(in_shape) != 4:
        raise NotExpressible(f"a {len(kernel)}-D convolution (the native target has 2-D)")
    strides = op.value("strides") or [1, 1]
    if max(strides) > 15:
        raise NotExpressible(f"stride {strides} (above 15 needs a split kernel)")
    pads = op.value("pads") or [0, 0, 0, 0]
    dilations = op.value("dilations") or [1, 1]
    c = spec.common
    c.groups = op.value("group") or 1
    c.input_c, c.output_c = in_shape[1], out_shape[1]
    c.kh, c.kw = kernel
    c.stride_h, c.stride_w = strides
    c.dh, c.dw = dilations
    c.pad_h_t, c.pad_w_l, c.pad_h_b, c.pad_w_r = pads
    c.if_relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit")
    c.upper_limit = -1.0 if limit is None else float(limit)
    c.round_mode = round_mode(op)
    c.bias_sign = 1
    c.ipad_is_const = 1
    c.kzp_is_const = 1
    c.weight_is_coeff = 1


def is_depthwise(op: Operation) -> bool:
    """TPU-MLIR's is_dw: oc == ic == groups > 1."""
    ic, oc = shape_of(op.operands[0])[1], shape_of(op.results[0])[1]
    groups = op.value("group") or 1
    return groups > 1 and ic == oc == groups


def filter_data(op: Operation) -> np.ndarray:
    """The stored filter as [oc, ic/g, kh·kw] (weight-reorder's form)."""
    weight = op.operands[1].owner
    if not isinstance(weight, top.WeightOp):
        raise NotExpressible("a filter that is not a weight")
    oc = shape_of(op.results[0])[1]
    kh, kw = op.value("kernel_shape")
    data = np.asarray(read_weight(weight))
    return data.reshape(oc, -1, kh * kw)


def ic_blocks(filt: np.ndarray, lanes: int) -> np.ndarray:
    """`filter_reorder` (3ic off): [oc, ic, k] -> [oc, ceil(ic/lanes), k, lanes],
    input channels zero-padded to a multiple of `lanes`."""
    oc, ic, k = filt.shape
    blocks = -(-ic // lanes)
    padded = np.zeros((oc, blocks * lanes, k), filt.dtype)
    padded[:, :ic] = filt
    return padded.reshape(oc, blocks, lanes, k).transpose(0, 1, 3, 2).copy()


HALF_3IC = 0x10  # TPU-MLIR's flag on every 16-bit 3ic convolution


def half_3ic_mode(op: Operation) -> int:
    """TPU-MLIR 1.30.2's 3ic fold of an ungrouped F16/BF16 convolution
    (half_conv.three_ic_mode: the interpreter sums the folded units as the
    chip does); 0 for f32, grouped and depthwise ones."""
    from tpuc.kernels.half_conv import three_ic_mode

    if dtype_name(op.operands[0]) not in ("f16", "bf16") or (op.value("group") or 1) != 1:
        return 0
    kh, kw = op.value("kernel_shape")
    return three_ic_mode(shape_of(op.operands[0])[1], kh, kw)


def half_3ic_flag(op: Operation) -> int:
    """`use_3ic_optimize` of a half convolution: the mode, 0x10 (TPU-MLIR's
    16-bit flag), 0x30 when the input has other readers (the kernel then
    broadcasts it into a buffer instead of overwriting it)."""
    mode = half_3ic_mode(op)
    if not mode:
        return 0
    return mode | (OTHER_READERS if len(list(op.operands[0].uses)) > 1 else HALF_3IC)


def half_3ic_filter(op: Operation, filt: np.ndarray) -> np.ndarray:
    """The filter [oc, ic, k] folded for the op's half 3ic mode (as is for none)."""
    mode = half_3ic_mode(op)
    kh, kw = op.value("kernel_shape")
    return folded_filter(filt, mode, kh, kw) if mode else filt


def float_inputs(op: Operation, ctx: NativeContext, has_bias: bool) -> list[bytes]:
    """[input, filter, bias?] of a float convolution (see the module docstring)."""
    oc = shape_of(op.results[0])[1]
    dtype = dtype_name(op.operands[0])
    if op.operands[1].type.element_type != op.operands[0].type.element_type:
        raise NotExpressible("a filter of another type than the input")
    inputs = [ctx.spec(op.operands[0])]
    if dtype == "f32":
        inputs.append(ctx.spec(op.operands[1]))
    elif is_depthwise(op):
        kh, kw = op.value("kernel_shape")
        inputs.append(ctx.spec(op.operands[1], (1, oc, kh, kw)))
    else:
        filt = half_3ic_filter(op, filter_data(op))
        blocked = ic_blocks(filt, 32)
        width = blocked[0].size
        shape = (
            (1, oc, 1, width)
            if width <= MAX_DIM
            else (1, oc, blocked.shape[1], width // blocked.shape[1])
        )
        addr = ctx.coeffs.add(f"{op.names[0]}_filter_ic32", blocked)
        inputs.append(raw_spec(addr, dtype_code(op.operands[0]), shape))
    if has_bias:
        bias = op.operands[2]
        if dtype != "f32" and is_depthwise(op):
            values = np.asarray(read_weight(bias.owner), np.float32).reshape(oc)
            stored = to_float_storage(values, dtype)
            addr = ctx.coeffs.add(f"{op.names[0]}_bias_{dtype}", stored)
            inputs.append(raw_spec(addr, dtype_code(op.operands[0]), (1, oc, 1, 1)))
        else:
            inputs.append(ctx.spec(bias, (1, oc, 1, 1)))
    return inputs


def as_f32(value, dtype: str) -> np.ndarray:
    """A stored weight's values as f32 (bf16 weights are stored as their bit patterns)."""
    data = np.asarray(read_weight(value.owner))
    if dtype == "bf16" and data.dtype == np.uint16:
        return (data.astype(np.uint32) << 16).view(np.float32)
    return data.astype(np.float32)


def half_depthwise(op: Operation, ctx: NativeContext, spec, has_bias: bool) -> list[NativeCall]:
    """An F16/BF16 depthwise convolution in f32 between casts: the chip's
    half-float depthwise kernel rounds otherwise than tpuc (a quarter of the
    values one unit off); in f32 it computes tpuc's arithmetic (f32 sums,
    one rounding to the result type). Filter and bias go as f32 (exact)."""
    from tpuc.passes.native.f32 import between_casts

    oc = shape_of(op.results[0])[1]
    kh, kw = op.value("kernel_shape")
    filt = as_f32(op.operands[1], dtype_name(op.operands[1])).reshape(oc, 1, kh * kw)
    addr = ctx.coeffs.add(f"{op.names[0]}_filter_f32", filt)
    weights = [raw_spec(addr, DTYPE_F32, (1, oc, 1, kh * kw))]
    if has_bias:
        bias = as_f32(op.operands[2], dtype_name(op.operands[2])).reshape(oc)
        bias_addr = ctx.coeffs.add(f"{op.names[0]}_bias_f32", bias)
        weights.append(raw_spec(bias_addr, DTYPE_F32, (1, oc, 1, 1)))
    return between_casts(op, ctx, lambda wide_in, wide_out: [
        ctx.call("backend_api_conv_global", spec, op, [wide_in, *weights], [wide_out])
    ])  # fmt: skip


def to_float_storage(values: np.ndarray, dtype: str) -> np.ndarray:
    """f32 values rounded (to nearest even) to f16 or bf16 storage."""
    from tpuc.base.dtypes import to_storage
    from tpuc.base.numerics import to_bf16, to_f16

    return to_storage((to_bf16 if dtype == "bf16" else to_f16)(values), dtype)


def broadcast_channel(rows: np.ndarray, align: int = 0) -> np.ndarray:
    """`reshape_coeff_for_broadcast_channel`: [C, W] -> [min(C, 64), W'], lane j
    holding channels j, j+64, …; each chunk but the last padded to `align`."""
    channels, width = rows.shape
    if channels <= NPU_NUM:
        return rows
    chunks = -(-channels // NPU_NUM)
    step = -(-width // align) * align if align else width
    out = np.zeros((NPU_NUM, step * (chunks - 1) + width), rows.dtype)
    for c in range(channels):
        lane, chunk = c % NPU_NUM, c // NPU_NUM
        out[lane, chunk * step : chunk * step + width] = rows[c]
    return out


def coeff_table(op: Operation, channels: int) -> np.ndarray:
    """[channels, 3] int64: bias, multiplier, rshift per output channel, from
    weight-reorder's `coeff_merged` weight, or from the attributes and the
    int32 bias (a per-tensor requant weight-reorder left unmerged)."""
    if op.value("coeff_merged"):
        return np.asarray(read_weight(op.operands[2].owner)).astype(np.int64).reshape(channels, 3)
    bias = np.zeros(channels, np.int64)
    if not isinstance(op.operands[2].owner, top.NoneOp):
        values = np.asarray(read_weight(op.operands[2].owner)).astype(np.int64).reshape(-1)
        if values.size not in (1, channels):
            raise NotExpressible(f"a bias of {values.size} values for {channels} channels")
        bias = np.broadcast_to(values, (channels,))
    columns = [bias]
    for name, default in (("multiplier", 1), ("rshift", 0)):
        values = np.asarray(op.value(name) or [default], np.int64)
        if values.size not in (1, channels):
            raise NotExpressible(f"{values.size} {name}s for {channels} channels")
        columns.append(np.broadcast_to(values, (channels,)))
    return np.stack(columns, axis=1)


def input_zero_point_bias(op: Operation, table: np.ndarray, filt: np.ndarray) -> np.ndarray:
    """coeff_table's rows with −Z_in·Σw in the bias (TPU-MLIR's lowering folds
    it there): the chip sums q_in·q_w with padding worth Z_in (`ipad_value`),
    where tpuc's Conv2D/MatMul sum (q_in − Z_in)·q_w with padding worth 0.
    `filt` is [oc, ic/g, k] int8."""
    in_q = quant_of(op.operands[0])
    if in_q is None or not in_q.zero_point:
        return table
    table = table.copy()
    table[:, 0] -= in_q.zero_point * filt.astype(np.int64).reshape(len(table), -1).sum(axis=1)
    if np.any(np.abs(table[:, 0]) >= 1 << 31):
        raise NotExpressible("an INT8 bias beyond int32 once the input zero point is folded in")
    return table


def pack_int8(table: np.ndarray, zp: int, filt: np.ndarray, depthwise: bool,
              requant: bool = True) -> np.ndarray:  # fmt: skip
    """The merged coefficient [lanes, merge_w] int8 (TPU-MLIR reorder_8bit):
    per lane requant | bias (when any is nonzero) | filter, at offsets aligned
    to 4, 4 and 64 bytes (1 for depthwise). `table` is coeff_table's,
    `filt` [oc, ic/g, kh·kw] int8. Without `requant` (an int32 result,
    `merge_coeff = 1`): bias (always) | filter."""
    oc = table.shape[0]
    parts = []
    if requant:
        quant = np.stack([table[:, 1], -table[:, 2], np.full(oc, zp)], axis=1).astype(np.int32)
        parts.append(broadcast_channel(quant, EU_INT32).view(np.int8))
    if not requant or np.any(table[:, 0] != 0):
        bias = table[:, :1].astype(np.int32)
        parts.append(broadcast_channel(bias).view(np.int8))
    if not depthwise:
        filt = ic_blocks(filt, NPU_NUM)
    parts.append(broadcast_channel(filt.astype(np.int8).reshape(oc, -1)))
    filter_align = 1 if depthwise else 64
    offsets, end = [], 0
    for i, part in enumerate(parts):
        align = filter_align if i == len(parts) - 1 else 4
        end = -(-end // align) * align
        offsets.append(end)
        end += part.shape[1]
    coeff = np.zeros((parts[0].shape[0], end), np.int8)
    for part, offset in zip(parts, offsets, strict=True):
        coeff[:, offset : offset + part.shape[1]] = part
    return coeff


def coeff_shape(coeff: np.ndarray, depthwise: bool) -> tuple[int, ...]:
    """[1, lanes, 1, merge_w], or with merge_w split over h when above 65535
    (non-depthwise: by the largest divisor up to 64, as TPU-MLIR)."""
    lanes, width = coeff.shape
    if width <= MAX_DIM:
        return (1, lanes, 1, width)
    if not depthwise:
        rows = max(d for d in range(1, NPU_NUM + 1) if width % d == 0)
        if width // rows <= MAX_DIM:
            return (1, lanes, rows, width // rows)
    raise NotExpressible(f"a merged coefficient {width} bytes wide per lane")


def int8_spec(spec, op: Operation, table: np.ndarray, int32: bool = False) -> None:
    """The INT8 fields of conv_global_spec_t: an 8-bit result (`merge_coeff =
    2`), or (`int32`) the int32 accumulator plus bias (`merge_coeff = 1`, no
    ReLU: the float epilogue applies it)."""
    in_q = quant_of(op.operands[0])
    spec.common.is_asym = 1
    spec.common.ipad_value = in_q.zero_point if in_q is not None else 0
    if int32:
        spec.common.has_bias = 1
        spec.common.if_relu, spec.common.upper_limit = 0, -1.0
        spec.merge_coeff = 1
        return
    if quant_of(op.results[0]) is None or dtype_name(op.results[0]) not in ("i8", "u8"):
        raise NotExpressible("an INT8 convolution with a 32-bit result")
    spec.common.has_bias = bool(np.any(table[:, 0] != 0))
    spec.merge_coeff = 2
    if dtype_name(op.results[0]) == "u8":
        spec.common.if_relu = 1
    if spec.common.if_relu and is_depthwise(op) and quant_of(op.results[0]).zero_point:
        depthwise_relu(op, spec)


def depthwise_relu(op: Operation, spec) -> None:
    """The chip's INT8 depthwise kernel clamps a fused relu at stored 0, not
    at Z_out (measured: every value of an asymmetric conv -> relu ->
    depthwise conv -> relu chain differed). With Z_out the storage minimum
    (an asymmetric relu output) the saturation is the clamp, so the kernel
    runs without relu; any other zero point is refused."""
    out = quant_of(op.results[0])
    if out.zero_point != out.storage_min or spec.common.upper_limit >= 0:
        raise NotExpressible("an asymmetric INT8 depthwise convolution with a fused relu")
    spec.common.if_relu = 0


def int8_calls(op: Operation, ctx: NativeContext, int32: bool = False) -> list[NativeCall]:
    """An INT8 convolution with an 8-bit result, or (`int32`) its int32
    accumulator written to the result's address (int32 and f32 are both 4
    bytes; see epilogue.py). A grouped (not depthwise) one is an ordinary
    convolution per group and image over that group's channels (input
    [1, ic/g, H, W] and output [1, oc/g, OH, OW] slices of the NCHW
    tensors), each with its own merged coefficient."""
    (n, ic, h, w), (_, oc, oh, ow) = shape_of(op.operands[0]), shape_of(op.results[0])
    depthwise = is_depthwise(op)
    filt = filter_data(op)
    dense = depthwise and dense_pointwise(op)
    if dense:
        filt, depthwise = diagonal(filt), False
    parts = 1 if depthwise or dense else op.value("group") or 1
    icg, ocg = ic // parts, oc // parts
    table = input_zero_point_bias(op, coeff_table(op, oc), filt)
    zp = 0 if int32 else quant_of(op.results[0]).zero_point
    in_addr, out_addr = ctx.address(op.operands[0]), ctx.address(op.results[0])
    in_code = dtype_code(op.operands[0])
    out_code, out_bytes = (DTYPE_I32, 4) if int32 else (dtype_code(op.results[0]), 1)
    calls = []
    for g in range(parts):
        part = slice(g * ocg, (g + 1) * ocg)
        spec = ConvGlobal()
        conv_common(op, spec)
        if parts > 1 or dense:
            spec.common.groups, spec.common.input_c, spec.common.output_c = 1, icg, ocg
        int8_spec(spec, op, table[part], int32)
        folded = filt[part]
        if parts == 1 and not depthwise and not dense:
            spec.common.use_3ic_optimize, folded = fold_3ic(op, folded)
        coeff = pack_int8(table[part], zp, folded, depthwise, requant=not int32)
        addr = ctx.coeffs.add(f"{op.names[0]}_coeff_lanes_g{g}", coeff)
        weights = raw_spec(addr, dtype_code(op.operands[1]), coeff_shape(coeff, depthwise))
        images = [(0, n)] if parts == 1 else [(b, 1) for b in range(n)]
        for b, count in images:  # 8-bit input: one byte per element
            src = in_addr + (b * ic + g * icg) * h * w
            dst = out_addr + (b * oc + g * ocg) * oh * ow * out_bytes
            inputs = [raw_spec(src, in_code, (count, icg, h, w)), weights]
            outputs = [raw_spec(dst, out_code, (count, ocg, oh, ow))]
            calls.append(ctx.call("backend_api_conv_global", spec, op, inputs, outputs))
    return calls


def dense_pointwise(op: Operation) -> bool:
    """A symmetric INT8 depthwise 1x1 convolution (a per-channel scale) over
    at most 64 channels whose input plane per lane is above one 16 KiB
    bank runs as the ordinary 1x1 convolution with a diagonal filter, as
    TPU-MLIR writes it: the same int32 sums (the other products are 0) and
    requant. Measured whole nets (input cast, conv + relu, output cast),
    depthwise / dense vendor cycles: 24x160x160 207,605 / 150,310 (ppocr_det's
    BatchNorm after its transposed convolution), 24x136x136 160,876 /
    117,457, 16x160x160 138,401 / 103,741; at or below the bank the
    depthwise kernel is the cheaper: 24x128x128 97,954 / 104,098,
    24x96x96 55,291 / 58,747."""
    kernel = op.value("kernel_shape") or ()
    quants = (quant_of(op.operands[0]), quant_of(op.results[0]))
    n, c, h, w = shape_of(op.operands[0])
    return (
        list(kernel) == [1, 1]
        and not any(op.value("pads") or [0])
        and c <= NPU_NUM
        and n * h * w > BANK_BYTES
        and all(q is not None and q.zero_point == 0 for q in quants)
    )


def diagonal(filt: np.ndarray) -> np.ndarray:
    """A depthwise 1x1 filter [oc, 1, 1] as the dense [oc, oc, 1] it equals."""
    oc = filt.shape[0]
    dense = np.zeros((oc, oc, 1), filt.dtype)
    dense[np.arange(oc), np.arange(oc), 0] = filt[:, 0, 0]
    return dense


@contextmanager
def conv1d_as_2d(op: Operation):
    """A 1-D Conv2D seen as a 2-D one while its rule runs (Conv2D.cpp's
    `attr.dims == 1`: fix_shape of input and output to [n, c, l, 1]):
    kernel [k, 1], strides [s, 1], dilations [d, 1], pads [b, 0, e, 0]."""
    from xdsl.dialects.builtin import TensorType

    from tpuc.dialects.top.shape_infer import set_type

    values = (op.operands[0], op.results[0])
    saved_types = [v.type for v in values]
    names = ("kernel_shape", "strides", "pads", "dilations")
    saved_attrs = {k: op.attributes.get(k) for k in names}
    k = list(op.value("kernel_shape"))
    strides = list(op.value("strides") or [1])
    pads = list(op.value("pads") or [0, 0])
    dilations = list(op.value("dilations") or [1])
    try:
        for v in values:
            set_type(v, TensorType(v.type.element_type, [*shape_of(v), 1], v.type.encoding))
        op.set_value("kernel_shape", [k[0], 1])
        op.set_value("strides", [strides[0], 1])
        op.set_value("pads", [pads[0], 0, pads[1], 0])
        op.set_value("dilations", [dilations[0], 1])
        yield op
    finally:
        for v, t in zip(values, saved_types, strict=True):
            set_type(v, t)
        for key, attr in saved_attrs.items():
            if attr is None:
                op.attributes.pop(key, None)
            else:
                op.attributes[key] = attr


@native_rule(tpu.Conv2DOp)
def conv2d(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    if len(op.value("kernel_shape") or ()) == 1 and len(shape_of(op.operands[0])) == 3:
        with conv1d_as_2d(op):
            return conv2d(op, ctx)
    spec = ConvGlobal()
    conv_common(op, spec)
    if is_float(op.operands[0]) and is_float(op.results[0]):
        has_bias = not isinstance(op.operands[2].owner, top.NoneOp)
        spec.common.has_bias = has_bias
        if is_depthwise(op) and dtype_name(op.operands[0]) != "f32":
            return half_depthwise(op, ctx, spec, has_bias)
        inputs = float_inputs(op, ctx, has_bias)
        spec.common.use_3ic_optimize = half_3ic_flag(op)
    elif quant_of(op.operands[0]) is not None:
        if is_float(op.results[0]):
            from tpuc.passes.native.epilogue import conv_float_epilogue

            return conv_float_epilogue(op, ctx)
        return int8_calls(op, ctx)
    else:
        raise NotExpressible("a convolution of these types")
    return [ctx.call("backend_api_conv_global", spec, op, inputs=inputs)]
