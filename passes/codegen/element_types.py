"""IR element types -> the dtype fields of tensor records and bmodel tensors
(codegen's side; the simulator reads records as kernel-library Elements,
`tpuc.target.runtime.engine.element_of`)."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    IntegerType,
    Signedness,
)
from xdsl.ir import Attribute

from tpuc.dialects.quant import UniformQuantizedType
from tpuc.ir.core import FLOAT_DTYPES
from tpuc.target.isa.records import TENSOR_QUANTIZED, TENSOR_SIGNED_INT


class UnsupportedType(ValueError):
    """An element type the chip's memory has no dtype for."""


def dtype_fields(element: Attribute) -> dict:
    """TensorRecord keyword fields (dtype, flags, quantization) of an element type."""
    name = FLOAT_DTYPES.get(type(element))
    if name is not None:
        return {"dtype": name}
    if isinstance(element, UniformQuantizedType) and element.storage_width in (8, 16):
        return {
            "dtype": f"{'i' if element.is_signed else 'u'}{element.storage_width}",
            "flags": TENSOR_QUANTIZED,
            "scale": element.scale,
            "zero_point": element.zero_point,
            "storage_min": element.storage_min,
            "storage_max": element.storage_max,
        }
    if isinstance(element, IntegerType) and element.width.data in (8, 16, 32):
        signedness = element.signedness.data
        prefix = "u" if signedness == Signedness.UNSIGNED else "i"
        flags = TENSOR_SIGNED_INT if signedness == Signedness.SIGNED else 0
        return {"dtype": f"{prefix}{element.width.data}", "flags": flags}
    raise UnsupportedType(f"element type {element} has no device dtype")
