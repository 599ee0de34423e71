"""IR element types <-> the dtype fields of tensor records and bmodel tensors.

Both directions live here so that codegen (IR -> records) and the device
simulator (records -> the IR types its kernels read) cannot disagree.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    IntegerType,
    Signedness,
    TensorType,
    f32,
)
from xdsl.ir import Attribute

from tpuc.dialects.quant import UniformQuantizedType
from tpuc.ir import FLOAT_DTYPES
from tpuc.isa.records import TENSOR_QUANTIZED, TENSOR_SIGNED_INT, TensorRecord


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


def element_of_record(record: TensorRecord) -> Attribute:
    """The IR element type a tensor record describes."""
    if record.dtype in ("f32", "f16", "bf16"):
        return {"f32": f32, "f16": Float16Type(), "bf16": BFloat16Type()}[record.dtype]
    width = int(record.dtype[1:])
    if record.flags & TENSOR_QUANTIZED:
        return UniformQuantizedType(
            record.dtype[0] + str(width),
            record.scale,
            record.zero_point,
            storage_min=record.storage_min,
            storage_max=record.storage_max,
        )
    if record.dtype.startswith("u"):
        return IntegerType(width, Signedness.UNSIGNED)
    if record.flags & TENSOR_SIGNED_INT:
        return IntegerType(width, Signedness.SIGNED)
    return IntegerType(width)


def tensor_type_of_record(record: TensorRecord) -> TensorType:
    return TensorType(element_of_record(record), list(record.shape))
