"""The TPU interpreter on small hand-written TPU modules.

References are independent of the code under test: numpy on the stored
integers for data movement, hand-written vectors, and the TOP interpreter /
TOP kernels for float mode (an F32 TPU module must match TOP bit for bit,
an F16/BF16 one must equal TOP's kernels with rounding after each op).
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import IntegerType, Signedness, bf16, f16, f32, i8, i32

from tpuc.base.errors import TpucError
from tpuc.base.numerics import bf16_bits, to_bf16, to_f16
from tpuc.dialects import top
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.interp.top_interpreter import TopInterpreter, run_top
from tpuc.interp.top_ops import KERNELS
from tpuc.interp.tpu_interpreter import TpuInterpreter, decode_weight, run_tpu
from tpuc.ir.module_io import parse_module
from tpuc.kernels.executor import Executor

RNG = np.random.default_rng(7)
Q = "!quant.uniform<i8:f32, 1.0>"  # scale 1: real values are the stored integers


def tensor(shape, element: str) -> str:
    return f"tensor<{''.join(f'{d}x' for d in shape)}{element}>"


def int_module(op: str, attrs: str, in_shape, out_shape, qtype: str = Q) -> str:
    """x (f32) -> tpu.Cast to `qtype` ("q") -> `op` ("y"), returning y."""
    fin, qin, qout = tensor(in_shape, "f32"), tensor(in_shape, qtype), tensor(out_shape, qtype)
    return f"""
builtin.module {{
  func.func @main(%arg0: {fin}) -> {qout} {{
    %0 = "top.Input"(%arg0) {{name = "x"}} : ({fin}) -> {fin}
    %1 = "tpu.Cast"(%0) {{name = "q"}} : ({fin}) -> {qin}
    %2 = "{op}"(%1) {{name = "y"{", " + attrs if attrs else ""}}} : ({qin}) -> {qout}
    func.return %2 : {qout}
  }}
}}
"""


def ints(*shape: int, low: int = -128, high: int = 128) -> np.ndarray:
    return RNG.integers(low, high, size=shape).astype(np.float32)


# --- data movement on stored integers ------------------------------------------------------

X134 = ints(1, 3, 4)
X1122 = ints(1, 1, 2, 2)

DATA_CASES = [
    ("tpu.Reshape", "shape = [3, 4]", X134, (3, 4), lambda x: x.reshape(3, 4)),
    ("tpu.Permute", "order = [0, 2, 1]", X134, (1, 4, 3), lambda x: x.transpose(0, 2, 1)),
    (
        "tpu.Slice",
        "offset = [0, 1, 0], ends = [1, 3, 4], steps = [1, 1, 2]",
        X134,
        (1, 2, 2),
        lambda x: x[:, 1:3, 0:4:2],
    ),
    (
        "tpu.Pad",
        "paddings = [0, 0, 1, 0, 0, 2], val = -3.0",
        X134,
        (1, 3, 7),
        lambda x: np.pad(x, [(0, 0), (0, 0), (1, 2)], constant_values=-3),
    ),
    ("tpu.Tile", "tile = [1, 2, 1]", X134, (1, 6, 4), lambda x: np.tile(x, (1, 2, 1))),
    (
        "tpu.Upsample",
        "scale_h = 2 : i64, scale_w = 2 : i64",
        X1122,
        (1, 1, 4, 4),
        lambda x: x.repeat(2, axis=2).repeat(2, axis=3),
    ),
    (
        "tpu.Interp",
        'target_shape = [4, 4], mode = "nearest"',
        X1122,
        (1, 1, 4, 4),
        lambda x: x.repeat(2, axis=2).repeat(2, axis=3),
    ),
    (
        "tpu.Depth2Space",
        "block_h = 2 : i64, block_w = 2 : i64",
        ints(1, 4, 1, 1),
        (1, 1, 2, 2),
        lambda x: x.reshape(1, 1, 2, 2),
    ),
    (
        "tpu.Reduce",
        'axes = [1], keepdims = true, mode = "ReduceMin"',
        X134,
        (1, 1, 4),
        lambda x: x.min(axis=1, keepdims=True),
    ),
    (
        "tpu.Pool2D",
        'pool_mode = "Max", kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1]',
        ints(1, 1, 3, 3, low=-128, high=-100),  # negative: the padding must never win
        (1, 1, 3, 3),
        lambda x: np.array(
            [
                [x[0, 0, max(i - 1, 0) : i + 2, max(j - 1, 0) : j + 2].max() for j in range(3)]
                for i in range(3)
            ]
        ).reshape(1, 1, 3, 3),
    ),
]


@pytest.mark.parametrize(
    ("op", "attrs", "x", "out_shape", "reference"), DATA_CASES, ids=[c[0] for c in DATA_CASES]
)
def test_data_movement_on_stored_integers(op, attrs, x, out_shape, reference):
    module = parse_module(int_module(op, attrs, x.shape, out_shape))
    y = TpuInterpreter(module).run({}, {"x": x})["y"]
    np.testing.assert_array_equal(y, reference(x).astype(np.float32))


def test_split_and_gather_on_stored_integers():
    text = f"""
