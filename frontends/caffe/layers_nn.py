"""Convolution, pooling, inner product, normalization and activations.

Output shapes follow Caffe's layer code (conv_layer.cpp, pooling_layer.cpp,
inner_product_layer.cpp ...), not ONNX's rules: the converter computes
them and the TOP op is built with that static type.
"""

from __future__ import annotations

import numpy as np

from tpuc.dialects import top
from tpuc.frontends.caffe.converter import CaffeConverter
from tpuc.frontends.caffe.model import Layer
from tpuc.frontends.caffe.registry import converter


def _pair(cv: CaffeConverter, layer: Layer, values, h, w, default: int, what: str) -> list[int]:
    """(h, w) from a repeated/single field and its `_h`/`_w` overrides."""
    values = [int(v) for v in values] if hasattr(values, "__len__") else [int(values)]
    if h is not None or w is not None:
        if h is None or w is None:
            raise cv.error(layer, f"{what}_h and {what}_w must be given together")
        return [int(h), int(w)]
    if not values:
        return [default, default]
    if len(values) == 1:
        return values * 2
    if len(values) == 2:
        return values
    raise cv.error(layer, f"{len(values)} {what} values: tpuc converts 2-D layers only")


def _opt(param, name: str):
    return getattr(param, name) if param.HasField(name) else None


def _conv_geometry(cv: CaffeConverter, layer: Layer):
    p = layer.param.convolution_param
    kernel = _pair(cv, layer, p.kernel_size, _opt(p, "kernel_h"), _opt(p, "kernel_w"), 0, "kernel")
    if min(kernel) <= 0:
        raise cv.error(layer, "kernel size missing")
    stride = _pair(cv, layer, p.stride, _opt(p, "stride_h"), _opt(p, "stride_w"), 1, "stride")
    pad_h = p.pad_h if p.HasField("pad_h") else None
    pad_w = p.pad_w if p.HasField("pad_w") else None
    pad = _pair(cv, layer, p.pad, pad_h, pad_w, 0, "pad")
    dilation = _pair(cv, layer, p.dilation, None, None, 1, "dilation")
    if p.axis != 1:
        raise cv.error(layer, f"axis {p.axis}: only the channel axis 1 is supported")
    return p, kernel, stride, pad, dilation


def _conv_input(cv: CaffeConverter, layer: Layer) -> tuple[int, ...]:
    shape = cv.shape(layer.bottoms[0])
    if len(shape) != 4:
        raise cv.error(layer, f"input shape {list(shape)}: tpuc converts 4-D (NCHW) inputs only")
    return shape


