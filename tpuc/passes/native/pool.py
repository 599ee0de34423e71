"""Pool2D (max and average): `backend_api_pooling_global` with
`pooling_common_spec_t`."""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import NativeCall, NativeContext, NotExpressible, is_float
from tpuc.passes.native.conv import ROUND_MODES
from tpuc.passes.native.rules import native_rule
from tpuc.vendor.params import PoolingCommon


@native_rule(tpu.Pool2DOp)
def pool2d(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    in_shape, out_shape = shape_of(op.operands[0]), shape_of(op.results[0])
    kernel = op.value("kernel_shape")
    if len(kernel) != 2:
        raise NotExpressible(f"{len(kernel)}-D pooling (the native target has 2-D)")
    spec = PoolingCommon()
    spec.kh, spec.kw = kernel
    spec.pad_h_t, spec.pad_w_l, spec.pad_h_b, spec.pad_w_r = op.value("pads") or [0, 0, 0, 0]
    spec.stride_h, spec.stride_w = op.value("strides") or [1, 1]
    spec.dh = spec.dw = 1
    spec.is_global_pooling = (
        in_shape[2] == kernel[0] and in_shape[3] == kernel[1] and out_shape[2:] == (1, 1)
    )
    if kernel[0] == in_shape[2] and kernel[1] == 1:
        spec.stride_h = 1
    if kernel[1] == in_shape[3] and kernel[0] == 1:
        spec.stride_w = 1
    spec.if_relu = bool(op.value("do_relu"))
    limit = op.value("relu_limit")
    spec.relu_limit = -1.0 if limit is None else float(limit)
    spec.ceil_mode = bool(op.value("ceil_mode"))
    spec.round_mode = ROUND_MODES[op.value("round_mode") or "HalfAwayFromZero"]
    if op.value("pool_mode") == "Avg":
        spec.is_avg_pooling = 1
        spec.avg_pooling_mode = 0 if op.value("count_include_pad") else 1
        if not is_float(op.operands[0]):
            raise NotExpressible("integer average pooling (not yet written for the native target)")
    return [ctx.call("backend_api_pooling_global", spec, op)]