builtin.module {{
  func.func @main(%arg0: tensor<2x6xf32>) -> ({tensor((2, 2), Q)}, {tensor((2, 4), Q)}) {{
    %0 = "top.Input"(%arg0) {{name = "x"}} : (tensor<2x6xf32>) -> tensor<2x6xf32>
    %1 = "tpu.Cast"(%0) {{name = "q"}} : (tensor<2x6xf32>) -> {tensor((2, 6), Q)}
    %2:2 = "tpu.Split"(%1) {{name = "s", result_names = ["s0", "s1"], axis = 1 : i64,
        split_size = [2, 4]}} : ({tensor((2, 6), Q)}) -> ({tensor((2, 2), Q)}, {tensor((2, 4), Q)})
    %3 = "top.Weight"() {{name = "idx", value = dense<[3.0, 0.0]> : tensor<2xf32>}}
        : () -> tensor<2xf32>
    %4 = "tpu.Gather"(%2#1, %3) {{name = "g", axis = 1 : i64}}
        : ({tensor((2, 4), Q)}, tensor<2xf32>) -> {tensor((2, 2), Q)}
    func.return %4, %2#1 : {tensor((2, 2), Q)}, {tensor((2, 4), Q)}
  }}
}}
"""
    x = ints(2, 6)
    out = TpuInterpreter(parse_module(text)).run({}, {"x": x})
    np.testing.assert_array_equal(out["s1"], x[:, 2:])
    np.testing.assert_array_equal(out["g"], x[:, 2:][:, [3, 0]])


def test_max_with_fused_relu_clamps_at_the_zero_point():
    qt = "!quant.uniform<i8:f32, 0.5:-5>"
    t = tensor((6,), qt)
    text = f"""
builtin.module {{
  func.func @main(%arg0: tensor<6xf32>, %arg1: tensor<6xf32>) -> {t} {{
    %0 = "top.Input"(%arg0) {{name = "a"}} : (tensor<6xf32>) -> tensor<6xf32>
    %1 = "top.Input"(%arg1) {{name = "b"}} : (tensor<6xf32>) -> tensor<6xf32>
    %2 = "tpu.Cast"(%0) {{name = "qa"}} : (tensor<6xf32>) -> {t}
    %3 = "tpu.Cast"(%1) {{name = "qb"}} : (tensor<6xf32>) -> {t}
    %4 = "tpu.Max"(%2, %3) {{name = "y", do_relu = true, relu_limit = 2.0}} : ({t}, {t}) -> {t}
    func.return %4 : {t}
  }}
}}
"""
    # stored q = x / 0.5 - 5: a -> [-13, -7, -5, -3, 1, 9], b -> [-15, -9, -6, -4, 0, -20]
    a = np.array([-4, -1, 0, 1, 3, 7], np.float32)
    b = np.array([-5, -2, -0.5, 0.5, 2.5, -7.5], np.float32)
    out = TpuInterpreter(parse_module(text)).run({}, {"a": a, "b": b}, dump_all=True)
    assert out["qa"].tolist() == [-13, -7, -5, -3, 1, 9]
    # max -> [-13, -7, -5, -3, 1, 9]; relu in integers: clamp to [Z, Z + 2/0.5] = [-5, -1]
    assert out["y"].tolist() == [-5, -5, -5, -3, -1, -1]


def test_data_movement_requires_one_quantized_type():
    text = int_module("tpu.Reshape", "shape = [4]", (2, 2), (4,)).replace(
        tensor((4,), Q), tensor((4,), "!quant.uniform<i8:f32, 0.5>")
    )
    with pytest.raises(TpucError, match="tpu.Reshape 'y'.*share one quantized type"):
        TpuInterpreter(parse_module(text)).run({}, {"x": np.zeros((2, 2), np.float32)})


def test_interp_linear_has_no_integer_form():
    text = int_module(
        "tpu.Interp", 'target_shape = [4, 4], mode = "linear"', X1122.shape, (1, 1, 4, 4)
    )
    with pytest.raises(TpucError, match="tpu.Interp 'y'.*'linear'"):
        TpuInterpreter(parse_module(text)).run({}, {"x": X1122})


# --- kernel lookup, weights, inputs, real values -------------------------------------------------


def test_missing_kernels_are_listed_with_their_kind():
    q = tensor((4,), Q)
    text = f"""
builtin.module {{
  func.func @main(%arg0: tensor<4xf32>) -> {q} {{
    %0 = "top.Input"(%arg0) {{name = "x"}} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "tpu.Cast"(%0) {{name = "q"}} : (tensor<4xf32>) -> {q}
    %2 = "tpu.Sigmoid"(%1) {{name = "s"}} : ({q}) -> {q}
    %3 = "tpu.Softmax"(%2) {{name = "t", axis = 0 : i64}} : ({q}) -> {q}
    %4 = "tpu.Sigmoid"(%3) {{name = "u"}} : ({q}) -> {q}
    %5 = "tpu.RequantInt"(%0) {{name = "r"}} : (tensor<4xf32>) -> tensor<4xf32>
    func.return %4 : {q}
  }}
}}
"""
    with pytest.raises(TpucError) as info:
        TpuInterpreter(parse_module(text))
    message = str(info.value)
    assert "\n" not in message
    assert message.endswith(
        "no kernel for: tpu.RequantInt (float), tpu.Sigmoid (int), tpu.Softmax (int)"
    )


SI8 = IntegerType(8, Signedness.SIGNED)
UI8 = IntegerType(8, Signedness.UNSIGNED)


def test_decode_weight_by_declared_type():
    i8_data = np.array([-128, 5, 127], np.int8)
    for element in (SI8, i8):
        y = decode_weight("w", element, i8_data)
        assert y.dtype == np.float32 and y.tolist() == [-128, 5, 127]
    y = decode_weight("q", UniformQuantizedType("i8", 0.5), i8_data)
    assert y.dtype == np.float32 and y.tolist() == [-128, 5, 127]  # stored integers
    y = decode_weight("w", UI8, np.array([0, 200, 255], np.uint8))
    assert y.dtype == np.float32 and y.tolist() == [0, 200, 255]
    big = np.array([2**31 - 1, -(2**31), 16777217], np.int32)  # not exact in float32
    y = decode_weight("b", i32, big)
    assert y.dtype == np.float64 and y.tolist() == [2**31 - 1, -(2**31), 16777217]
    y = decode_weight("h", f16, np.array([0.1, 65504], np.float16))
    assert y.dtype == np.float32 and y.tolist() == [0.0999755859375, 65504.0]
    bits = np.array([0x3F81, 0xC000, 0x7F80], np.uint16)  # 1.0078125, -2, inf
    y = decode_weight("g", bf16, bits)
    assert y.dtype == np.float32 and y.tolist() == [1.0078125, -2.0, np.inf]
    y = decode_weight("f", f32, np.array([0.1], np.float64))
    assert y.dtype == np.float32 and y[0] == np.float32(0.1)


@pytest.mark.parametrize(
    ("element", "data", "message"),
    [
        (SI8, np.array([1.5], np.float32), "declared si8 but holds float32"),
        (f16, np.array([1.5], np.float32), "declared f16"),
        (bf16, np.array([1.5], np.float32), "declared bf16.*uint16"),
    ],
)
def test_decode_weight_rejects_other_data(element, data, message):
    with pytest.raises(TpucError, match=f"weight 'w' is {message}"):
        decode_weight("w", element, data)


def test_weights_from_the_store_and_inline_through_a_run():
    text = """
builtin.module {
  func.func @main(%arg0: tensor<1xf32>)
      -> (tensor<2xsi8>, tensor<2xi32>, tensor<2xbf16>, tensor<2xi32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1xf32>) -> tensor<1xf32>
    %1 = "top.Weight"() {name = "w"} : () -> tensor<2xsi8>
    %2 = "top.Weight"() {name = "b"} : () -> tensor<2xi32>
    %3 = "top.Weight"() {name = "g"} : () -> tensor<2xbf16>
    %4 = "top.Weight"() {name = "c", value = dense<[16777217, -3]> : tensor<2xi32>}
        : () -> tensor<2xi32>
    func.return %1, %2, %3, %4 : tensor<2xsi8>, tensor<2xi32>, tensor<2xbf16>, tensor<2xi32>
  }
}
"""
    weights = {
        "w": np.array([-7, 100], np.int8),
        "b": np.array([123456789, -5], np.int32),
        "g": bf16_bits(np.array([1.5, -0.25], np.float32)),
    }
    out = TpuInterpreter(parse_module(text)).run(weights, {"x": np.zeros(1, np.float32)})
    assert out["w"].tolist() == [-7, 100]
    assert out["b"].dtype == np.float64 and out["b"].tolist() == [123456789, -5]
    assert out["g"].tolist() == [1.5, -0.25]
    assert out["c"].tolist() == [16777217, -3]
    with pytest.raises(TpucError, match="weight 'b' is missing"):
        TpuInterpreter(parse_module(text)).run({"w": weights["w"]}, {"x": np.zeros(1)})


def test_run_tpu_returns_real_values_and_inputs_take_their_type():
    qt = "!quant.uniform<u8:f32, 0.25:3>"
    text = f"""
