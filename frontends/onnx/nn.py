"""Convolution, matmul, pooling, normalization and softmax.

All padding is resolved here: `auto_pad` becomes explicit `pads` (all
begins, then all ends), so TOP ops never see ONNX's padding modes. Gemm's
alpha/beta/transA/transB are folded into the weights or extra ops so the
result is a plain `top.MatMul` with an optional per-column bias.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import NodeProto

from tpuc.dialects import top
from tpuc.frontends.onnx.converter import OnnxConverter
from tpuc.frontends.onnx.registry import converter


def resolve_pads(
    attrs: dict[str, Any],
    spatial: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
) -> list[int]:
    """Explicit pads for Conv/pooling, from `pads` or `auto_pad`."""
    nd = len(kernel)
    mode = attrs.get("auto_pad", "NOTSET")
    if mode == "VALID":
        return [0] * (2 * nd)
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        return list(attrs.get("pads", [0] * (2 * nd)))
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begins.append(small if mode == "SAME_UPPER" else large)
        ends.append(large if mode == "SAME_UPPER" else small)
    return begins + ends


def _spatial_of(cv: OnnxConverter, node: NodeProto) -> tuple[int, ...]:
    shape = cv.shape(node.input[0])
    if shape is None:
        raise cv.error(node, f"the shape of '{node.input[0]}' is not static")
    return shape


@converter("Conv")
def convert_conv(cv: OnnxConverter, node: NodeProto) -> None:
    attrs = cv.attrs(node)
    x, w = node.input[0], node.input[1]
    bias = node.input[2] if len(node.input) > 2 else ""
    xshape = _spatial_of(cv, node)
    wshape = cv.shape(w)
    kernel = list(attrs.get("kernel_shape") or (wshape or ())[2:])
    if not kernel:
        raise cv.error(node, "kernel shape unknown")
    nd = len(kernel)
    strides = list(attrs.get("strides", [1] * nd))
    dilations = list(attrs.get("dilations", [1] * nd))
    params = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": resolve_pads(attrs, xshape[2:], kernel, strides, dilations),
        "dilations": dilations,
        "group": int(attrs.get("group", 1)),
    }
    operands = [cv.value(x), cv.value(w), cv.value(bias)]
    cv.emit(top.ConvOp, operands, node.output[0], params)


@converter("ConvTranspose")
def convert_conv_transpose(cv: OnnxConverter, node: NodeProto) -> None:
    attrs = cv.attrs(node)
    x, w = node.input[0], node.input[1]
    bias = node.input[2] if len(node.input) > 2 else ""
    spatial = _spatial_of(cv, node)[2:]
    wshape = cv.shape(w)
    kernel = list(attrs.get("kernel_shape") or (wshape or ())[2:])
    nd = len(kernel)
    strides = list(attrs.get("strides", [1] * nd))
    dilations = list(attrs.get("dilations", [1] * nd))
    out_pad = list(attrs.get("output_padding", [0] * nd))
    pads = _deconv_pads(attrs, spatial, kernel, strides, dilations, out_pad)
    params = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": pads,
        "dilations": dilations,
        "group": int(attrs.get("group", 1)),
        "output_padding": out_pad,
    }
    operands = [cv.value(x), cv.value(w), cv.value(bias)]
    cv.emit(top.DeconvOp, operands, node.output[0], params)


def _deconv_pads(attrs, spatial, kernel, strides, dilations, out_pad) -> list[int]:
    """ConvTranspose pads from `output_shape` / `auto_pad` (ONNX spec);
    a negative total padding becomes extra `output_padding` (updated in place)."""
    nd = len(kernel)
    mode = attrs.get("auto_pad", "NOTSET")
    target = attrs.get("output_shape")
    if target is None and mode in ("SAME_UPPER", "SAME_LOWER"):
        target = [size * s for size, s in zip(spatial, strides, strict=True)]
    if target is None:
        return [0] * (2 * nd) if mode == "VALID" else list(attrs.get("pads", [0] * (2 * nd)))
    target = list(target)[-nd:]
    begins, ends = [], []
    for i in range(nd):
        full = strides[i] * (spatial[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1
        total = full - target[i]
        if total < 0:
            out_pad[i] -= total
            total = 0
        small, large = total // 2, total - total // 2
        begins.append(small if mode == "SAME_UPPER" else large)
        ends.append(large if mode == "SAME_UPPER" else small)
    return begins + ends


@converter("MatMul")
def convert_matmul(cv: OnnxConverter, node: NodeProto) -> None:
    operands = [cv.value(node.input[0]), cv.value(node.input[1]), cv.none()]
    cv.emit(top.MatMulOp, operands, node.output[0])


@converter("Gemm")
def convert_gemm(cv: OnnxConverter, node: NodeProto) -> None:
    """alpha * A' @ B' + beta * C with A' = A.T if transA, B' = B.T if transB."""
    attrs = cv.attrs(node)
    a, b = node.input[0], node.input[1]
    c = node.input[2] if len(node.input) > 2 else ""
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    trans_a, trans_b = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    out = node.output[0]
    lhs = _gemm_lhs(cv, a, trans_a, alpha if not cv.is_const(b) else 1.0, out)
    right_transpose = False
    bconst = cv.const(b)
    if bconst is not None:
        fixed = not trans_b and alpha == 1.0
        right = cv.value(b) if fixed else cv.weight(f"{b}_fix", _scaled(bconst, trans_b, alpha))
    else:
        right, right_transpose = cv.value(b), trans_b
    bshape = cv.shape(b)
    n = None if bshape is None else bshape[0 if trans_b else 1]
    bias, add_after = _gemm_bias(cv, c, beta, out, n)
    attrs_mm = {"right_transpose": right_transpose} if right_transpose else None
    if add_after is None:
        cv.emit(top.MatMulOp, [lhs, right, bias], out, attrs_mm)
        return
    shape = cv.onnx_shapes.get(out)
    mm = cv.emit_temp(top.MatMulOp, [lhs, right, bias], f"{out}_matmul", attrs_mm, shape=shape)
    cv.emit(top.AddOp, [mm, add_after], out)


def _gemm_lhs(cv: OnnxConverter, a: str, trans: bool, scale: float, out: str):
    aconst = cv.const(a)
    if aconst is not None:
        if not trans and scale == 1.0:
            return cv.value(a)
        return cv.weight(f"{a}_fix", _scaled(aconst, trans, scale))
    value = cv.value(a)
    shape = cv.shape(a)
    if trans:
        tshape = None if shape is None else shape[::-1]
        value = cv.emit_temp(top.PermuteOp, [value], f"{out}_lhs_T", {"order": [1, 0]}, tshape)
        shape = tshape
    if scale != 1.0:
        value = cv.emit_temp(top.MulConstOp, [value], f"{out}_alpha", {"const_val": scale}, shape)
    return value


def _scaled(matrix: np.ndarray, trans: bool, scale: float) -> np.ndarray:
    """`matrix` (transposed if `trans`) times `scale`, C-contiguous, with at
    most one copy: fc weights can be hundreds of MB."""
    out = _transposed(matrix) if trans else np.ascontiguousarray(matrix)
    if scale == 1.0:
        return out
    if np.may_share_memory(out, matrix) or out.dtype.kind != "f":
        return out * scale  # no copy was made (or an int matrix): never scale the constant
    out *= scale
    return out


def _transposed(matrix: np.ndarray, rows: int = 256, cols: int = 2048) -> np.ndarray:
    """C-contiguous `matrix.T`, copied block by block: about twice as fast
    as a plain strided copy on fc-sized matrices (cache-friendly reads)."""
    if matrix.ndim != 2 or matrix.size < rows * cols:
        return np.ascontiguousarray(matrix.T)
    r, c = matrix.shape
    out = np.empty((c, r), matrix.dtype)
    for i in range(0, r, rows):
        for j in range(0, c, cols):
            out[j : j + cols, i : i + rows] = matrix[i : i + rows, j : j + cols].T
    return out


def _gemm_bias(cv: OnnxConverter, c: str, beta: float, out: str, n: int | None):
    """(bias operand, tensor to add after the matmul or None): a constant C
    with one value per output column becomes the MatMul bias."""
    if not c or beta == 0.0:
        return cv.none(), None
    cconst = cv.const(c)
    if cconst is None:
        value = cv.value(c)
        if beta != 1.0:
            attrs = {"const_val": beta}
            value = cv.emit_temp(top.MulConstOp, [value], f"{out}_beta", attrs, cv.shape(c))
        return cv.none(), value
    per_column = cconst.ndim == 1 or (cconst.ndim == 2 and cconst.shape[0] == 1)
    if per_column and cconst.size == n:
        if beta == 1.0 and cconst.ndim == 1:
            return cv.value(c), None
        return cv.weight(f"{c}_fix", (cconst * beta).reshape(-1)), None
    return cv.none(), (cv.value(c) if beta == 1.0 else cv.weight(f"{c}_fix", cconst * beta))


def _pool_params(cv: OnnxConverter, node: NodeProto) -> dict[str, Any]:
    attrs = cv.attrs(node)
    shape = _spatial_of(cv, node)
    kernel = list(attrs["kernel_shape"])
    nd = len(kernel)
    strides = list(attrs.get("strides", [1] * nd))
    dilations = list(attrs.get("dilations", [1] * nd))
    if any(d != 1 for d in dilations):
        raise cv.error(node, f"dilations {dilations} are not supported for pooling")
    return {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": resolve_pads(attrs, shape[2:], kernel, strides, dilations),
        "ceil_mode": bool(attrs.get("ceil_mode", 0)),
    }


@converter("MaxPool")
def convert_max_pool(cv: OnnxConverter, node: NodeProto) -> None:
    if len(node.output) > 1 and node.output[1]:
        raise cv.error(node, "the Indices output is not supported")
    params = _pool_params(cv, node)
    cv.emit(top.MaxPoolOp, [cv.value(node.input[0])], node.output[0], params)


@converter("AveragePool")
def convert_avg_pool(cv: OnnxConverter, node: NodeProto) -> None:
    params = _pool_params(cv, node)
    params["count_include_pad"] = bool(cv.attrs(node).get("count_include_pad", 0))
    cv.emit(top.AvgPoolOp, [cv.value(node.input[0])], node.output[0], params)


@converter("GlobalAveragePool", "GlobalMaxPool")
def convert_global_pool(cv: OnnxConverter, node: NodeProto) -> None:
    kernel = list(_spatial_of(cv, node)[2:])
    nd = len(kernel)
    params = {"kernel_shape": kernel, "strides": [1] * nd, "pads": [0] * (2 * nd)}
    cls = top.AvgPoolOp if node.op_type == "GlobalAveragePool" else top.MaxPoolOp
    cv.emit(cls, [cv.value(node.input[0])], node.output[0], params)


@converter("BatchNormalization")
def convert_batch_norm(cv: OnnxConverter, node: NodeProto) -> None:
    if any(node.output[1:]):
        raise cv.error(node, "training-mode outputs (running mean/var) are not supported")
    x, scale, bias, mean, var = node.input[:5]
    eps = float(cv.attrs(node).get("epsilon", 1e-5))
    operands = [cv.value(n) for n in (x, mean, var, scale, bias)]
    cv.emit(top.BatchNormOp, operands, node.output[0], {"epsilon": eps})


@converter("LayerNormalization")
def convert_layer_norm(cv: OnnxConverter, node: NodeProto) -> None:
    if any(node.output[1:]):
        raise cv.error(node, "the Mean/InvStdDev outputs are not supported")
    attrs = cv.attrs(node)
    shape = _spatial_of(cv, node)
    axis = int(attrs.get("axis", -1)) % len(shape)
    normalized = list(shape[axis:])
    affine = [_affine_operand(cv, n, normalized) for n in (list(node.input[1:3]) + [""])[:2]]
    params = {
        "axis": axis,
        "eps": float(attrs.get("epsilon", 1e-5)),
        "normalized_shape": normalized,
    }
    cv.emit(top.LayerNormOp, [cv.value(node.input[0]), *affine], node.output[0], params)


def _affine_operand(cv: OnnxConverter, name: str, shape: Sequence[int]):
    """A norm's scale/bias with exactly `shape` (constants are broadcast)."""
    c = cv.const(name)
    if c is None or tuple(c.shape) == tuple(shape):
        return cv.value(name)
    return cv.weight(f"{name}_fix", np.broadcast_to(c, shape))


