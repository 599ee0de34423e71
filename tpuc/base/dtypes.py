"""The element types tpuc stores: one table of what each one is.

For every dtype name (the names tensor records, the bmodel and
tensor_location.json use) the table gives its TPU-MLIR `bm_data_type_t`
code, its size in bytes, the numpy dtype of its stored bytes, and how a
float32 value is rounded to it. The bmodel writer and reader, the
instruction records, codegen, the device simulator and the interpreters'
roundings all read this table, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpuc.base.numerics import to_bf16, to_f16


@dataclass(frozen=True)
class ElementType:
    name: str
    code: int | None  # the bmodel's data_type; None: not a device type (only the Cast kernel's)
    bytes: int
    storage: str  # numpy dtype of the stored bytes, little-endian (bf16: its uint16 bit patterns)
    # float32 -> the nearest value of this type, kept as float32; None: f32 or exact
    rounding: Callable[[np.ndarray], np.ndarray] | None = None


ELEMENT_TYPES: dict[str, ElementType] = {
    t.name: t
    for t in (
        ElementType("f32", 0, 4, "<f4"),
        ElementType("f16", 1, 2, "<f2", to_f16),
        ElementType("i8", 2, 1, "i1"),
        ElementType("u8", 3, 1, "u1"),
        ElementType("i16", 4, 2, "<i2"),
        ElementType("u16", 5, 2, "<u2"),
        ElementType("i32", 6, 4, "<i4"),
        ElementType("u32", 7, 4, "<u4"),
        ElementType("bf16", 8, 2, "<u2", to_bf16),
        ElementType("i64", None, 8, "<i8"),
        ElementType("u64", None, 8, "<u8"),
    )
}

DEVICE_TYPES = {name: t for name, t in ELEMENT_TYPES.items() if t.code is not None}
"""The element types device memory, records and bmodels hold."""

DTYPE_CODES: dict[str, int] = {name: t.code for name, t in DEVICE_TYPES.items()}  # type: ignore[misc]
"""dtype name -> TPU-MLIR's bm_data_type_t code (bmodel Tensor.data_type, ISA records)."""
DTYPE_NAMES: dict[int, str] = {code: name for name, code in DTYPE_CODES.items()}
DTYPE_BYTES: dict[str, int] = {name: t.bytes for name, t in DEVICE_TYPES.items()}
STORAGE: dict[str, str] = {name: t.storage for name, t in DEVICE_TYPES.items()}


def to_storage(values: np.ndarray, dtype: str) -> np.ndarray:
    """The interpreter's float arrays -> the bytes' numpy dtype (exact:
    values already are representable: stored integers, f16/bf16 values)."""
    if dtype == "bf16":
        bits = np.ascontiguousarray(values, np.float32).view(np.uint32)
        return (bits >> np.uint32(16)).astype(np.uint16)
    return np.asarray(values).astype(STORAGE[dtype])


def from_storage(raw: np.ndarray, dtype: str, coeff: bool = False) -> np.ndarray:
    """Memory contents -> the interpreter's arrays: 32-bit integer weights
    as float64 (exact, as the TPU interpreter decodes them), everything else
    float32."""
    if dtype == "bf16":
        return (raw.astype(np.uint32) << np.uint32(16)).view(np.float32)
    if coeff and dtype in ("i32", "u32"):
        return raw.astype(np.float64)
    return raw.astype(np.float32)


__all__ = [
    "DEVICE_TYPES",
    "DTYPE_BYTES",
    "DTYPE_CODES",
    "DTYPE_NAMES",
    "ELEMENT_TYPES",
    "STORAGE",
    "ElementType",
    "from_storage",
    "to_storage",
]
