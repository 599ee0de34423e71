"""MLIR's quant types, printed and parsed as MLIR (and TPU-MLIR) write them.

xDSL has no quant dialect, so tpuc defines the three types it needs:
- `!quant.uniform<i8:f32, 0.0078740157480315>` and
  `!quant.uniform<u8<1:255>:f32, 0.015:128>`: one scale (and zero point) per
  tensor; real = scale * (q - zero_point);
- `!quant.uniform<i8:f32:1, {0.1,0.2:3}>`: one scale/zero point per slice
  along the quantized dimension (here axis 1);
- `!quant.calibrated<f32<-0.99999:0.99999>>`: a float tensor with the value
  range found by calibration, before lowering picks scales.
The storage type is written `i<w>` (signed) or `u<w>` (unsigned); its range
and zero points are printed only when they differ from the defaults, as
MLIR does. Floats print in their shortest round-trip form (Python's repr),
always with a '.' so that MLIR's lexer reads them as floats.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    FloatData,
    IntAttr,
    IntegerType,
    Signedness,
    f32,
)
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

MAX_STORAGE_WIDTH = 32


def format_float(value: float) -> str:
    """Shortest text that parses back to `value`, with a '.' in the mantissa
    (`1e-05` -> `1.0e-05`) so MLIR lexes it as a float literal."""
    text = repr(float(value))
    mantissa, sep, exponent = text.partition("e")
    if "." not in mantissa and mantissa.lstrip("-").isdigit():
        mantissa += ".0"
    return mantissa + sep + exponent


def storage_type(kind: str | IntegerType) -> IntegerType:
    """`"i8"`/`"u8"`/`si8`/`ui8`/`i8` -> the signed or unsigned integer type
    tpuc stores (a signless `i8` counts as signed, as in MLIR's `i8`)."""
    if isinstance(kind, IntegerType):
        signed = kind.signedness.data != Signedness.UNSIGNED
        return IntegerType(kind.width.data, _signedness(signed))
    if len(kind) < 2 or kind[0] not in "iu" or not kind[1:].isdigit():
        raise ValueError(f"storage type must be i<width> or u<width>, got '{kind}'")
    return IntegerType(int(kind[1:]), _signedness(kind[0] == "i"))


def default_range(storage: IntegerType) -> tuple[int, int]:
    """Full range of a storage type: [-2^(w-1), 2^(w-1)-1] or [0, 2^w-1]."""
    width = storage.width.data
    if storage.signedness.data == Signedness.UNSIGNED:
        return 0, (1 << width) - 1
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def _signedness(signed: bool) -> Signedness:
    return Signedness.SIGNED if signed else Signedness.UNSIGNED


class QuantizedType(ParametrizedAttribute, TypeAttribute):
    """Shared storage part of the uniform types: `i8<-127:127>:f32`.
    `isinstance(t, QuantizedType)` holds for both uniform types."""

    storage_type: IntegerType
    expressed_type: Attribute
    storage_min_attr: IntAttr
    storage_max_attr: IntAttr

    @property
    def is_signed(self) -> bool:
        return self.storage_type.signedness.data != Signedness.UNSIGNED

    @property
    def storage_width(self) -> int:
        return self.storage_type.width.data

    @property
    def storage_min(self) -> int:
        return self.storage_min_attr.data

    @property
    def storage_max(self) -> int:
        return self.storage_max_attr.data

    @property
    def storage_dtype(self) -> str:
        """numpy dtype name holding the stored integers (e.g. "int8")."""
        bits = max(8, 1 << (self.storage_width - 1).bit_length())
        return f"{'' if self.is_signed else 'u'}int{bits}"

    def _verify_storage(self) -> None:
        width = self.storage_width
        if not 1 <= width <= MAX_STORAGE_WIDTH:
            raise VerifyException(f"illegal storage type size: {width}")
        low, high = default_range(self.storage_type)
        if not low <= self.storage_min <= self.storage_max <= high:
            raise VerifyException(
                f"illegal storage range <{self.storage_min}:{self.storage_max}> "
                f"for {self._storage_text()}"
            )
        if not isinstance(self.expressed_type, AnyFloat):
            raise VerifyException(f"expressed type must be a float type, got {self.expressed_type}")

    def _verify_zero_point(self, scale: float, zero_point: int) -> None:
        if not scale > 0.0 or scale == float("inf"):
            raise VerifyException(f"illegal scale: {scale} (must be positive and finite)")
        if not self.storage_min <= zero_point <= self.storage_max:
            raise VerifyException(
                f"illegal zero point {zero_point}: outside the storage range "
                f"[{self.storage_min}, {self.storage_max}]"
            )

    def _storage_text(self) -> str:
        return f"{'i' if self.is_signed else 'u'}{self.storage_width}"

    def _print_storage(self, printer: Printer) -> None:
        printer.print_string(self._storage_text())
        if (self.storage_min, self.storage_max) != default_range(self.storage_type):
            printer.print_string(f"<{self.storage_min}:{self.storage_max}>")
        printer.print_string(":")
        printer.print_attribute(self.expressed_type)


def _storage_params(
    storage: str | IntegerType,
    expressed: Attribute,
    storage_min: int | None,
    storage_max: int | None,
) -> tuple[IntegerType, Attribute, IntAttr, IntAttr]:
    stype = storage_type(storage)
    low, high = default_range(stype)
    low = low if storage_min is None else storage_min
    high = high if storage_max is None else storage_max
    return stype, expressed, IntAttr(low), IntAttr(high)


def _same_parameters(a: Attribute, b: object) -> bool:
    """Equality over every parameter, the storage part included: the
    generated dataclass equality of a subclass sees only the fields declared
    in that subclass, so i8 and u8 (or a narrowed range) compared equal."""
    return type(a) is type(b) and a.parameters == b.parameters  # type: ignore[attr-defined]


@irdl_attr_definition
class UniformQuantizedType(QuantizedType):
    """Per-tensor affine quantization: real = scale * (q - zero_point)."""

    name = "quant.uniform"

    scale_attr: FloatData
    zero_point_attr: IntAttr

    def __eq__(self, other: object) -> bool:
        return _same_parameters(self, other)

    def __hash__(self) -> int:
        return hash((type(self), self.parameters))

    def __init__(
        self,
        storage: str | IntegerType,
        scale: float,
        zero_point: int = 0,
        expressed: Attribute = f32,
        storage_min: int | None = None,
        storage_max: int | None = None,
    ):
        params = _storage_params(storage, expressed, storage_min, storage_max)
        super().__init__(*params, FloatData(float(scale)), IntAttr(int(zero_point)))

    @property
    def scale(self) -> float:
        return self.scale_attr.data

    @property
    def zero_point(self) -> int:
        return self.zero_point_attr.data

    def verify(self) -> None:
        self._verify_storage()
        self._verify_zero_point(self.scale, self.zero_point)

    @classmethod
    def new(cls, params: Sequence[Attribute]) -> UniformQuantizedType:
        """Both uniform forms share the name `quant.uniform`; the parser
        calls this class only, so the per-axis parameters build the per-axis
        class."""
        if len(params) == len(UniformQuantizedPerAxisType.get_irdl_definition().parameters):
            return UniformQuantizedPerAxisType.new(params)  # type: ignore[return-value]
        return super().new(params)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        start = parser.pos
        with parser.in_angle_brackets():
            storage = _parse_storage(parser)
            if parser.parse_optional_punctuation(":") is not None:
                params = (*storage, *_parse_per_axis_params(parser))
                return _verified(parser, start, UniformQuantizedPerAxisType, params)
            parser.parse_punctuation(",")
            scale, zero_point = _parse_scale_zero_point(parser)
        params = (*storage, FloatData(scale), IntAttr(zero_point))
        return _verified(parser, start, cls, params)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            self._print_storage(printer)
            printer.print_string(", ")
            printer.print_string(_scale_zero_point_text(self.scale, self.zero_point))


@irdl_attr_definition
class UniformQuantizedPerAxisType(QuantizedType):
    """Per-channel affine quantization along `quantized_dimension`."""

    name = "quant.uniform"

    scales_attr: ArrayAttr[FloatData]
    zero_points_attr: ArrayAttr[IntAttr]
    quantized_dimension_attr: IntAttr

    def __eq__(self, other: object) -> bool:
        return _same_parameters(self, other)

    def __hash__(self) -> int:
        return hash((type(self), self.parameters))

    def __init__(
        self,
        storage: str | IntegerType,
        scales: Sequence[float],
        zero_points: Sequence[int] | None = None,
        quantized_dimension: int = 0,
        expressed: Attribute = f32,
        storage_min: int | None = None,
        storage_max: int | None = None,
    ):
        params = _storage_params(storage, expressed, storage_min, storage_max)
        zps = [0] * len(scales) if zero_points is None else zero_points
        super().__init__(
            *params,
            ArrayAttr([FloatData(float(s)) for s in scales]),
            ArrayAttr([IntAttr(int(z)) for z in zps]),
            IntAttr(int(quantized_dimension)),
        )

    @property
    def scales(self) -> list[float]:
        return [s.data for s in self.scales_attr.data]

    @property
    def zero_points(self) -> list[int]:
        return [z.data for z in self.zero_points_attr.data]

    @property
    def quantized_dimension(self) -> int:
        return self.quantized_dimension_attr.data

    def verify(self) -> None:
        self._verify_storage()
        if len(self.scales) != len(self.zero_points):
            raise VerifyException("per-axis quantization needs one zero point per scale")
        if not self.scales:
            raise VerifyException("per-axis quantization needs at least one scale")
        if self.quantized_dimension < 0:
            raise VerifyException(f"illegal quantized dimension: {self.quantized_dimension}")
        for scale, zero_point in zip(self.scales, self.zero_points, strict=True):
            self._verify_zero_point(scale, zero_point)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        start = parser.pos
        with parser.in_angle_brackets():
            storage = _parse_storage(parser)
            parser.parse_punctuation(":", " before the quantized dimension")
            params = (*storage, *_parse_per_axis_params(parser))
        return _verified(parser, start, cls, params)

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            self._print_storage(printer)
            printer.print_string(f":{self.quantized_dimension}, {{")
            texts = (
                _scale_zero_point_text(s, z)
                for s, z in zip(self.scales, self.zero_points, strict=True)
            )
            printer.print_string(",".join(texts))
            printer.print_string("}")


@irdl_attr_definition
class CalibratedQuantizedType(ParametrizedAttribute, TypeAttribute):
    """A float tensor annotated with its calibrated range [min, max]."""

    name = "quant.calibrated"

    expressed_type: Attribute
    min_attr: FloatData
    max_attr: FloatData

    def __init__(self, min: float, max: float, expressed: Attribute = f32):
        super().__init__(expressed, FloatData(float(min)), FloatData(float(max)))

    @property
    def min(self) -> float:
        return self.min_attr.data

    @property
    def max(self) -> float:
        return self.max_attr.data

    def verify(self) -> None:
        if not isinstance(self.expressed_type, AnyFloat):
            raise VerifyException(f"expressed type must be a float type, got {self.expressed_type}")
        if not self.min <= self.max:
            raise VerifyException(
                f"illegal min and max: ({format_float(self.min)}:{format_float(self.max)})"
            )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        start = parser.pos
        with parser.in_angle_brackets():
            expressed = parser.parse_type()
            parser.parse_punctuation("<", " before the calibrated range")
            low = float(parser.parse_number())
            parser.parse_punctuation(":", " between the calibrated min and max")
            high = float(parser.parse_number())
            parser.parse_punctuation(">", " after the calibrated range")
        return _verified(parser, start, cls, (expressed, FloatData(low), FloatData(high)))

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.expressed_type)
            printer.print_string(f"<{format_float(self.min)}:{format_float(self.max)}>")


