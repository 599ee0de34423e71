"""Convolutions, fully connected layers and pooling.

TFLite's SAME/VALID padding is resolved here exactly as TFLite computes it
(`ComputePaddingHeightWidth`): the effective kernel is (k-1)*d+1, SAME gives
out = ceil(in/s), the total padding (out-1)*s + k_eff - in (at least 0) is
split with the odd pixel at the bottom/right. Weights are OHWI (conv),
1HWC (depthwise), OHWI (transpose conv) and [out, in] (fully connected).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from tpuc.dialects import top
from tpuc.frontends.tflite.converter import TfliteConverter
from tpuc.frontends.tflite.model import TOperator
from tpuc.frontends.tflite.registry import converter

SAME, VALID = 0, 1


def same_valid_pads(
    padding: int, spatial: Sequence[int], kernel: Sequence[int], strides, dilations
) -> list[int]:
    """TOP pads (all begins, then all ends) for TFLite's padding mode."""
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        k_eff = (k - 1) * d + 1
        out = -(-size // s) if padding == SAME else -(-(size - k_eff + 1) // s)
        total = max((out - 1) * s + k_eff - size, 0) if padding == SAME else 0
        begins.append(total // 2)
        ends.append(total - total // 2)
    return begins + ends


def _spatial(cv: TfliteConverter, index: int) -> tuple[int, int]:
    shape = cv.shape(index)
    return shape[1], shape[2]


def _bias(cv: TfliteConverter, op: TOperator, position: int):
    if len(op.inputs) <= position or op.inputs[position] < 0:
        return cv.none()
    return cv.weight(
        f"{cv.tensor(op.inputs[position]).name}",
        cv.float_const(op.inputs[position], op, "the bias"),
    )


@converter("CONV_2D")
def convert_conv(cv: TfliteConverter, op: TOperator) -> None:
    o = op.options
    w = cv.float_const(op.inputs[1], op, "the filter")  # OHWI
    kernel = [int(w.shape[1]), int(w.shape[2])]
    strides = [int(o.StrideH()), int(o.StrideW())]
    dilations = [int(o.DilationHFactor()), int(o.DilationWFactor())]
    channels = cv.shape(op.inputs[0])[3]
    if channels % w.shape[3]:
        raise cv.error(
            op, f"input channels {channels} are not a multiple of the filter's {w.shape[3]}"
        )
    params = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": same_valid_pads(
            o.Padding(), _spatial(cv, op.inputs[0]), kernel, strides, dilations
        ),
        "dilations": dilations,
        "group": channels // int(w.shape[3]),
    }
    filt = cv.weight(cv.tensor(op.inputs[1]).name, w.transpose(0, 3, 1, 2))
    operands = [cv.value(op.inputs[0]), filt, _bias(cv, op, 2)]
    cv.emit(top.ConvOp, operands, op.outputs[0], params, cv.fused_act(op), op)


@converter("DEPTHWISE_CONV_2D")
def convert_depthwise(cv: TfliteConverter, op: TOperator) -> None:
    o = op.options
    w = cv.float_const(op.inputs[1], op, "the filter")  # 1HW(C*M)
    kernel = [int(w.shape[1]), int(w.shape[2])]
    strides = [int(o.StrideH()), int(o.StrideW())]
    dilations = [int(o.DilationHFactor()), int(o.DilationWFactor())]
    channels = cv.shape(op.inputs[0])[3]
    params = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": same_valid_pads(
            o.Padding(), _spatial(cv, op.inputs[0]), kernel, strides, dilations
        ),
        "dilations": dilations,
        "group": channels,
    }
    filt = cv.weight(cv.tensor(op.inputs[1]).name, w.transpose(3, 0, 1, 2))  # [C*M, 1, H, W]
    operands = [cv.value(op.inputs[0]), filt, _bias(cv, op, 2)]
    cv.emit(top.ConvOp, operands, op.outputs[0], params, cv.fused_act(op), op)