@converter("InstanceNormalization")
def convert_instance_norm(cv: OnnxConverter, node: NodeProto) -> None:
    eps = float(cv.attrs(node).get("epsilon", 1e-5))
    operands = [cv.value(n) for n in node.input[:3]]
    cv.emit(top.InstanceNormOp, operands, node.output[0], {"eps": eps})


@converter("GroupNormalization")
def convert_group_norm(cv: OnnxConverter, node: NodeProto) -> None:
    attrs = cv.attrs(node)
    groups = int(attrs["num_groups"])
    channels = _spatial_of(cv, node)[1]
    operands = [cv.value(node.input[0])]
    for name in node.input[1:3]:
        c = cv.const(name)
        if c is not None and c.size == groups != channels:  # opset 18: one value per group
            operands.append(cv.weight(f"{name}_fix", np.repeat(c.reshape(-1), channels // groups)))
        else:
            operands.append(cv.value(name))
    params = {"eps": float(attrs.get("epsilon", 1e-5)), "num_groups": groups}
    cv.emit(top.GroupNormOp, operands, node.output[0], params)


@converter("LRN")
def convert_lrn(cv: OnnxConverter, node: NodeProto) -> None:
    attrs = cv.attrs(node)
    params = {
        "size": int(attrs["size"]),
        "alpha": float(attrs.get("alpha", 1e-4)),
        "beta": float(attrs.get("beta", 0.75)),
        "bias": float(attrs.get("bias", 1.0)),
    }
    cv.emit(top.LRNOp, [cv.value(node.input[0])], node.output[0], params)


@converter("Softmax", "LogSoftmax")
def convert_softmax(cv: OnnxConverter, node: NodeProto) -> None:
    """Before opset 13 the input is coerced to 2-D at `axis`: the softmax
    runs over all dims from `axis` on; a Reshape pair does that when more
    than one of those dims is larger than 1."""
    shape = _spatial_of(cv, node)
    rank = len(shape)
    default = -1 if cv.opset >= 13 else 1
    axis = int(cv.attrs(node).get("axis", default)) % max(rank, 1)
    log = node.op_type == "LogSoftmax"
    x, out = cv.value(node.input[0]), node.output[0]
    trailing = int(np.prod(shape[axis + 1 :]))
    if cv.opset >= 13 or trailing == 1:
        cv.emit(top.SoftmaxOp, [x], out, {"axis": axis, "log": log})
        return
    flat = [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))]
    x2 = cv.emit_temp(top.ReshapeOp, [x], f"{out}_2d", {"shape": flat}, flat)
    y2 = cv.emit_temp(top.SoftmaxOp, [x2], f"{out}_softmax", {"axis": 1, "log": log}, flat)
    cv.emit(top.ReshapeOp, [y2], out, {"shape": list(shape)}, shape=shape)
