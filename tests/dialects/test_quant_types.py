"""The quant types: MLIR's text forms round-trip, accessors, verification,
and use as tensor element types inside a module."""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.dialects.builtin import Float16Type, IntegerType, Signedness, TensorType, f32
from xdsl.ir import Attribute
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from tpuc.dialects.quant import (
    CalibratedQuantizedType,
    QuantizedType,
    UniformQuantizedPerAxisType,
    UniformQuantizedType,
    format_float,
)
from tpuc.ir.context import make_context


def parse(text: str) -> Attribute:
    return Parser(make_context(), text).parse_type()


def show(attr: Attribute) -> str:
    out = StringIO()
    Printer(stream=out).print_attribute(attr)
    return out.getvalue()


@pytest.mark.parametrize(
    "text",
    [
        "!quant.uniform<i8:f32, 0.0078740157480315>",
        "!quant.uniform<u8:f32, 0.015:128>",
        "!quant.uniform<i8:f32, 0.0125:-3>",
        "!quant.uniform<i8<-127:127>:f32, 0.5>",
        "!quant.uniform<u8<1:255>:f16, 2.5:7>",
        "!quant.uniform<i16:f32, 3.0517578125e-05>",
        "!quant.uniform<u16:f32, 0.1:32768>",
        "!quant.uniform<i32:f32, 1.0e-08>",
        "!quant.uniform<i4:f32, 0.25:-8>",
        "!quant.uniform<i8:f32:1, {0.1,0.2:3}>",
        "!quant.uniform<u8:f32:0, {2.0,0.99872:120}>",
        "!quant.uniform<i8<-127:127>:f32:3, {0.5}>",
        "!quant.calibrated<f32<-0.99999:0.99999>>",
        "!quant.calibrated<f32<0.0:6.0>>",
        "!quant.calibrated<f16<-1.5e-07:3.25>>",
    ],
)
def test_canonical_text_round_trips(text):
    attr = parse(text)
    assert show(attr) == text
    assert parse(show(attr)) == attr


@pytest.mark.parametrize(
    "text, canonical",
    [
        # MLIR's own spellings: exponent floats, integer scales, default
        # ranges and zero points written out
        ("!quant.uniform<i8:f32, 2.0e+2>", "!quant.uniform<i8:f32, 200.0>"),
        ("!quant.uniform<i8:f32, 1:0>", "!quant.uniform<i8:f32, 1.0>"),
        ("!quant.uniform<i8<-128:127>:f32, 0.5>", "!quant.uniform<i8:f32, 0.5>"),
        (
            "!quant.uniform<i8:f32:1, {2.0e+2,0.99872:120}>",
            "!quant.uniform<i8:f32:1, {200.0,0.99872:120}>",
        ),
        # TPU-MLIR writes 17 significant digits
        (
            "!quant.uniform<i8:f32, 0.064606035433070863>",
            "!quant.uniform<i8:f32, 0.06460603543307086>",
        ),
        (
            "!quant.calibrated<f32<-2.6412898999999999:2.6412898999999999>>",
            "!quant.calibrated<f32<-2.6412899:2.6412899>>",
        ),
        ("!quant.calibrated<f32<-0.998:1.232100e+00>>", "!quant.calibrated<f32<-0.998:1.2321>>"),
    ],
)
def test_other_spellings_parse(text, canonical):
    assert show(parse(text)) == canonical