def _deconv(cv, op, x: int, w: np.ndarray, bias, padding: int, strides, act: int) -> None:
    """Transposed conv to the output tensor's size; TFLite pads as the
    convolution that maps the output back to the input would."""
    kernel = [int(w.shape[1]), int(w.shape[2])]
    out_shape = cv.model.tensor(op.outputs[0]).shape
    in_hw = _spatial(cv, x)
    pads_begin, pads_end, out_pad = [], [], []
    for size, k, s, out in zip(in_hw, kernel, strides, out_shape[1:3], strict=True):
        total = max((size - 1) * s + k - out, 0) if padding == SAME else 0
        begin = total // 2
        end = (size - 1) * s + k - out - begin
        pads_begin.append(begin)
        pads_end.append(max(end, 0))
        out_pad.append(max(-end, 0))
    params = {
        "kernel_shape": kernel,
        "strides": list(strides),
        "pads": pads_begin + pads_end,
        "dilations": [1, 1],
        "group": 1,
        "output_padding": out_pad,
    }
    filt = cv.weight(cv.tensor(op.inputs[1]).name, w.transpose(3, 0, 1, 2))  # [I, O, H, W]
    cv.emit(top.DeconvOp, [cv.value(x), filt, bias], op.outputs[0], params, act, op)


@converter("TRANSPOSE_CONV")
def convert_transpose_conv(cv: TfliteConverter, op: TOperator) -> None:
    o = op.options
    w = cv.float_const(op.inputs[1], op, "the filter")  # OHWI
    strides = [int(o.StrideH()), int(o.StrideW())]
    act = int(o.FusedActivationFunction()) if hasattr(o, "FusedActivationFunction") else 0
    _deconv(cv, op, op.inputs[2], w, _bias(cv, op, 3), o.Padding(), strides, act)


@converter("CUSTOM:Convolution2DTransposeBias")
def convert_mediapipe_deconv(cv: TfliteConverter, op: TOperator) -> None:
    """MediaPipe's transpose conv with bias; its custom options are a raw
    TfLiteTransposeConvParams {padding (1 SAME, 2 VALID), stride_w, stride_h}."""
    if len(op.custom_options) < 12:
        raise cv.error(op, "custom options too short for TfLiteTransposeConvParams")
    padding, stride_w, stride_h = struct.unpack_from("<iii", op.custom_options)
    if padding not in (1, 2):
        raise cv.error(op, f"unknown padding {padding}")
    w = cv.float_const(op.inputs[1], op, "the filter")
    bias = _bias(cv, op, 2)
    _deconv(cv, op, op.inputs[0], w, bias, SAME if padding == 1 else VALID, [stride_h, stride_w], 0)


@converter("FULLY_CONNECTED")
def convert_fully_connected(cv: TfliteConverter, op: TOperator) -> None:
    o = op.options
    if o is not None and int(o.WeightsFormat()) != 0:
        raise cv.error(op, "shuffled weights are not supported")
    w = cv.float_const(op.inputs[1], op, "the weights")  # [out, in]
    x = op.inputs[0]
    value = cv.nhwc(x)
    shape = cv.shape(x)
    keep = bool(o.KeepNumDims()) if o is not None else False
    depth = int(w.shape[1])
    if not keep and (len(shape) != 2 or shape[-1] != depth):
        rows = int(np.prod(shape)) // depth
        value = cv.emit_temp(
            top.ReshapeOp,
            [value],
            f"{cv.tensor(x).name}_flat",
            {"shape": [rows, depth]},
            [rows, depth],
        )
    right = cv.weight(cv.tensor(op.inputs[1]).name, w.T)
    operands = [value, right, _bias(cv, op, 2)]
    cv.emit(
        top.MatMulOp,
        operands,
        op.outputs[0],
        {},
        cv.fused_act(op),
        op,
        nhwc=cv.rank(op.outputs[0]) == 4,
    )


def _pool(cv: TfliteConverter, op: TOperator, cls, extra: dict) -> None:
    o = op.options
    kernel = [int(o.FilterHeight()), int(o.FilterWidth())]
    strides = [int(o.StrideH()), int(o.StrideW())]
    pads = same_valid_pads(o.Padding(), _spatial(cv, op.inputs[0]), kernel, strides, [1, 1])
    params = {"kernel_shape": kernel, "strides": strides, "pads": pads, **extra}
    cv.emit(cls, [cv.value(op.inputs[0])], op.outputs[0], params, cv.fused_act(op), op)


@converter("MAX_POOL_2D")
def convert_max_pool(cv: TfliteConverter, op: TOperator) -> None:
    _pool(cv, op, top.MaxPoolOp, {})


@converter("AVERAGE_POOL_2D")
def convert_avg_pool(cv: TfliteConverter, op: TOperator) -> None:
    """TFLite averages over the pixels inside the image only."""
    _pool(cv, op, top.AvgPoolOp, {"count_include_pad": False})
