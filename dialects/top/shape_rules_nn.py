"""Shape rules of the layers with weights or windows: convolution,
transposed convolution, matmul, pooling and the recurrent ops (ONNX
semantics; spatial attributes are fully resolved by the frontend)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tpuc.dialects.top.shape_rules import (
    Shape,
    ShapeError,
    Shapes,
    broadcast,
    fmt,
    int_list,
    need_rank,
    need_size,
)

if TYPE_CHECKING:
    from tpuc.dialects import top


def _window_attrs(op: Any, spatial: int) -> tuple[list[int], list[int], list[int]]:
    """strides, dilations (1 when the op has none) and pads of a window op."""
    strides = int_list(op, "strides", spatial, 1)
    dilations = int_list(op, "dilations", spatial, 1)
    pads = int_list(op, "pads", 2 * spatial, 0)
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dilations):
        raise ShapeError(f"strides {strides} and dilations {dilations} must be positive")
    return strides, dilations, pads


def _check_kernel(op: Any, kernel: Shape) -> None:
    """A given kernel_shape must agree with the filter's spatial dims."""
    given = op.value("kernel_shape")
    if given is not None and tuple(given) != kernel:
        raise ShapeError(f"kernel_shape {list(given)} does not match the filter's {list(kernel)}")


def _conv_operands(op: Any, shapes: Shapes) -> tuple[Shape, Shape, int]:
    """input, filter and group after the checks Conv and Deconv share."""
    shape, weight, _ = shapes
    need_rank(shape, 3)
    if len(weight) != len(shape):
        raise ShapeError(f"filter {fmt(weight)} must have the input's rank {len(shape)}")
    group = op.value("group")
    if group <= 0:
        raise ShapeError(f"group {group} must be positive")
    _check_kernel(op, weight[2:])
    return shape, weight, group


