"""What a kernel needs to know about an operand's or a result's elements.

The kernel library never sees IR types: an adapter turns each one into an
`Element` (a quantized type's storage name, scale, zero point and storage
range; a float type's name) once per op.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpuc.base.dtypes import ELEMENT_TYPES


@dataclass(frozen=True)
class Element:
    """A stored element type: `dtype` names an entry of `tpuc.base.dtypes`
    (storage of a quantized type: "i8", "u8", …). Quantized when `scale` is
    set: real = scale · (q − zero_point), q in [qmin, qmax]."""

    dtype: str
    scale: float | None = None
    zero_point: int = 0
    qmin: int = 0
    qmax: int = 0

    def __post_init__(self) -> None:
        if self.dtype not in ELEMENT_TYPES:
            raise ValueError(f"unknown element type {self.dtype!r}")

    @property
    def quantized(self) -> bool:
        return self.scale is not None

    @property
    def signed(self) -> bool:
        return self.qmin < 0

    def term_bound(self) -> int:
        """The largest |q − Z| a tensor of this type can hold."""
        return max(self.qmax - self.zero_point, self.zero_point - self.qmin)


F32 = Element("f32")


def quantized(dtype: str, scale: float, zero_point: int, qmin: int, qmax: int) -> Element:
    """A quantized element (the usual way to write one in tests)."""
    return Element(dtype, float(scale), int(zero_point), int(qmin), int(qmax))
