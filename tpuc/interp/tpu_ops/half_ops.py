"""F16/BF16 ops as the bm168x chips compute them: tpu.Conv2D and tpu.MatMul
by a weight (`tpuc.kernels.half_conv`: blocks of 32 input channels, cut
products, the f32 accumulator in the chip's order), AddConst/SubConst/
MulConst and Scale (`tpuc.kernels.half_eltwise`: the constant, the bias and
the product rounded to the half type). A matmul of two activations, and
every op in f32, with mixed types or for cv18xx, keeps TOP's kernel, rounded."""

from __future__ import annotations

import math

from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.interp.top_ops import KERNELS
from tpuc.interp.top_ops.conv import conv_attrs
from tpuc.interp.top_ops.elementwise import const_record
from tpuc.interp.top_ops.registry import Array, KernelResult, record_of
from tpuc.interp.tpu_ops.float_ops import chip_family, rounded
from tpuc.interp.tpu_ops.params import element_of_value, relu_of
from tpuc.interp.tpu_ops.registry import tpu_kernel
from tpuc.kernels import half_conv, half_eltwise
from tpuc.kernels.element import Element
from tpuc.kernels.elementwise import Scale
from tpuc.kernels.float_conv import MatMul

HALF = ("f16", "bf16")
_TOP_CONV = rounded(KERNELS[top.ConvOp])
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


@tpu_kernel(tpu.Conv2DOp, kinds=("float",), priority=1)
def conv2d(op, args: list[Array | None]) -> KernelResult:
    element = half_element(op)
    if element is None:
        return _TOP_CONV(op, args)
    record = record_of(op, lambda o: half_conv.HalfConv(conv_attrs(o), element))
    return half_conv.conv(record, *args)


@tpu_kernel(tpu.MatMulOp, kinds=("float",), priority=1)
def matmul(op, args: list[Array | None]) -> KernelResult:
    element = half_element(op)
    if element is None or not weight_matmul(op):
        return _TOP_MATMUL(op, args)
    record = record_of(
        op,
        lambda o: half_conv.HalfMatMul(
            MatMul(bool(o.value("right_transpose")), relu_of(o)), element
        ),
    )
    return half_conv.matmul(record, *args)


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
