"""Resize and Upsample.

Nearest resizing by integer factors whose coordinate rule picks
`input[out // factor]` becomes `top.Upsample` (the cheap op every chip has);
every other case becomes `top.Interp` with ONNX's modes spelled out and the
output spatial size (`target_shape`) resolved from scales or sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import NodeProto

from tpuc.dialects import top
from tpuc.frontends.onnx.converter import OnnxConverter
from tpuc.frontends.onnx.registry import converter
from tpuc.frontends.onnx.shape_ops import input_shape

# (coordinate_transformation_mode, nearest_mode) pairs under which nearest
# resizing by an integer factor s reads input[o // s].
FLOOR_EQUIVALENT = {
    ("asymmetric", "floor"),
    ("half_pixel", "round_prefer_floor"),
    ("half_pixel", "round_prefer_ceil"),
    ("pytorch_half_pixel", "round_prefer_floor"),
    ("pytorch_half_pixel", "round_prefer_ceil"),
    ("tf_half_pixel_for_nn", "floor"),
}


@converter("Resize")
def convert_resize(cv: OnnxConverter, node: NodeProto) -> None:
    attrs = cv.attrs(node)
    shape = input_shape(cv, node)
    if attrs.get("antialias", 0):
        raise cv.error(node, "antialias is not supported")
    if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise cv.error(node, "keep_aspect_ratio_policy other than 'stretch' is not supported")
    if cv.opset < 11:
        scales, sizes = _const_floats(cv, node, 1), None
        modes = {"coord_mode": "asymmetric", "nearest_mode": "floor"}
    else:
        scales, sizes = _const_floats(cv, node, 2), _const_floats(cv, node, 3)
        modes = {
            "coord_mode": attrs.get("coordinate_transformation_mode", "half_pixel"),
            "nearest_mode": attrs.get("nearest_mode", "round_prefer_floor"),
        }
    if modes["coord_mode"] == "tf_crop_and_resize":
        raise cv.error(node, "coordinate mode 'tf_crop_and_resize' is not supported")
    out = _output_shape(cv, node, shape, scales, sizes, attrs.get("axes"))
    given = None if sizes is not None else _full_scales(shape, scales, attrs.get("axes"))
    mode = attrs.get("mode", "nearest")
    extra = {
        "cubic_coeff_a": float(attrs.get("cubic_coeff_a", -0.75)),
        "exclude_outside": bool(attrs.get("exclude_outside", 0)),
    }
    _emit_resize(cv, node, shape, out, given, mode, modes, extra)


@converter("Upsample")
def convert_upsample(cv: OnnxConverter, node: NodeProto) -> None:
    shape = input_shape(cv, node)
    attrs = cv.attrs(node)
    scales = attrs.get("scales")
    if scales is None:
        scales = _const_floats(cv, node, 1)
    if scales is None:
        raise cv.error(node, "scales must be constant")
    out = [int(np.floor(d * s)) for d, s in zip(shape, scales, strict=True)]
    mode = "linear" if attrs.get("mode", "nearest") in ("linear", "bilinear") else "nearest"
    modes = {"coord_mode": "asymmetric", "nearest_mode": "floor"}
    _emit_resize(cv, node, shape, out, list(scales), mode, modes, {})


def _const_floats(cv: OnnxConverter, node: NodeProto, index: int) -> list[float] | None:
    if index >= len(node.input) or not node.input[index]:
        return None
    c = cv.const(node.input[index])
    if c is None:
        raise cv.error(node, f"'{node.input[index]}' must be a constant")
    return None if c.size == 0 else [float(v) for v in c.reshape(-1)]


def _full_scales(
    shape: Sequence[int], scales: list[float] | None, axes: list[int] | None
) -> list[float] | None:
    """One scale per dim (1.0 where `axes` leaves a dim alone)."""
    if scales is None:
        return None
    rank = len(shape)
    full = [1.0] * rank
    for a, s in zip([a % rank for a in axes] if axes else range(rank), scales, strict=True):
        full[a] = s
    return full


def _output_shape(
    cv: OnnxConverter,
    node: NodeProto,
    shape: Sequence[int],
    scales: list[float] | None,
    sizes: list[float] | None,
    axes: list[int] | None,
) -> list[int]:
    rank = len(shape)
    axes = [a % rank for a in axes] if axes else list(range(rank))
    out = list(shape)
    if sizes is not None:
        for a, s in zip(axes, sizes, strict=True):
            out[a] = int(s)
    elif scales is not None:
        for a, s in zip(axes, scales, strict=True):
            out[a] = int(np.floor(shape[a] * s))
    else:
        raise cv.error(node, "neither scales nor sizes given")
    return out


def _emit_resize(
    cv: OnnxConverter,
    node: NodeProto,
    shape: Sequence[int],
    out: list[int],
    scales: list[float] | None,
    mode: str,
    modes: dict[str, str],
    extra: dict[str, Any],
) -> None:
    if list(out[:2]) != list(shape[:2]) or len(shape) < 3:
        raise cv.error(node, f"only spatial dims may be resized ({list(shape)} -> {out})")
    x = cv.value(node.input[0])
    factors = [o // i if i and o % i == 0 else 0 for i, o in zip(shape[2:], out[2:], strict=True)]
    upsample = (
        mode == "nearest"
        and (scales is None or [float(f) for f in factors] == scales[2:])
        and len(shape) == 4
        and all(f >= 1 for f in factors)
        and (modes["coord_mode"], modes["nearest_mode"]) in FLOOR_EQUIVALENT
    )
    if upsample:
        params = {"scale_h": factors[0], "scale_w": factors[1]}
        cv.emit(top.UpsampleOp, [x], node.output[0], params, shape=out)
        return
    if mode not in ("nearest", "linear", "cubic"):
        raise cv.error(node, f"resize mode '{mode}' is not supported")
    params = {"target_shape": out[2:], "mode": mode, **modes, **extra}
    if scales is not None:  # ONNX maps coordinates with the given scales, not out/in
        params["scales"] = scales[2:]
    cv.emit(top.InterpOp, [x], node.output[0], params, shape=out)
