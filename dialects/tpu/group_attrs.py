"""Typed attributes of layer groups: slices, window pads, an op's local placement.

A group (`tpu.Group`, see `group`) runs its body once per slice index;
these attributes say which part of each tensor a slice is and where it
sits in local memory (per-lane byte addresses, docs/layer-group.md
"In the IR"):

    #tpu.slices<n = [(0, 1)], h = [(0, 15), (13, 16)], w = [(0, 56)]>
        per axis, one (offset, size) per slice index along that axis;
    #tpu.pads<h = [(1, 0, 0), (0, 1, 0)], w = [(1, 1, 0)]>
        a window op's (begin pad, end pad, output padding) per slice index;
    #tpu.read<operand = 0, slices = #tpu.slices<...>>
        the part of an operand's slice an op reads, when it holds more;
    #tpu.local<ts = 1, stage = 1, addr = 0, size = 4096, slices = ...>
        an op of a group: its timestep, pipeline stage, result buffer
        (address, per-lane bytes), scratch buffer, slices, pads, reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, NoneAttr
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

SLICE_AXES = ("n", "h", "w")
PAD_AXES = ("h", "w")
Tuples = list[tuple[int, ...]]


def _flat(tuples: Sequence[Sequence[int]]) -> ArrayAttr[IntAttr]:
    return ArrayAttr([IntAttr(int(x)) for t in tuples for x in t])


def _tuples(flat: ArrayAttr[IntAttr], width: int) -> Tuples:
    values = [a.data for a in flat.data]
    return [tuple(values[i : i + width]) for i in range(0, len(values), width)]


def _parse_tuple(parser: AttrParser, width: int) -> list[int]:
    values = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_integer)
    if len(values) != width:
        parser.raise_error(f"expected {width} integers in a tuple, got {len(values)}")
    return values


class _Tuples(ParametrizedAttribute):
    """Per axis, a list of integer tuples of `WIDTH` (flat in the parameter)."""

    AXES: ClassVar[tuple[str, ...]] = ()
    WIDTH: ClassVar[int] = 2

    def axis(self, name: str) -> Tuples:
        return _tuples(getattr(self, name), self.WIDTH)

    def as_dict(self) -> dict[str, Tuples]:
        return {a: self.axis(a) for a in self.AXES}

    @classmethod
    def of(cls, per_axis: dict[str, Sequence[Sequence[int]]]):
        return cls(*(_flat(per_axis[a]) for a in cls.AXES))

    def verify(self) -> None:
        for a in self.AXES:
            if len(getattr(self, a).data) % self.WIDTH:
                raise VerifyException(f"{self.name}: axis {a} is not a list of {self.WIDTH}-tuples")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        params = []
        with parser.in_angle_brackets():
            for i, a in enumerate(cls.AXES):
                if i:
                    parser.parse_punctuation(",")
                parser.parse_keyword(a)
                parser.parse_punctuation("=")
                found = parser.parse_comma_separated_list(
                    parser.Delimiter.SQUARE, lambda: _parse_tuple(parser, cls.WIDTH)
                )
                params.append(_flat(found))
        return params

    def print_parameters(self, printer: Printer) -> None:
        parts = []
        for a in self.AXES:
            tuples = ", ".join("(" + ", ".join(map(str, t)) + ")" for t in self.axis(a))
            parts.append(f"{a} = [{tuples}]")
        printer.print_string("<" + ", ".join(parts) + ">")


@irdl_attr_definition
class SlicesAttr(_Tuples):
    """A tensor's slices: per axis n, h, w one (offset, size) per slice index."""

    name = "tpu.slices"
    AXES = SLICE_AXES
    WIDTH = 2

    n: ArrayAttr[IntAttr]
    h: ArrayAttr[IntAttr]
    w: ArrayAttr[IntAttr]

    def verify(self) -> None:
        super().verify()
        for a in self.AXES:
            for offset, size in self.axis(a):
                if offset < 0 or size <= 0:
                    raise VerifyException(
                        f"tpu.slices: axis {a} has slice ({offset}, {size}): "
                        "offsets must be >= 0 and sizes > 0"
                    )

    def counts(self) -> tuple[int, ...]:
        return tuple(len(self.axis(a)) for a in self.AXES)