builtin.module {{
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<2xf32>)
      -> ({tensor((4,), qt)}, tensor<2xf16>) {{
    %0 = "top.Input"(%arg0) {{name = "x"}} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "tpu.Cast"(%0) {{name = "q"}} : (tensor<4xf32>) -> {tensor((4,), qt)}
    %2 = "top.Input"(%arg1) {{name = "h"}} : (tensor<2xf32>) -> tensor<2xf16>
    func.return %1, %2 : {tensor((4,), qt)}, tensor<2xf16>
  }}
}}
"""
    module = parse_module(text)
    inputs = {"x": np.array([-5, 100, 0.125, 1.0], np.float32), "h": np.array([0.1, 1 + 2**-11])}
    stored = TpuInterpreter(module).run({}, inputs)
    assert stored["q"].tolist() == [0, 255, 4, 7]
    real = run_tpu(module, {}, inputs)
    assert real["q"].tolist() == [-0.75, 63.0, 0.25, 1.0]
    assert real["h"].tolist() == [0.0999755859375, 1.0]  # f16 nearest to 0.1; tie to even
    everything = run_tpu(module, {}, inputs, dump_all=True)
    assert set(everything) == {"x", "q", "h"}


# --- float mode: TPU ops compute as TOP, rounded to their type ---------------------------------

TOP_NET = """
builtin.module {
  func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x4x4xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
    %1 = "top.Weight"() {name = "w"} : () -> tensor<4x3x3x3xf32>
    %2 = "top.Weight"() {name = "b"} : () -> tensor<4xf32>
    %3 = "top.Conv"(%0, %1, %2) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1],
        dilations = [1, 1], group = 1 : i64, do_relu = true, relu_limit = 6.0, name = "conv"}
        : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
    %4 = "top.SiLU"(%3) {name = "act"} : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
    %5 = "top.MaxPool"(%4) {kernel_shape = [2, 2], strides = [2, 2], pads = [0, 0, 0, 0],
        name = "pool"} : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
    func.return %5 : tensor<1x4x4x4xf32>
  }
}
"""


def tpu_net(e: str) -> str:
    """TOP_NET lowered to TPU ops in element type `e` (casts around it)."""
    cast_in = f'"tpu.Cast"(%0) {{name = "xe"}} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8x{e}>'
    return f"""
