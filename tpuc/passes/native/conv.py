"""Conv2D: `backend_api_conv_global` with `conv_global_spec_t`.

Float filters go to the chip as weight-reorder left them ([1, oc, ic/g,
kh·kw], OIHW order), f32 biases as [1, oc, 1, 1]; the INT8 form packs
requant, bias and filter per output channel (`merge_coeff = 2`).
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import NativeCall, NativeContext, NotExpressible, is_float
from tpuc.passes.native.rules import native_rule
from tpuc.vendor.params import ConvGlobal

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
    c.round_mode = ROUND_MODES[op.value("round_mode") or "HalfAwayFromZero"]
    c.bias_sign = 1
    c.ipad_is_const = 1
    c.kzp_is_const = 1
    c.weight_is_coeff = 1


@native_rule(tpu.Conv2DOp)
def conv2d(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    spec = ConvGlobal()
    conv_common(op, spec)
    has_bias = not isinstance(op.operands[2].owner, top.NoneOp)
    spec.common.has_bias = has_bias
    if not (is_float(op.operands[0]) and is_float(op.results[0])):
        raise NotExpressible("integer convolution (not yet written for the native target)")
    if op.operands[0].type.element_type != op.operands[1].type.element_type:
        raise NotExpressible("a filter of another type than the input")
    inputs = [ctx.spec(op.operands[0]), ctx.spec(op.operands[1])]
    if has_bias:
        oc = shape_of(op.results[0])[1]
        inputs.append(ctx.spec(op.operands[2], (1, oc, 1, 1)))
    return [ctx.call("backend_api_conv_global", spec, op, inputs=inputs)]