@irdl_attr_definition
class PadsAttr(_Tuples):
    """A window op's pads per slice: (begin, end, output padding) along h and w."""

    name = "tpu.pads"
    AXES = PAD_AXES
    WIDTH = 3

    h: ArrayAttr[IntAttr]
    w: ArrayAttr[IntAttr]


class _Record(ParametrizedAttribute):
    """`<key = value, ...>`: integers bare, other parameters as attributes;
    parameters named in `DEFAULTS` are left out when they hold the default."""

    DEFAULTS: ClassVar[dict[str, Attribute]] = {}

    def fields(self) -> list[tuple[str, Attribute]]:
        names = [p[0] for p in self.get_irdl_definition().parameters]
        return list(zip(names, self.parameters, strict=True))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        names = [p[0] for p in cls.get_irdl_definition().parameters]
        found: dict[str, Attribute] = {}
        with parser.in_angle_brackets():
            while True:
                key = parser.parse_identifier(f" (one of {', '.join(names)})")
                if key not in names or key in found:
                    parser.raise_error(f"{cls.name}: unexpected or repeated key '{key}'")
                parser.parse_punctuation("=")
                number = parser.parse_optional_integer()
                found[key] = IntAttr(number) if number is not None else parser.parse_attribute()
                if parser.parse_optional_punctuation(",") is None:
                    break
        missing = [n for n in names if n not in found and n not in cls.DEFAULTS]
        if missing:
            parser.raise_error(f"{cls.name}: missing {', '.join(missing)}")
        return [found.get(n, cls.DEFAULTS.get(n)) for n in names]  # type: ignore[misc]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        first = True
        for key, value in self.fields():
            if self.DEFAULTS.get(key) == value:
                continue
            printer.print_string(("" if first else ", ") + f"{key} = ")
            first = False
            if isinstance(value, IntAttr):
                printer.print_string(str(value.data))
            else:
                printer.print_attribute(value)
        printer.print_string(">")


@irdl_attr_definition
class ReadAttr(_Record):
    """The slices of operand `operand` an op reads (its buffer holds more)."""

    name = "tpu.read"

    operand: IntAttr
    slices: SlicesAttr


@irdl_attr_definition
class LocalAttr(_Record):
    """Where an op of a group runs (the attribute `lg` of the op)."""

    name = "tpu.local"
    DEFAULTS = {
        "buffer_addr": IntAttr(0),
        "buffer_size": IntAttr(0),
        "pads": NoneAttr(),
        "reads": ArrayAttr([]),
    }

    ts: IntAttr
    stage: IntAttr
    addr: IntAttr
    size: IntAttr
    buffer_addr: IntAttr
    buffer_size: IntAttr
    slices: SlicesAttr
    pads: PadsAttr | NoneAttr
    reads: ArrayAttr[ReadAttr]

    def verify(self) -> None:
        for key in ("ts", "stage", "addr", "size", "buffer_addr", "buffer_size"):
            if getattr(self, key).data < 0:
                raise VerifyException(f"tpu.local: {key} must be >= 0")

    @staticmethod
    def make(
        ts: int,
        stage: int,
        addr: int,
        size: int,
        slices: SlicesAttr,
        buffer: tuple[int, int] = (0, 0),
        pads: PadsAttr | None = None,
        reads: Sequence[ReadAttr] = (),
    ) -> LocalAttr:
        ints = [IntAttr(x) for x in (ts, stage, addr, size, *buffer)]
        return LocalAttr(*ints, slices, pads or NoneAttr(), ArrayAttr(list(reads)))

    def read_slices(self) -> dict[int, SlicesAttr]:
        return {r.operand.data: r.slices for r in self.reads.data}


GROUP_ATTRS = [SlicesAttr, PadsAttr, ReadAttr, LocalAttr]

__all__ = [
    "GROUP_ATTRS",
    "PAD_AXES",
    "SLICE_AXES",
    "LocalAttr",
    "PadsAttr",
    "ReadAttr",
    "SlicesAttr",
]