builtin.module {{
  func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x4x4x4xf32> {{
    %0 = "top.Input"(%arg0) {{name = "x"}} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
    %x = {cast_in}
    %1 = "top.Weight"() {{name = "w"}} : () -> tensor<4x3x3x3x{e}>
    %2 = "top.Weight"() {{name = "b"}} : () -> tensor<4x{e}>
    %3 = "tpu.Conv2D"(%x, %1, %2) {{kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1],
        dilations = [1, 1], group = 1 : i64, do_relu = true, relu_limit = 6.0, name = "conv"}}
        : (tensor<1x3x8x8x{e}>, tensor<4x3x3x3x{e}>, tensor<4x{e}>) -> tensor<1x4x8x8x{e}>
    %4 = "tpu.Active"(%3) {{mode = "SILU", name = "act"}}
        : (tensor<1x4x8x8x{e}>) -> tensor<1x4x8x8x{e}>
    %5 = "tpu.Pool2D"(%4) {{pool_mode = "Max", kernel_shape = [2, 2], strides = [2, 2],
        pads = [0, 0, 0, 0], name = "pool"}} : (tensor<1x4x8x8x{e}>) -> tensor<1x4x4x4x{e}>
    %6 = "tpu.Cast"(%5) {{name = "out"}} : (tensor<1x4x4x4x{e}>) -> tensor<1x4x4x4xf32>
    func.return %6 : tensor<1x4x4x4xf32>
  }}
}}
"""


@pytest.fixture(scope="module")
def net_data():
    weights = {
        "w": RNG.uniform(-1, 1, (4, 3, 3, 3)).astype(np.float32),
        "b": RNG.uniform(-1, 1, 4).astype(np.float32),
    }
    return weights, {"x": RNG.uniform(-2, 2, (1, 3, 8, 8)).astype(np.float32)}


def test_f32_tpu_module_matches_the_top_interpreter_bit_for_bit(net_data):
    """Bit for bit with the TOP interpreter's numpy path (one kernel
    library); within float32 rounding of its native (onnxruntime) path."""
    weights, inputs = net_data
    top_module = parse_module(TOP_NET)
    ref = TopInterpreter(top_module, native=False).run(weights, inputs, dump_all=True)
    out = run_tpu(parse_module(tpu_net("f32")), weights, inputs, dump_all=True)
    for name in ("conv", "act", "pool"):
        np.testing.assert_array_equal(out[name], ref[name], err_msg=name)
    np.testing.assert_array_equal(out["out"], ref["pool"])
    native = run_top(top_module, weights, inputs, dump_all=True, native=True)
    for name in ("conv", "act", "pool"):
        np.testing.assert_allclose(out[name], native[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize(
    ("element", "rounding", "encode"),
    [
        ("f16", to_f16, lambda a: a.astype(np.float16)),
        ("bf16", to_bf16, bf16_bits),
    ],
)
def test_half_precision_module_rounds_after_each_op(net_data, element, rounding, encode):
    weights, inputs = net_data
    top_ops = {op.names[0]: op for op in parse_module(TOP_NET).walk() if hasattr(op, "names")}
    w, b = (rounding(weights[k]) for k in ("w", "b"))
    x = rounding(inputs["x"])
    # The kernels run under the interpreter's default thread setting: float
    # sums are only promised identical between runs of the same setting.
    with Executor().active():
        exact_conv = KERNELS[top.ConvOp](top_ops["conv"], [x, w, b]).copy()
        conv = rounding(exact_conv)
        act = rounding(KERNELS[top.SiLUOp](top_ops["act"], [conv]).copy())
        pool = rounding(KERNELS[top.MaxPoolOp](top_ops["pool"], [act]).copy())
    assert not np.array_equal(conv, exact_conv)

    stored = {k: encode(v) for k, v in weights.items()}
    out = TpuInterpreter(parse_module(tpu_net(element))).run(stored, inputs, dump_all=True)
    for name, ref in (("xe", x), ("conv", conv), ("act", act), ("pool", pool), ("out", pool)):
        np.testing.assert_array_equal(out[name], ref, err_msg=name)


def test_multi_result_float_op_rounds_each_result_by_its_type():
    text = """
