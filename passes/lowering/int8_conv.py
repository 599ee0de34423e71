"""INT8 lowering of the conv / matmul / pool / reduce family.

Filters are quantized symmetrically per output channel (S_w[c] = max|w_c|/127),
biases become int32 at scale S_in·S_w[c], and the float factor that maps the
accumulator to the output, S_in·S_w[c]/S_out, becomes one multiplier/rshift
per channel of the chip's multiplier width. The integer meaning of each TPU
op is in dialects/tpu/ops.py. Forms that the integers cannot express exactly
(an average over windows of different sizes, operands that are not weights
where a weight is needed) decline, and run in the chip's float fallback.
Scale and BatchNorm become depthwise 1x1 convolutions, so they need no
integer op of their own.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, SSAValue

from tpuc.base.errors import TpucError
from tpuc.base.numerics import multiplier_rshift, round_half_away
from tpuc.dialects import top, tpu
from tpuc.dialects.base import TensorOp
from tpuc.ir.core import element_of
from tpuc.kernels.pool_geometry import PoolGeometry
from tpuc.passes.canonicalize.common import is_pre_quantized
from tpuc.passes.lowering.context import Lowering
from tpuc.passes.lowering.int8_eltwise import u8_multiplier_form, u8_requant_attrs
from tpuc.passes.lowering.registry import lowering

INT8 = ("INT8",)
QMAX_W = 127
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
BIAS_LIMIT = 2.0**30
"""Largest |bias| a channel's weight scale is allowed to produce: a channel
whose bias would not fit gets a coarser weight scale instead of a clipped
bias (leaves int32 headroom for the products added to it)."""

# --- quantization of weights -------------------------------------------------------


def channel_absmax(w: np.ndarray, keep: Sequence[int]) -> np.ndarray:
    """max|w| over every axis except `keep` (float64, keepdims). abs and max
    are exact, so f16/f32 filters are reduced before widening."""
    others = tuple(i for i in range(w.ndim) if i not in keep)
    if w.dtype not in (np.float16, np.float32):
        w = w.astype(np.float64)
    return np.abs(w).max(axis=others, keepdims=True, initial=0.0).astype(np.float64)


def weight_scales(absmax: np.ndarray, bias_bound: np.ndarray | None = None) -> np.ndarray:
    """Per-channel scales absmax/127 (1 for an all-zero channel); with
    `bias_bound` (|b|/S_in per channel, same shape), no smaller than what
    keeps the int32 bias within BIAS_LIMIT."""
    scale = np.where(absmax > 0, absmax / QMAX_W, 1.0)
    if bias_bound is not None:
        scale = np.maximum(scale, bias_bound / BIAS_LIMIT)
    return scale


def quantize_weight(w: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """int8 = clip(round_half_away(w/S), -127, 127), S broadcast against w."""
    q = w.astype(np.float64)
    q /= scale
    q = round_half_away(q)
    return np.clip(q, -QMAX_W, QMAX_W, out=q).astype(np.int8)


def quantize_bias(b: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """int32 = round_half_away(b/scale), clipped to int32."""
    q = round_half_away(b.astype(np.float64) / scale)
    return np.clip(q, INT32_MIN, INT32_MAX).astype(np.int32)


def requant_attrs(lw: Lowering, scales: Sequence[float] | np.ndarray) -> dict:
    """multiplier/rshift lists (one per scale) of the chip's width, and its
    rounding."""
    bits = lw.chip.multiplier_bits
    pairs = [_multiplier_rshift(float(s), bits) for s in np.ravel(scales)]
    return {
        "multiplier": [m for m, _ in pairs],
        "rshift": [r for _, r in pairs],
        "round_mode": lw.chip.round_mode,
    }


@functools.lru_cache(maxsize=1 << 17)
def _multiplier_rshift(scale: float, bits: int) -> tuple[int, int]:
    """multiplier_rshift, remembered: lowering a module again (run_qtable's
    candidates) meets the same per-channel scales."""
    return multiplier_rshift(scale, bits)


def model_scale(lw: Lowering, scale):
    """In a pre-quantized module, a scale rounded to the float32 the model
    stores (tpuc's come back from ranges and absmax/127 within a few ulps):
    the 31-bit multipliers then equal TFLite's, which computes them in
    double from the float32 scales."""
    if not is_pre_quantized(lw.op):
        return scale
    return np.asarray(scale, np.float64).astype(np.float32).astype(np.float64)


def model_weight_scales(lw: Lowering, w: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """In a pre-quantized module, the weight scales that give back the
    model's own int8 weights: absmax/127 per channel (rounded to float32)
    when they reproduce every dequantized value exactly, else one scale for
    the whole tensor (a per-tensor quantized filter, whose channels do not
    all reach ±127) when that does."""
    scale = model_scale(lw, scale)
    if not is_pre_quantized(lw.op) or _reproduces(w, scale):
        return scale
    whole = model_scale(lw, np.full_like(scale, float(np.abs(w).max(initial=0.0)) / QMAX_W))
    return whole if whole.size and whole.flat[0] > 0 and _reproduces(w, whole) else scale


def _reproduces(w: np.ndarray, scale: np.ndarray) -> bool:
    q = np.clip(round_half_away(w.astype(np.float64) / scale), -QMAX_W, QMAX_W)
    return bool(np.array_equal((q * scale).astype(np.float32), w.astype(np.float32)))


def epilogue(lw: Lowering, s_acc: Sequence[float] | np.ndarray) -> dict:
    """`build` arguments for the accumulator at real scales `s_acc`:
    requantized to the output's int8 scale, or (`Lowering.float_epilogue`)
    dequantized straight to the float type its readers run in. A
    pre-quantized model's op keeps its int8 output: that rounding and
    clamping to the model's own output scale is part of the model (a Keras
    FC's logits saturate at the int8 range before its softmax)."""
    element = None if is_pre_quantized(lw.op) else lw.float_epilogue()
    if element is None:
        s_out = model_scale(lw, lw.out_quant(0).scale)
        attrs = requant_attrs(lw, np.asarray(s_acc) / s_out)
        if lw.chip.multiplier_bits == 32 and is_pre_quantized(lw.op):
            # a TFLite model's own scales: its runtime's double rounding,
            # which the chip's 32-bit requant also offers (one rounding
            # differs in ~0.5% of the elements, then grows with depth)
            attrs["round_mode"] = "DoubleRound"
        return {"attrs": attrs}
    return {"attrs": requant_attrs(lw, s_acc), "result_types": [lw.result_type(0, element)]}


def channel_vector(lw: Lowering, b: np.ndarray, channels: int, what: str) -> np.ndarray:
    """A per-channel parameter as a [channels] vector (size 1 broadcasts)."""
    flat = np.asarray(b, np.float64).reshape(-1)
    if flat.size not in (1, channels):
        raise TpucError(
            f"{lw.op.name} '{lw.op.names[0]}': {what} has {flat.size} values "
            f"for {channels} channels"
        )
    return np.broadcast_to(flat, (channels,))


def bias_bound(lw: Lowering, index: int, channels: int, s_in: float) -> np.ndarray | None:
    """|b_c|/S_in of the bias operand `index`, None when it is absent."""
    if lw.is_none(index):
        return None
    return np.abs(channel_vector(lw, lw.weight(index), channels, "bias")) / s_in


# --- predicates: which ops have an exact integer form --------------------------------------


def _is(op: Operation, index: int, *kinds: type) -> bool:
    return isinstance(op.operands[index].owner, kinds)


def weighted_filter(op: Operation) -> bool:
    """Conv/Deconv: filter a weight, bias a weight or absent."""
    return _is(op, 1, top.WeightOp) and _is(op, 2, top.WeightOp, top.NoneOp)


def weight_or_none_bias(op: Operation) -> bool:
    """MatMul: any operands, but a bias must be a weight (or absent)."""
    return _is(op, 2, top.WeightOp, top.NoneOp)


def static_shape(value: SSAValue) -> tuple[int, ...] | None:
    t = value.type
    if not isinstance(t, TensorType) or any(d < 0 for d in t.get_shape()):
        return None
    return tuple(t.get_shape())


def uniform_windows(op: Operation) -> bool:
    """AvgPool: every window averages kernel-area elements (no excluded
    padding, no ceil_mode overhang), so one multiplier fits all."""
    shape = static_shape(op.operands[0])
    if shape is None:
        return False
    geometry = PoolGeometry.of(op, np.broadcast_to(np.float32(0), shape))
    counts = geometry.counts(bool(op.value("count_include_pad")))  # type: ignore[attr-defined]
    return bool(np.all(counts == math.prod(geometry.kernel)))


def whole_input_window(op: Operation) -> bool:
    """AvgPool: one window that holds the whole input, its padding excluded
    from the count (inception_v1's 7x7 pool, pads [0, 0, 1, 1], over 6x6):
    the input's global average, which one multiplier fits."""
    shape = static_shape(op.operands[0])
    if shape is None or op.value("count_include_pad"):  # type: ignore[attr-defined]
        return False
    geometry = PoolGeometry.of(op, np.broadcast_to(np.float32(0), shape))
    counts = geometry.counts(False)
    return counts.size == 1 and bool(counts.reshape(-1)[0] == math.prod(geometry.sizes))


def int8_average(op: Operation) -> bool:
    return uniform_windows(op) or whole_input_window(op)


SUM_MODES = ("ReduceMean", "ReduceSum")
SHARED_TYPE_MODES = ("ReduceMax", "ReduceMin")


def integer_reduce(op: Operation) -> bool:
    mode = op.value("mode")  # type: ignore[attr-defined]
    if mode in SHARED_TYPE_MODES:
        return True
    return mode in SUM_MODES and static_shape(op.operands[0]) is not None


def per_channel_affine(op: Operation) -> bool:
    """Scale/BatchNorm: per-channel parameters all weights (or absent), on an
    input with 1-3 spatial dims (the depthwise conv's kernel)."""
    shape = static_shape(op.operands[0])
    if shape is None or not 3 <= len(shape) <= 5:
        return False
    return all(
        _is(op, i, top.WeightOp) or (i > 1 and _is(op, i, top.NoneOp))
        for i in range(1, len(op.operands))
    )


# --- convolutions ---------------------------------------------------------------------------


def conv_like(lw: Lowering, cls: type[TensorOp], channel_axes: Sequence[int], view) -> Operation:
    """Conv/Deconv with a per-output-channel int8 filter. `view` reshapes the
    filter so that `channel_axes` (ascending) enumerate the output channels
    in order; the int8 filter is stored in the original layout."""
    x = lw.operand(0)
    s_in = float(model_scale(lw, lw.quant(0).scale))
    w = lw.weight(1)
    wv = view(w)
    absmax = channel_absmax(wv, channel_axes)
    channels = absmax.size
    bound = None if is_pre_quantized(lw.op) else bias_bound(lw, 2, channels, s_in)
    scale = weight_scales(absmax, None if bound is None else bound.reshape(absmax.shape))
    scale = model_weight_scales(lw, wv, scale)
    q_w = quantize_weight(wv, scale).reshape(w.shape)
    s_w = scale.reshape(-1)
    filt = lw.int_weight("filter_i8", q_w, "int8")
    bias = lw.operand(2)
    if not lw.is_none(2):
        b = channel_vector(lw, lw.weight(2), channels, "bias")
        bias = lw.int_weight("bias_i32", quantize_bias(b, s_in * s_w), "int32")
    return lw.build(cls, [x, filt, bias], **epilogue(lw, s_in * s_w))


@lowering(top.ConvOp, modes=INT8, when=weighted_filter)
def lower_conv(lw: Lowering):
    """Filter [oc, ic/group, *k]: axis 0 is the output channel."""
    return conv_like(lw, tpu.Conv2DOp, (0,), lambda w: w)


@lowering(top.DeconvOp, modes=INT8, when=weighted_filter)
def lower_deconv(lw: Lowering):
    """Filter [ic, oc/group, *k]: output channel g·(oc/group) + o is the
    slice w[g·icg:(g+1)·icg, o], so the filter is viewed [G, icg, ocg, K]."""
    group = int(lw.op.value("group") or 1)

    def view(w: np.ndarray) -> np.ndarray:
        return w.reshape(group, w.shape[0] // group, w.shape[1], -1)

    return conv_like(lw, tpu.DeconvOp, (0, 2), view)


# --- matmul ---------------------------------------------------------------------------------


@lowering(top.MatMulOp, modes=INT8, when=weight_or_none_bias)
def lower_matmul(lw: Lowering):
    """A weight right operand (rank >= 2) is quantized per output column
    (the product's last axis); otherwise both operands are per-tensor
    quantized and one multiplier serves."""
    if lw.is_weight(1) and len(lw.operand_shape(1)) >= 2:
        return matmul_weight(lw)
    left, right = lw.operand(0), lw.operand(1)
    s_acc = lw.quant(0).scale * lw.quant(1).scale
    bias = lw.operand(2)
    if not lw.is_none(2):
        bias = lw.int_weight("bias_i32", quantize_bias(lw.weight(2), np.float64(s_acc)), "int32")
    return lw.build(tpu.MatMulOp, [left, right, bias], **epilogue(lw, [s_acc]))


def column_bias(lw: Lowering, columns: int) -> np.ndarray:
    """The bias broadcast to end in `columns` (float64)."""
    b = lw.weight(2).astype(np.float64)
    try:
        shape = np.broadcast_shapes(b.shape, (columns,))
    except ValueError:
        raise TpucError(
            f"top.MatMul '{lw.op.names[0]}': bias {list(b.shape)} does not fit {columns} columns"
        ) from None
    return np.broadcast_to(b, shape)


def matmul_weight(lw: Lowering) -> Operation:
    """Right weight [..., K, N] ([..., N, K] when right_transpose): one
    scale per column n, shared by all batches."""
    x = lw.operand(0)
    s_in = float(model_scale(lw, lw.quant(0).scale))
    w = lw.weight(1)
    axis = w.ndim - 2 if lw.op.value("right_transpose") else w.ndim - 1
    absmax = channel_absmax(w, (axis,))
    columns = absmax.size
    bias, b, bound = lw.operand(2), None, None
    if not lw.is_none(2):
        b = column_bias(lw, columns)
        bound = np.abs(b).reshape(-1, columns).max(axis=0) / s_in
    shape = [1] * w.ndim
    shape[axis] = columns
    if is_pre_quantized(lw.op):
        bound = None  # the model's scales, its int32 biases as they are
    scale = weight_scales(absmax, None if bound is None else bound.reshape(shape))
    scale = model_weight_scales(lw, w, scale)
    s_w = scale.reshape(-1)
    filt = lw.int_weight("filter_i8", quantize_weight(w, scale), "int8")
    if b is not None:
        bias = lw.int_weight("bias_i32", quantize_bias(b, s_in * s_w), "int32")
    built = epilogue(lw, s_in * s_w)
    if (
        lw.chip.multiplier_bits == 32
        and "result_types" not in built
        and not is_pre_quantized(lw.op)
    ):
        attrs = built["attrs"]
        attrs.update(one_rshift(attrs["multiplier"], attrs["rshift"]))
    return lw.build(tpu.MatMulOp, [x, filt, bias], **built)


ONE_RSHIFT_BITS = 8
"""The most multiplier bits one right shift may cost a matmul's columns
(23 of 31 left: a relative error below 2**-22, far under int8 rounding)."""


def one_rshift(multipliers: list[int], rshifts: list[int]) -> dict:
    """Per-column multipliers over the smallest right shift s (m rounded
    to m / 2**(r − s)): bm1684x's fc call takes the columns' multipliers
    with one shift, the requant in the call (TPU-MLIR's per-channel MatMul
    lowering, its `fuse_rq`), where a shift per column costs two transposes
    and a requant pass (~55k cycles at 64x256x256 against ~3.4k). Loses
    r − s of the multiplier's 31 bits: kept per column when that exceeds
    `ONE_RSHIFT_BITS` (a column of near-zero weights)."""
    if len(set(rshifts)) <= 1 or max(rshifts) - min(rshifts) > ONE_RSHIFT_BITS:
        return {}
    s = min(rshifts)
    scaled = [(m + (1 << (r - s - 1)) >> (r - s)) if r > s else m
              for m, r in zip(multipliers, rshifts, strict=True)]  # fmt: skip
    return {"multiplier": scaled, "rshift": [s] * len(rshifts)}


# --- pooling and reductions -----------------------------------------------------------------


@lowering(top.AvgPoolOp, modes=INT8, when=int8_average)
def lower_avg_pool(lw: Lowering):
    """acc = Σ_window (q − Z_in); y = requant(acc, S_in/(S_out·k)). One
    window over the whole input becomes the global pool it is (kernel the
    input's size, no padding), as TPU-MLIR keeps it in INT8."""
    x = lw.operand(0)
    attrs: dict = {"pool_mode": "Avg"}
    if not uniform_windows(lw.op):
        sizes = list(lw.operand_shape(0)[2:])
        attrs.update(kernel_shape=sizes, strides=[1] * len(sizes), pads=[0] * (2 * len(sizes)))
        attrs["ceil_mode"] = False
    k = math.prod(attrs.get("kernel_shape") or lw.op.value("kernel_shape"))
    scale = lw.quant(0).scale / (lw.out_quant(0).scale * k)
    if u8_multiplier_form(lw):  # bm168x's pooling backend: u8 multiplier, half up
        return lw.build(tpu.Pool2DOp, [x], {**attrs, **u8_requant_attrs(lw, scale)})
    return lw.build(tpu.Pool2DOp, [x], {**attrs, **requant_attrs(lw, [scale])})


@lowering(top.MaxPoolOp, modes=INT8)
def lower_max_pool(lw: Lowering):
    """The max of stored integers: the output keeps the input's type."""
    x = lw.operand(0)
    return lw.build(
        tpu.Pool2DOp, [x], {"pool_mode": "Max"}, result_types=[lw.result_type(0, element_of(x))]
    )


@lowering(top.ReduceOp, modes=INT8, when=integer_reduce)
def lower_reduce(lw: Lowering):
    """Mean/Sum: acc = Σ (q − Z_in), requant by S_in/(S_out·count) (count 1
    for Sum); Max/Min on stored integers, sharing the input's type."""
    x = lw.operand(0)
    mode = lw.op.value("mode")
    if mode in SHARED_TYPE_MODES:
        return lw.build(tpu.ReduceOp, [x], result_types=[lw.result_type(0, element_of(x))])
    count = 1
    if mode == "ReduceMean":
        count = math.prod(lw.operand_shape(0)) // max(1, math.prod(lw.shape(0)))
    scale = lw.quant(0).scale / (lw.out_quant(0).scale * count)
    return lw.build(tpu.ReduceOp, [x], requant_attrs(lw, [scale]))


# --- per-channel affine ops as depthwise convolutions ----------------------------------------


def depthwise_affine(lw: Lowering, s: np.ndarray, b: np.ndarray | None) -> Operation:
    """y = s[c]·x + b[c] as a 1x1 depthwise Conv2D (group = C): one int8
    filter value per channel, int32 bias, per-channel requant."""
    x = lw.operand(0)
    s_in = lw.quant(0).scale
    shape = lw.operand_shape(0)
    channels, spatial = shape[1], len(shape) - 2
    s = channel_vector(lw, s, channels, "scale")
    bound = None if b is None else np.abs(channel_vector(lw, b, channels, "bias")) / s_in
    s_w = weight_scales(np.abs(s), bound)
    q_w = quantize_weight(s, s_w).reshape((channels, 1) + (1,) * spatial)
    filt = lw.int_weight("filter_i8", q_w, "int8")
    bias = lw.op.operands[2]  # Scale's top.None when there is no bias
    if b is not None:
        b = channel_vector(lw, b, channels, "bias")
        bias = lw.int_weight("bias_i32", quantize_bias(b, s_in * s_w), "int32")
    attrs = {
        "kernel_shape": [1] * spatial,
        "strides": [1] * spatial,
        "pads": [0] * (2 * spatial),
        "dilations": [1] * spatial,
        "group": channels,
        "do_relu": lw.op.value("do_relu"),
        "relu_limit": lw.op.value("relu_limit"),
        **requant_attrs(lw, s_in * s_w / lw.out_quant(0).scale),
    }
    return lw.build(tpu.Conv2DOp, [x, filt, bias], attrs, copy_attributes=False)


@lowering(top.ScaleOp, modes=INT8, when=per_channel_affine)
def lower_scale(lw: Lowering):
    b = None if lw.is_none(2) else lw.weight(2)
    return depthwise_affine(lw, lw.weight(1), b)


@lowering(top.BatchNormOp, modes=INT8, when=per_channel_affine)
def lower_batch_norm(lw: Lowering):
    """s = gamma/sqrt(var + eps), b = beta − mean·s (as the TOP kernel)."""
    mean, var = lw.weight(1).astype(np.float64), lw.weight(2).astype(np.float64)
    s = 1.0 / np.sqrt(var + lw.op.value("epsilon"))
    if not lw.is_none(3):
        s = s * lw.weight(3)
    b = -mean * s
    if not lw.is_none(4):
        b = b + lw.weight(4)
    return depthwise_affine(lw, s, b)