def test_accessors():
    u = parse("!quant.uniform<u8<1:255>:f32, 0.015:128>")
    assert isinstance(u, UniformQuantizedType) and isinstance(u, QuantizedType)
    assert (u.scale, u.zero_point, u.is_signed) == (0.015, 128, False)
    assert (u.storage_min, u.storage_max, u.storage_width, u.storage_dtype) == (1, 255, 8, "uint8")
    assert u.storage_type == IntegerType(8, Signedness.UNSIGNED)
    assert u.expressed_type == f32
    p = parse("!quant.uniform<i8:f16:1, {0.1,0.2:3}>")
    assert isinstance(p, UniformQuantizedPerAxisType) and not isinstance(p, UniformQuantizedType)
    assert (p.scales, p.zero_points, p.quantized_dimension) == ([0.1, 0.2], [0, 3], 1)
    assert p.is_signed and p.storage_dtype == "int8" and isinstance(p.expressed_type, Float16Type)
    c = parse("!quant.calibrated<f32<-0.5:2.0>>")
    assert isinstance(c, CalibratedQuantizedType)
    assert (c.min, c.max, c.expressed_type) == (-0.5, 2.0, f32)
    assert parse("!quant.uniform<i32:f32, 0.5>").storage_dtype == "int32"
    assert parse("!quant.uniform<i4:f32, 0.5>").storage_dtype == "int8"


def test_python_construction_prints_like_mlir():
    assert (
        show(UniformQuantizedType("i8", 1 / 127)) == "!quant.uniform<i8:f32, 0.007874015748031496>"
    )
    assert show(UniformQuantizedType("u8", 0.015, 128)) == "!quant.uniform<u8:f32, 0.015:128>"
    narrow = UniformQuantizedType("i8", 0.5, storage_min=-127)
    assert show(narrow) == "!quant.uniform<i8<-127:127>:f32, 0.5>"
    per_axis = UniformQuantizedPerAxisType("i8", [0.1, 0.2], [0, 3], quantized_dimension=1)
    assert show(per_axis) == "!quant.uniform<i8:f32:1, {0.1,0.2:3}>"
    assert (
        show(CalibratedQuantizedType(-0.99999, 0.99999))
        == "!quant.calibrated<f32<-0.99999:0.99999>>"
    )
    assert UniformQuantizedType(IntegerType(8), 0.5) == parse("!quant.uniform<i8:f32, 0.5>")


@pytest.mark.parametrize(
    "value, text",
    [(1 / 127, "0.007874015748031496"), (1e-05, "1.0e-05"), (200.0, "200.0"), (-3e20, "-3.0e+20")],
)
def test_float_format_is_shortest_round_trip(value, text):
    assert format_float(value) == text
    assert float(text) == value


@pytest.mark.parametrize(
    "text, message",
    [
        ("!quant.uniform<i8:f32, 0.0>", "illegal scale"),
        ("!quant.uniform<i8:f32, -0.5>", "illegal scale"),
        ("!quant.uniform<i8:f32, 0.5:128>", "illegal zero point 128"),
        ("!quant.uniform<u8:f32, 0.5:-1>", "illegal zero point -1"),
        ("!quant.uniform<i8<-127:127>:f32, 0.5:-128>", "illegal zero point -128"),
        ("!quant.uniform<i8:f32:1, {0.5,0.5:300}>", "illegal zero point 300"),
        ("!quant.uniform<i8:f32:0, {}>", "at least one scale"),
        ("!quant.uniform<i8<-200:0>:f32, 0.5>", "illegal storage range"),
        ("!quant.uniform<u8<10:5>:f32, 0.5>", "illegal storage range"),
        ("!quant.uniform<i64:f32, 0.5>", "illegal storage type size"),
        ("!quant.uniform<x8:f32, 0.5>", "storage type must be"),
        ("!quant.uniform<i8:i32, 0.5>", "expressed type must be a float"),
        ("!quant.calibrated<f32<1.0:-1.0>>", "illegal min and max"),
        ("!quant.calibrated<i8<-1.0:1.0>>", "expressed type must be a float"),
        ("!quant.calibrated<f32<-0.998>>", "Expected ':' between the calibrated min and max"),
    ],
)
def test_invalid_types_are_parse_errors(text, message):
    with pytest.raises(ParseError, match=message):
        parse(text)


def test_python_construction_verifies():
    with pytest.raises(VerifyException, match="illegal scale"):
        UniformQuantizedType("i8", 0.0)
    with pytest.raises(VerifyException, match="illegal zero point"):
        UniformQuantizedType("u8", 0.1, 256)
    with pytest.raises(VerifyException, match="one zero point per scale"):
        UniformQuantizedPerAxisType("i8", [0.1, 0.2], [0])
    with pytest.raises(VerifyException, match="illegal min and max"):
        CalibratedQuantizedType(2.0, 1.0)