builtin.module {
  func.func @main(%arg0: tensor<1x3000xf32>) -> (tensor<1x1xf16>, tensor<1x1xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x3000xf32>) -> tensor<1x3000xf32>
    %1:2 = "tpu.TopK"(%0) {name = "t", result_names = ["v", "i"], K = 1 : i64, axis = 1 : i64}
        : (tensor<1x3000xf32>) -> (tensor<1x1xf16>, tensor<1x1xf32>)
    func.return %1#0, %1#1 : tensor<1x1xf16>, tensor<1x1xf32>
  }
}
"""
    x = np.zeros((1, 3000), np.float32)
    x[0, 2049] = 1 + 2**-11  # the f16 tie rounds to 1.0; 2049 is no f16 value
    out = run_tpu(parse_module(text), {}, {"x": x})
    assert out["v"].tolist() == [[1.0]] and out["i"].tolist() == [[2049.0]]


def test_unknown_active_mode_names_the_op():
    text = int_module("tpu.Active", 'mode = "FROB"', (2,), (2,), "f32")
    with pytest.raises(TpucError, match="tpu.Active 'y': unknown mode 'FROB'"):
        TpuInterpreter(parse_module(text)).run({}, {"x": np.zeros(2, np.float32)})


def test_progress_bar_is_labelled_tpu(capsys):
    module = parse_module(int_module("tpu.Reshape", "shape = [4]", (2, 2), (4,)))
    interpreter = TpuInterpreter(module)
    assert interpreter.title == "TPU interpreter"
    interpreter.run({}, {"x": np.ones((2, 2), np.float32)}, progress=True)
    assert "TPU interpreter" in capsys.readouterr().err