def _verified(
    parser: AttrParser,
    start: int,
    cls: type[ParametrizedAttribute],
    params: Sequence[Attribute],
) -> Sequence[Attribute]:
    """Check parsed parameters now, so a bad type is reported at its place in
    the file rather than as a bare verifier exception."""
    try:
        cls.new(params)
    except VerifyException as exc:
        parser.raise_error(str(exc), start, parser.pos)
    return params


def _parse_storage(parser: AttrParser) -> tuple[IntegerType, Attribute, IntAttr, IntAttr]:
    """`i8`, `u8<1:255>` then `:f32`."""
    pos = parser.pos
    kind = parser.parse_identifier(" (storage type i<width> or u<width>)")
    try:
        stype = storage_type(kind)
    except ValueError as exc:
        parser.raise_error(str(exc), pos, parser.pos)
    if not 1 <= stype.width.data <= MAX_STORAGE_WIDTH:
        parser.raise_error(f"illegal storage type size: {stype.width.data}", pos, parser.pos)
    low, high = default_range(stype)
    if parser.parse_optional_punctuation("<") is not None:
        low = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(":")
        high = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(">")
    parser.parse_punctuation(":", " between storage and expressed types")
    expressed = parser.parse_type()
    return stype, expressed, IntAttr(low), IntAttr(high)


