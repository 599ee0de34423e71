"""F16/BF16 ops as the bm168x chips compute them: tpu.Conv2D, tpu.MatMul by
a weight or of two activations without bias (`tpuc.kernels.half_conv`:
blocks of 32 input channels, cut products, the f32 accumulator in the
chip's order), tpu.Deconv (that convolution over the zero-inserted input,
`tpuc.kernels.half_deconv`), AddConst/SubConst/MulConst and Scale
(`tpuc.kernels.half_eltwise`: the constant, the bias and the product
rounded to the half type). Other matmuls, and every op in f32, with mixed
types or for cv18xx, keep TOP's kernel, rounded (a bm168x conv the chip's
depthwise order: `tpuc.kernels.chip_depthwise`)."""

from __future__ import annotations

import math

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.interp.top_ops import KERNELS
from tpuc.interp.top_ops.conv import conv_attrs
from tpuc.interp.top_ops.elementwise import const_record
from tpuc.interp.top_ops.registry import LIBRARY, Array, KernelResult, record_of
from tpuc.interp.tpu_ops.float_ops import chip_family, chip_own, rounded
from tpuc.interp.tpu_ops.params import element_of_value, relu_of
from tpuc.interp.tpu_ops.registry import tpu_kernel
from tpuc.kernels import half_conv, half_deconv, half_eltwise
from tpuc.kernels.element import Element
from tpuc.kernels.elementwise import Scale
from tpuc.kernels.float_conv import MatMul

HALF = ("f16", "bf16")
_TOP_CONV = chip_own(top.ConvOp)  # the chip's depthwise order (chip_depthwise)
_TOP_MATMUL = rounded(KERNELS[top.MatMulOp])


def half_element(op) -> Element | None:
    """The half element when the op's operands (at most two) and result all
    have it in a module for a bm168x chip (else None)."""
    return record_of(op, _half_element)


def _half_element(op) -> Element | None:
    if not half_conv.applies(chip_family(op)):
        return None
    values = [*op.operands[:2], op.results[0]]
    elements = {element_of_value(v) for v in values if not isinstance(v.owner, top.NoneOp)}
    element = next(iter(elements))
    return element if len(elements) == 1 and element.dtype in HALF else None


def weight_matmul(op) -> bool:
    """A matmul the native target runs as a 1x1 convolution: the right
    operand a weight without batch, the left one not transposed."""
    if op.value("left_transpose") or op.value("hdim_is_batch"):
        return False
    right = shape_of(op.operands[1])
    return isinstance(op.operands[1].owner, top.WeightOp) and math.prod(right[:-2]) == 1


def batch_matmul(op) -> bool:
    """A matmul the native target runs as its batch matmul and whose
    arithmetic is known: both operands with the same batch dims, the left
    one not transposed, no bias."""
    if op.value("left_transpose") or op.value("hdim_is_batch"):
        return False
    left, right = shape_of(op.operands[0]), shape_of(op.operands[1])
    no_bias = len(op.operands) < 3 or isinstance(op.operands[2].owner, top.NoneOp)
    return no_bias and len(left) == len(right) >= 2 and left[:-2] == right[:-2]


@tpu_kernel(tpu.Conv2DOp, kinds=("float",), priority=1)
def conv2d(op, args: list[Array | None]) -> KernelResult:
    element = half_element(op)
    if element is None:
        return _TOP_CONV(op, args)
    record = record_of(op, lambda o: half_conv.HalfConv(conv_attrs(o), element))
    return half_conv.conv(record, *args)


_TOP_DECONV = rounded(KERNELS[top.DeconvOp])


@tpu_kernel(tpu.DeconvOp, kinds=("float",), priority=1)
def deconv(op, args: list[Array | None]) -> KernelResult:
    element = half_element(op)
    if element is None:
        return _TOP_DECONV(op, args)
    build = LIBRARY[top.DeconvOp][0]
    record = record_of(op, lambda o: half_deconv.HalfDeconv(build(o), element))
    return half_deconv.deconv(record, *args)


@tpu_kernel(tpu.MatMulOp, kinds=("float",), priority=1)
def matmul(op, args: list[Array | None]) -> KernelResult:
    element = half_element(op)
    if element is None:
        return _TOP_MATMUL(op, args)
    record = record_of(
        op,
        lambda o: half_conv.HalfMatMul(
            MatMul(bool(o.value("right_transpose")), relu_of(o)), element
        ),
    )
    if weight_matmul(op):
        return half_conv.matmul(record, *args)
    if batch_matmul(op):
        return half_conv.batch_matmul(record, *args[:2])
    return _TOP_MATMUL(op, args)


def _const_kernel(cls, kind: str):
    top_kernel = rounded(KERNELS[{v: k for k, v in tpu.MIRRORS.items()}[cls]])

    @tpu_kernel(cls, kinds=("float",), priority=1)
    def run(op, args: list[Array | None]) -> KernelResult:
        element = half_element(op)
        if element is None:
            return top_kernel(op, args)
        record = record_of(op, lambda o: half_eltwise.HalfConst(const_record(kind)(o), element))
        return half_eltwise.const(record, *args)

    run.__name__ = f"half_{kind.lower()}_const"
    return run


for _cls, _kind in ((tpu.AddConstOp, "Add"), (tpu.SubConstOp, "Sub"), (tpu.MulConstOp, "Mul")):
    _const_kernel(_cls, _kind)

_TOP_SCALE = rounded(KERNELS[top.ScaleOp])


@tpu_kernel(tpu.ScaleOp, kinds=("float",), priority=1)
def scale(op, args: list[Array | None]) -> KernelResult:
    element = half_element(op)
    if element is None:
        return _TOP_SCALE(op, args)
    record = record_of(op, lambda o: half_eltwise.HalfScale(Scale(relu_of(o)), element))
    return half_eltwise.scale(record, *args)