@converter("Convolution", "ConvolutionDepthwise")
def convert_convolution(cv: CaffeConverter, layer: Layer) -> None:
    p, kernel, stride, pad, dilation = _conv_geometry(cv, layer)
    n, c, h, w = _conv_input(cv, layer)
    oc = int(p.num_output)
    group = c if layer.type == "ConvolutionDepthwise" else int(p.group)
    if group <= 0 or c % group or oc % group:
        raise cv.error(layer, f"group {group} does not divide {c} inputs and {oc} outputs")
    out = [
        (size + 2 * pd - (d * (k - 1) + 1)) // s + 1
        for size, k, s, pd, d in zip((h, w), kernel, stride, pad, dilation, strict=True)
    ]
    if min(out) <= 0:
        raise cv.error(layer, f"kernel {kernel} does not fit the padded input {[h, w]}")
    shapes = [[oc, c // group, *kernel]] + ([[oc]] if p.bias_term else [])
    blobs = cv.blobs(layer, shapes)
    bias = cv.weight(f"{layer.name}_bias", blobs[1]) if p.bias_term else cv.none()
    operands = [cv.value(layer.bottoms[0]), cv.weight(f"{layer.name}_filter", blobs[0]), bias]
    attrs = {
        "kernel_shape": kernel,
        "strides": stride,
        "pads": pad + pad,
        "dilations": dilation,
        "group": group,
    }
    cv.emit(top.ConvOp, operands, layer, attrs, [n, oc, *out])


@converter("Deconvolution")
def convert_deconvolution(cv: CaffeConverter, layer: Layer) -> None:
    """Blob [in, out/group, kh, kw]; out = s(in-1) + d(k-1) + 1 - 2p."""
    p, kernel, stride, pad, dilation = _conv_geometry(cv, layer)
    n, c, h, w = _conv_input(cv, layer)
    oc, group = int(p.num_output), int(p.group)
    if group <= 0 or c % group or oc % group:
        raise cv.error(layer, f"group {group} does not divide {c} inputs and {oc} outputs")
    out = [
        s * (size - 1) + d * (k - 1) + 1 - 2 * pd
        for size, k, s, pd, d in zip((h, w), kernel, stride, pad, dilation, strict=True)
    ]
    shapes = [[c, oc // group, *kernel]] + ([[oc]] if p.bias_term else [])
    blobs = cv.blobs(layer, shapes)
    bias = cv.weight(f"{layer.name}_bias", blobs[1]) if p.bias_term else cv.none()
    operands = [cv.value(layer.bottoms[0]), cv.weight(f"{layer.name}_filter", blobs[0]), bias]
    attrs = {
        "kernel_shape": kernel,
        "strides": stride,
        "pads": pad + pad,
        "dilations": dilation,
        "group": group,
        "output_padding": [0, 0],
    }
    cv.emit(top.DeconvOp, operands, layer, attrs, [n, oc, *out])


def caffe_pool_size(size: int, k: int, s: int, p: int, ceil: bool) -> int:
    """Caffe's pooled size: ceil (default) or floor of (in + 2p - k)/s, + 1;
    in ceil mode with padding, a last window starting in the bottom/right
    padding is dropped (pooling_layer.cpp)."""
    span = size + 2 * p - k
    out = (-(-span // s) if ceil else span // s) + 1
    if p > 0 and (out - 1) * s >= size + p:
        out -= 1
    return out


@converter("Pooling")
def convert_pooling(cv: CaffeConverter, layer: Layer) -> None:
    """MAX ignores padding; AVE divides by the window clipped to the padded
    input [-p, in+p), the ceil-mode overhang excluded: ONNX's ceil_mode with
    count_include_pad, which is what the TOP op is given."""
    p = layer.param.pooling_param
    n, c, h, w = _conv_input(cv, layer)
    if p.pool == p.STOCHASTIC:
        raise cv.error(layer, "STOCHASTIC pooling is not supported")
    if p.global_pooling:
        kernel, stride, pad = [h, w], [1, 1], [0, 0]
    else:
        kernel = _pair(cv, layer, p.kernel_size if p.HasField("kernel_size") else [],
                       _opt(p, "kernel_h"), _opt(p, "kernel_w"), 0, "kernel")  # fmt: skip
        stride = _pair(cv, layer, p.stride, _opt(p, "stride_h"), _opt(p, "stride_w"), 1, "stride")
        pad_h = p.pad_h if p.HasField("pad_h") else None
        pad_w = p.pad_w if p.HasField("pad_w") else None
        pad = _pair(cv, layer, p.pad, pad_h, pad_w, 0, "pad")
    if min(kernel) <= 0:
        raise cv.error(layer, "kernel size missing (or global_pooling)")
    ceil = p.round_mode == p.CEIL
    out = [
        caffe_pool_size(size, k, s, pd, ceil)
        for size, k, s, pd in zip((h, w), kernel, stride, pad, strict=True)
    ]
    for size, k, s, pd, o in zip((h, w), kernel, stride, pad, out, strict=True):
        if (o - 1) * s >= size + pd:  # Caffe keeps a window wholly in the overhang
            raise cv.error(
                layer, f"its last window starts outside the input ({size}, k {k}, s {s})"
            )
    attrs = {"kernel_shape": kernel, "strides": stride, "pads": pad + pad, "ceil_mode": ceil}
    cls = top.MaxPoolOp
    if p.pool == p.AVE:
        cls, attrs["count_include_pad"] = top.AvgPoolOp, True
    cv.emit(cls, [cv.value(layer.bottoms[0])], layer, attrs, [n, c, *out])


@converter("InnerProduct")
def convert_inner_product(cv: CaffeConverter, layer: Layer) -> None:
    """Axes from `axis` on are flattened to K; weights [N, K] (or [K, N]
    with `transpose`) become the right operand [K, N] of a MatMul."""
    p = layer.param.inner_product_param
    shape = cv.shape(layer.bottoms[0])
    axis = p.axis % len(shape)
    rows, k, n = int(np.prod(shape[:axis])), int(np.prod(shape[axis:])), int(p.num_output)
    shapes = [[k, n] if p.transpose else [n, k]] + ([[n]] if p.bias_term else [])
    blobs = cv.blobs(layer, shapes)
    right = blobs[0] if p.transpose else np.ascontiguousarray(blobs[0].T)
    x = cv.value(layer.bottoms[0])
    if list(shape) != [rows, k]:
        x = cv.emit_temp(top.ReshapeOp, [x], f"{layer.name}_flat", {"shape": [rows, k]}, [rows, k])
    bias = cv.weight(f"{layer.name}_bias", blobs[1]) if p.bias_term else cv.none()
    operands = [x, cv.weight(f"{layer.name}_filter", right), bias]
    out_shape = [*shape[:axis], n]
    if out_shape == [rows, n]:
        cv.emit(top.MatMulOp, operands, layer, None, out_shape)
        return
    mm = cv.emit_temp(top.MatMulOp, operands, f"{layer.name}_matmul", None, [rows, n])
    cv.emit(top.ReshapeOp, [mm], layer, {"shape": out_shape}, out_shape)


@converter("BatchNorm")
def convert_batch_norm(cv: CaffeConverter, layer: Layer) -> None:
    """Blobs: mean, variance, moving-average factor s; Caffe uses mean/s
    and var/s (0 when s is 0). No gamma/beta: a Scale layer follows."""
    p = layer.param.batch_norm_param
    if p.HasField("use_global_stats") and not p.use_global_stats:
        raise cv.error(layer, "use_global_stats: false (batch statistics) is not supported")
    shape = cv.shape(layer.bottoms[0])
    channels = shape[1] if len(shape) > 1 else 1
    mean, var, factor = cv.blobs(layer, [[channels], [channels], [1]])
    s = float(factor.reshape(-1)[0])
    inv = 0.0 if s == 0 else 1.0 / s
    operands = [
        cv.value(layer.bottoms[0]),
        cv.weight(f"{layer.name}_mean", mean * inv),
        cv.weight(f"{layer.name}_variance", var * inv),
        cv.none(),
        cv.none(),
    ]
    cv.emit(top.BatchNormOp, operands, layer, {"epsilon": float(p.eps)}, shape)


@converter("Scale")
def convert_scale(cv: CaffeConverter, layer: Layer) -> None:
    """x * gamma (+ beta) over axes [axis, axis+num_axes); with two
    bottoms the second is the multiplier."""
    p = layer.param.scale_param
    shape = cv.shape(layer.bottoms[0])
    axis = p.axis % len(shape) if shape else 0
    x = cv.value(layer.bottoms[0])
    if len(layer.bottoms) > 1:
        other = cv.shape(layer.bottoms[1])
        span = list(other)
        factor = _broadcast_to(cv, layer, cv.value(layer.bottoms[1]), span, axis, len(shape))
        bias_blobs = cv.blobs(layer, [span]) if p.bias_term else []
    else:
        end = len(shape) if p.num_axes == -1 else axis + p.num_axes
        span = list(shape[axis:end])
        blobs = cv.blobs(layer, [span] + ([span] if p.bias_term else []))
        bias_blobs = blobs[1:]
        if axis == 1 and len(span) == 1 and len(shape) >= 2:
            bias = cv.weight(f"{layer.name}_bias", bias_blobs[0]) if bias_blobs else cv.none()
            gamma = cv.weight(f"{layer.name}_scale", blobs[0])
            cv.emit(top.ScaleOp, [x, gamma, bias], layer, None, shape)
            return
        full = _expanded(blobs[0], axis, len(shape))
        factor = cv.weight(f"{layer.name}_scale", full)
    if not bias_blobs:
        cv.emit(top.MulOp, [x, factor], layer, None, shape)
        return
    prod = cv.emit_temp(top.MulOp, [x, factor], f"{layer.name}_mul", None, shape)
    bias = cv.weight(f"{layer.name}_bias", _expanded(bias_blobs[0], axis, len(shape)))
    cv.emit(top.AddOp, [prod, bias], layer, None, shape)


def _expanded(array: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """`array` with trailing 1s so that it broadcasts from `axis` on."""
    return array.reshape(list(array.shape) + [1] * (rank - axis - array.ndim))


def _broadcast_to(cv, layer, value, span, axis, rank):
    trailing = rank - axis - len(span)
    if trailing == 0:
        return value
    shape = [*span, *([1] * trailing)]
    return cv.emit_temp(top.ReshapeOp, [value], f"{layer.name}_factor", {"shape": shape}, shape)


@converter("LRN")
def convert_lrn(cv: CaffeConverter, layer: Layer) -> None:
    """ACROSS_CHANNELS: x / (k + alpha/n * sum x^2)^beta (ONNX's LRN)."""
    p = layer.param.lrn_param
    if p.norm_region != p.ACROSS_CHANNELS:
        raise cv.error(layer, "norm_region WITHIN_CHANNEL is not supported")
    attrs = {"size": int(p.local_size), "alpha": p.alpha, "beta": p.beta, "bias": p.k}
    shape = cv.shape(layer.bottoms[0])
    cv.emit(top.LRNOp, [cv.value(layer.bottoms[0])], layer, attrs, shape)


@converter("Softmax")
def convert_softmax(cv: CaffeConverter, layer: Layer) -> None:
    shape = cv.shape(layer.bottoms[0])
    axis = layer.param.softmax_param.axis % len(shape)
    cv.emit(top.SoftmaxOp, [cv.value(layer.bottoms[0])], layer, {"axis": axis}, shape)


@converter("ReLU")
def convert_relu(cv: CaffeConverter, layer: Layer) -> None:
    slope = float(layer.param.relu_param.negative_slope)
    shape = cv.shape(layer.bottoms[0])
    x = cv.value(layer.bottoms[0])
    if slope == 0.0:
        cv.emit(top.ReluOp, [x], layer, None, shape)
    else:
        cv.emit(top.LeakyReluOp, [x], layer, {"alpha": slope}, shape)


@converter("ReLU6")
def convert_relu6(cv: CaffeConverter, layer: Layer) -> None:
    shape = cv.shape(layer.bottoms[0])
    cv.emit(top.ClipOp, [cv.value(layer.bottoms[0])], layer, {"min": 0.0, "max": 6.0}, shape)


@converter("PReLU")
def convert_prelu(cv: CaffeConverter, layer: Layer) -> None:
    """One slope per channel (axis 1), or one for all with channel_shared."""
    shape = cv.shape(layer.bottoms[0])
    shared = layer.param.prelu_param.channel_shared
    channels = 1 if shared else shape[1]
    (slope,) = cv.blobs(layer, [[channels]])
    full = slope.reshape([channels] + [1] * (len(shape) - 2))
    operands = [cv.value(layer.bottoms[0]), cv.weight(f"{layer.name}_slope", full)]
    cv.emit(top.PReluOp, operands, layer, None, shape)


@converter("Sigmoid", "TanH", "AbsVal")
def convert_unary(cv: CaffeConverter, layer: Layer) -> None:
    cls = {"Sigmoid": top.SigmoidOp, "TanH": top.TanhOp, "AbsVal": top.AbsOp}[layer.type]
    shape = cv.shape(layer.bottoms[0])
    cv.emit(cls, [cv.value(layer.bottoms[0])], layer, None, shape)