def _parse_per_axis_params(parser: AttrParser) -> tuple[Attribute, Attribute, Attribute]:
    """`1, {0.1,0.2:3}` (after the ':' that follows the expressed type)."""
    axis = parser.parse_integer(allow_boolean=False, context_msg=" (quantized dimension)")
    parser.parse_punctuation(",")
    pairs = parser.parse_comma_separated_list(
        parser.Delimiter.BRACES, lambda: _parse_scale_zero_point(parser)
    )
    return (
        ArrayAttr([FloatData(s) for s, _ in pairs]),
        ArrayAttr([IntAttr(z) for _, z in pairs]),
        IntAttr(axis),
    )


def _parse_scale_zero_point(parser: AttrParser) -> tuple[float, int]:
    """`scale` or `scale:zero_point`."""
    scale = float(parser.parse_number(context_msg=" (scale)"))
    if parser.parse_optional_punctuation(":") is None:
        return scale, 0
    return scale, parser.parse_integer(allow_boolean=False)


def _scale_zero_point_text(scale: float, zero_point: int) -> str:
    text = format_float(scale)
    return text if zero_point == 0 else f"{text}:{zero_point}"


QUANT_TYPES = [UniformQuantizedType, UniformQuantizedPerAxisType, CalibratedQuantizedType]

# Only one class may own a name in a Dialect: UniformQuantizedType parses both
# uniform forms (see its `new`).
Quant = Dialect("quant", [], [UniformQuantizedType, CalibratedQuantizedType])
