"""Resize, after TPU-MLIR's `Interfaces/BM1684X/Interp.cpp`:
`backend_api_interp_global(interp_global_param_t*)` over [input] -> [output],
the library's buffer in the chip's L2 SRAM (as TPU-MLIR on BM1684X).

Linear resizing of the two trailing dims of an NCHW tensor, float only
(tpuc keeps a linear Interp in F32 in INT8 mode). The library's coordinate
rules, as measured on its chip model: PYTORCH_SUPPORT with
half_pixel_centers is ONNX's half_pixel, with align_corners ONNX's
align_corners, and with neither still half_pixel (TPU-MLIR's asymmetric
linear is wrong there); TENSORFLOW_SUPPORT with neither is asymmetric.
pytorch_half_pixel is half_pixel except on an axis resized to 1 (source 0,
not the centre): align_corners, which maps such an axis to 0 and an axis
kept at its size to itself, writes it when every axis is one of those.
The library derives the scales from the shapes, so an Interp whose model
scales differ from out/in is refused.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import NativeCall, NativeContext, NotExpressible, dtype_name
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import declare

L2_SRAM_START = 0x1000_0000  # BM1684X: TPU-MLIR's Interp buffer
TENSORFLOW_SUPPORT, PYTORCH_SUPPORT = 1, 4
COORDS = {  # coord_mode -> (platform_sp, align_corners, half_pixel_centers)
    "half_pixel": (PYTORCH_SUPPORT, 0, 1),
    "pytorch_half_pixel": (PYTORCH_SUPPORT, 0, 1),
    "align_corners": (PYTORCH_SUPPORT, 1, 0),
    "asymmetric": (TENSORFLOW_SUPPORT, 0, 0),
}

declare(
    "interp_common_spec_t",
    "i32 pad_bag; i32 pad_end; bool align_corners; bool half_pixel_centers; i32 platform_sp",
)
declare(
    "interp_global_spec_t",
    "interp_common_spec_t common; i32 shape_is_fixed; i32 shape[8]; i32 dims; u64 buffer_addr",
)
InterpGlobal = declare(
    "interp_global_param_t",
    "interp_global_spec_t spec; i32 if_getting_buffer_size; ptr buffer_size_ptr",
)


def _check_scales(op: Operation, in_shape, out_shape) -> None:
    scales = list(op.value("scales") or [])
    if not scales:
        return
    target = list(op.value("target_shape"))
    first = len(in_shape) - len(target)
    for i, scale in enumerate(scales):
        n_in, n_out = in_shape[first + i], out_shape[first + i]
        if n_in != n_out and np.float32(scale) != np.float32(n_out) / np.float32(n_in):
            raise NotExpressible(f"an Interp whose scale {scale} is not {n_out}/{n_in}")


@native_rule(tpu.InterpOp)
def interp(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """interp_global_param_t {pad 0, align_corners, half_pixel_centers,
    PYTORCH_SUPPORT, buffer in L2 SRAM}."""
    src, dst = op.operands[0], op.results[0]
    if op.value("mode") != "linear":
        raise NotExpressible(f"a {op.value('mode')} Interp (the native target has linear)")
    coord = op.value("coord_mode")
    if coord not in COORDS:
        raise NotExpressible(f"an Interp with coord_mode {coord}")
    if dtype_name(src) not in ("f32", "f16", "bf16") or dtype_name(dst) != dtype_name(src):
        raise NotExpressible("a quantized linear Interp")
    in_shape, out_shape = shape_of(src), shape_of(dst)
    if len(in_shape) != 4 or tuple(in_shape[:2]) != tuple(out_shape[:2]):
        raise NotExpressible(f"an Interp of {list(in_shape)} to {list(out_shape)} (NCHW, H and W)")
    _check_scales(op, in_shape, out_shape)
    axes = list(zip(in_shape[2:], out_shape[2:], strict=True))
    if coord == "pytorch_half_pixel" and any(o == 1 != i for i, o in axes):
        if not all(o in (1, i) for i, o in axes):
            raise NotExpressible("a pytorch_half_pixel Interp that resizes one axis to 1 only")
        coord = "align_corners"
    p = InterpGlobal()
    common = p.spec.common
    common.platform_sp, common.align_corners, common.half_pixel_centers = COORDS[coord]
    p.spec.buffer_addr = L2_SRAM_START
    return [ctx.call("backend_api_interp_global", p, op)]