def conv(op: top.ConvOp, shapes: Shapes) -> list[Shape]:
    """[N, C, *in] * [OC, C/group, *k] -> [N, OC, *out] with
    out = (in + pad_begin + pad_end - dilation*(k-1) - 1) // stride + 1."""
    shape, weight, group = _conv_operands(op, shapes)
    spatial = len(shape) - 2
    strides, dilations, pads = _window_attrs(op, spatial)
    out_channels = weight[0]
    if shape[1] != weight[1] * group:
        raise ShapeError(
            f"input has {shape[1]} channels but filter {fmt(weight)} with group {group} "
            f"expects {weight[1] * group}"
        )
    if out_channels % group:
        raise ShapeError(f"{out_channels} output channels do not split into {group} groups")
    need_size(shapes[2], out_channels, "bias")
    out = []
    for i in range(spatial):
        extent = shape[2 + i] + pads[i] + pads[spatial + i] - dilations[i] * (weight[2 + i] - 1)
        if extent < 1:
            raise ShapeError(f"kernel {list(weight[2:])} is larger than the padded input")
        out.append((extent - 1) // strides[i] + 1)
    return [(shape[0], out_channels, *out)]


def deconv(op: top.DeconvOp, shapes: Shapes) -> list[Shape]:
    """[N, C, *in] * [C, OC/group, *k] -> [N, OC, *out] with
    out = stride*(in-1) + output_padding + dilation*(k-1) + 1 - pads."""
    shape, weight, group = _conv_operands(op, shapes)
    spatial = len(shape) - 2
    strides, dilations, pads = _window_attrs(op, spatial)
    output_padding = int_list(op, "output_padding", spatial, 0)
    if shape[1] != weight[0]:
        raise ShapeError(
            f"input has {shape[1]} channels but filter {fmt(weight)} expects {weight[0]}"
        )
    if shape[1] % group:
        raise ShapeError(f"{shape[1]} input channels do not split into {group} groups")
    out_channels = weight[1] * group
    need_size(shapes[2], out_channels, "bias")
    out = []
    for i in range(spatial):
        size = (
            strides[i] * (shape[2 + i] - 1)
            + output_padding[i]
            + dilations[i] * (weight[2 + i] - 1)
            + 1
            - pads[i]
            - pads[spatial + i]
        )
        if size < 1:
            raise ShapeError(f"pads {pads} leave no output on spatial dim {i}")
        out.append(size)
    return [(shape[0], out_channels, *out)]


def pool(op: Any, shapes: Shapes) -> list[Shape]:
    """ONNX pooling; with ceil_mode the last window must start inside the
    input or its begin padding (onnxruntime's rule)."""
    (shape,) = shapes
    need_rank(shape, 3)
    spatial = len(shape) - 2
    kernel = op.value("kernel_shape")
    if kernel is None:
        raise ShapeError("kernel_shape is missing")
    kernel = int_list(op, "kernel_shape", spatial, 1)
    strides, _, pads = _window_attrs(op, spatial)
    ceil_mode = op.value("ceil_mode")
    out = []
    for i in range(spatial):
        padded = shape[2 + i] + pads[i] + pads[spatial + i]
        if padded < kernel[i]:
            raise ShapeError(f"kernel {kernel} is larger than the padded input {fmt(shape)}")
        span = padded - kernel[i]
        size = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
        if ceil_mode and (size - 1) * strides[i] >= shape[2 + i] + pads[i]:
            size -= 1
        out.append(size)
    return [(*shape[:2], *out)]


def matmul(op: top.MatMulOp, shapes: Shapes) -> list[Shape]:
    """numpy.matmul shapes (1-D operands included), `right_transpose`
    swapping the last two dims of `right`; the bias broadcasts to the
    output."""
    left, right, bias = shapes
    if not left or not right:
        raise ShapeError(f"cannot multiply {fmt(left)} by {fmt(right)}: scalar operand")
    if op.value("right_transpose") and len(right) >= 2:
        right = (*right[:-2], right[-1], right[-2])
    a = (1, *left) if len(left) == 1 else left
    b = (*right, 1) if len(right) == 1 else right
    if a[-1] != b[-2]:
        raise ShapeError(f"cannot multiply {fmt(left)} by {fmt(right)}: {a[-1]} != {b[-2]}")
    out = [*broadcast(a[:-2], b[:-2])]
    if len(left) > 1:
        out.append(a[-2])
    if len(right) > 1:
        out.append(b[-1])
    result = tuple(out)
    if bias is not None and broadcast(result, bias) != result:
        raise ShapeError(f"bias {fmt(bias)} does not broadcast to the output {fmt(result)}")
    return [result]


def _recurrent(op: Any, shapes: Shapes, gates: int) -> list[Shape]:
    """ONNX LSTM/GRU layouts: results Y then Y_h (and Y_c) as TPU-MLIR
    (batch_first = ONNX layout 1)."""
    shape, weight, recurrence, bias, *states = shapes
    need_rank(shape, 3, high=3)
    dirs = 2 if op.value("bidirectional") else 1
    batch_first = op.value("batch_first")
    seq, batch = (shape[1], shape[0]) if batch_first else (shape[0], shape[1])
    need_rank(recurrence, 3, "recurrence", 3)
    hidden = op.value("hidden_size") or recurrence[2]
    expect = {
        "filter": (weight, (dirs, gates * hidden, shape[2])),
        "recurrence": (recurrence, (dirs, gates * hidden, hidden)),
    }
    for what, (got, wanted) in expect.items():
        if tuple(got) != wanted:
            raise ShapeError(f"{what} {fmt(got)} must be {fmt(wanted)}")
    need_size(bias, dirs * 2 * gates * hidden, "bias")
    for state in states:
        need_size(state, dirs * batch * hidden, "initial state")
    if batch_first:
        y, y_h = (batch, seq, dirs, hidden), (batch, dirs, hidden)
    else:
        y, y_h = (seq, dirs, batch, hidden), (dirs, batch, hidden)
    return [y, y_h, y_h][: len(op.results)]


def lstm(op: top.LSTMOp, shapes: Shapes) -> list[Shape]:
    return _recurrent(op, shapes, gates=4)


def gru(op: top.GRUOp, shapes: Shapes) -> list[Shape]:
    return _recurrent(op, shapes, gates=3)