def test_tensor_element_type_round_trip():
    plain = parse("tensor<1x16xf32>")
    assert isinstance(plain, TensorType)
    quantized = TensorType(UniformQuantizedType("i8", 0.5), plain.get_shape())
    assert show(quantized) == "tensor<1x16x!quant.uniform<i8:f32, 0.5>>"
    assert parse(show(quantized)) == quantized
    per_axis = TensorType(
        UniformQuantizedPerAxisType("i8", [0.5, 0.25], quantized_dimension=1), [3, 2]
    )
    assert parse(show(per_axis)) == per_axis


MODULE = """\
builtin.module attributes {module.chip = "ALL", module.name = "m", module.state = "TOP_CALIBRATED"} {
  func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:3.8337710>>> {
    %0 = "top.Input"(%arg0) {name = "in"} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8x!quant.calibrated<f32<-0.99999:0.99999>>>
    %1 = "top.Weight"() {name = "w"} : () -> tensor<4x3x3x3xf32>
    %2 = "top.None"() : () -> none
    %3 = "top.Conv"(%0, %1, %2) {name = "conv", kernel_shape = [3, 3], pads = [1, 1, 1, 1], do_relu = true} : (tensor<1x3x8x8x!quant.calibrated<f32<-0.99999:0.99999>>>, tensor<4x3x3x3xf32>, none) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:3.8337710>>>
    func.return %3 : tensor<1x4x8x8x!quant.calibrated<f32<0.0:3.8337710>>>
  }
  func.func @lowered(%arg0: tensor<1x16x!quant.uniform<i8:f32, 0.0078740157480315>>) -> tensor<1x16x!quant.uniform<u8:f32, 0.015:128>> {
    %0 = "top.Relu"(%arg0) {name = "r"} : (tensor<1x16x!quant.uniform<i8:f32, 0.0078740157480315>>) -> tensor<1x16x!quant.uniform<u8:f32, 0.015:128>>
    %1 = "top.Weight"() {name = "w8"} : () -> tensor<4x16x!quant.uniform<i8:f32:0, {0.1,0.2,0.3,0.4}>>
    func.return %0 : tensor<1x16x!quant.uniform<u8:f32, 0.015:128>>
  }
}
"""  # noqa: E501


def test_module_with_quant_types_parses_and_round_trips():
    module = Parser(make_context(), MODULE).parse_module()
    module.verify()
    out = StringIO()
    Printer(stream=out).print_op(module)
    printed = out.getvalue()
    assert "!quant.calibrated<f32<0.0:3.833771>>" in printed  # shortest form of 3.8337710
    assert "tensor<4x16x!quant.uniform<i8:f32:0, {0.1,0.2,0.3,0.4}>>" in printed
    again = Parser(make_context(), printed).parse_module()
    assert again.is_structurally_equivalent(module)


def test_types_differing_in_storage_are_not_equal():
    """i8 and u8 (or a narrowed range) with the same scale are different types."""
    from tpuc.dialects.quant import UniformQuantizedPerAxisType, UniformQuantizedType

    same = UniformQuantizedType("i8", 0.1, 3)
    assert same == UniformQuantizedType("i8", 0.1, 3)
    assert hash(same) == hash(UniformQuantizedType("i8", 0.1, 3))
    assert UniformQuantizedType("u8", 0.1, 3) != same
    assert UniformQuantizedType("i8", 0.1, 3, storage_min=-127) != same
    assert len({UniformQuantizedType("u8", 0.1, 3), same}) == 2
    axis = UniformQuantizedPerAxisType("i8", [0.1, 0.2], [0, 0])
    assert axis == UniformQuantizedPerAxisType("i8", [0.1, 0.2], [0, 0])
    assert UniformQuantizedPerAxisType("u8", [0.1, 0.2], [0, 0]) != axis
