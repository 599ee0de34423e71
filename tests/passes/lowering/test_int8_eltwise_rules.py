"""INT8 lowering of the elementwise, lookup-table and data-movement ops
(passes/lowering/int8_{eltwise,lut,data}.py) and the TPU cast patterns of
canonicalize.

Tiny TOP_CALIBRATED modules (MLIR text, inline weights) go through
processor-assign and convert-top-to-tpu; multipliers, tables, fill values
and result types are checked against values computed by hand or in float64
here; a few run on the TPU interpreter (the book's Add, folded casts).
Accuracy against onnxruntime: test_int8_eltwise_accuracy.py."""

from __future__ import annotations

import numpy as np
import pytest
from calibrated_net import Net
from xdsl.dialects.builtin import Float32Type

from tpuc.base.numerics import multiplier_rshift
from tpuc.base.numerics import shared_rshift_multipliers as eltwise_multipliers
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.ir.module_io import parse_module
from tpuc.ir.qparams import QuantParams
from tpuc.ir.weights import weights_of
from tpuc.passes.registry import get_pass

# --- tiny calibrated modules ----------------------------------------------------------------


def lower(text: str, chip: str = "bm1684x", asymmetric: bool = False):
    """The module lowered to INT8 for `chip`, with its weight store."""
    module = parse_module(text, "test")
    get_pass("processor-assign")(chip=chip, mode="INT8").apply(None, module)
    get_pass("convert-top-to-tpu")(asymmetric=asymmetric).apply(None, module)
    return module, weights_of(module)


def op_named(module, name: str):
    """The op computing tensor `name`: for a function output, the op before
    the Cast to f32 that took over its name."""
    func = next(iter(module.ops))
    for op in func.body.block.ops:
        if op.attributes.get("name") is not None and op.attributes["name"].data == name:
            if op.name == "tpu.Cast" and any(
                u.operation.name == "func.return" for u in op.results[0].uses
            ):
                return op.operands[0].owner
            return op
    raise KeyError(name)


def element(value):
    return value.type.element_type


def table_of(module, store, name: str) -> np.ndarray:
    lut = op_named(module, name)
    assert lut.name == "tpu.Lut"
    return store[lut.operands[1].owner.attributes["name"].data]


SHAPE = (1, 2, 4)

# --- Add / Sub / Mul / Concat ---------------------------------------------------------------


def add_net(coeff=None, kind="top.Add"):
    net = Net()
    a = net.input("a", SHAPE, (-4.0, 4.0))
    b = net.input("b", SHAPE, (-2.0, 2.0))
    attrs = {} if coeff is None else {"coeff": coeff}
    y = net.op(kind, [a, b], "y", SHAPE, (-5.0, 5.0), **attrs)
    return net.text(y)


def test_add_book_example_8bit():
    """TPU-MLIR book §5.4: thresholds 4, 2 -> 5 with 8-bit multipliers give
    M = (102, 51), rshift 7; q_a = 100, q_b = -50 -> 59.77 -> 60."""
    module, _ = lower(add_net(), chip="cv183x")
    add = op_named(module, "y")
    assert add.name == "tpu.Add"
    assert add.value("multiplier") == [102, 51] and add.value("rshift") == [7]
    assert round((100 * 102 + -50 * 51) / 2**7, 2) == 59.77


def test_add_u8_multipliers_and_coeff():
    """bm1684x: one unsigned 8-bit multiplier (its bcbinary ADD/SUB scales) in
    [128, 256) and one rshift per input, rounded half up as the chip does:
    0.8 = 205/2^8, 0.4 = 205/2^9; coeff folds in (and is dropped from the
    TPU op), Sub keeps positive multipliers."""
    module, _ = lower(add_net())
    add = op_named(module, "y")
    assert add.value("multiplier") == [205, 205] and add.value("rshift") == [8, 9]
    assert add.value("round_mode") == "HalfUp"
    module, _ = lower(add_net(coeff=[2, -1]))
    add = op_named(module, "y")
    assert add.value("multiplier") == [205, -205] and add.value("rshift") == [7, 9]
    assert add.value("coeff") is None
    module, _ = lower(add_net(kind="top.Sub"))
    sub = op_named(module, "y")
    assert sub.name == "tpu.Sub" and sub.value("multiplier") == [205, 205]
    assert sub.value("rshift") == [8, 9]


def test_term_multiplier_edges():
    """u8 multiplier and rshift >= 0 per input: 0.8 = 205/2^8; 3 = 192/2^6;
    a ratio of 256 or more saturates any non-zero term anyway (255, 0);
    below 2^-10 every 8-bit term rounds to 0, as (0, 0) computes it."""
    from tpuc.passes.lowering.int8_eltwise import term_multiplier

    assert term_multiplier(0.8) == (205, 8) and term_multiplier(3.0) == (192, 6)
    assert term_multiplier(-0.8) == (-205, 8)
    assert term_multiplier(300.0) == (255, 0)
    m, r = term_multiplier(2.0**-9)
    assert (m, r) == (128, 16)
    assert all((q * m + (1 << (r - 1))) >> r in (-1, 0, 1) for q in range(-255, 256))
    assert term_multiplier(2.0**-11) == (0, 0)
    m, r = multiplier_rshift(2.0**-11, 9)
    assert r >= 18 and all((q * m + (1 << (r - 1))) >> r == 0 for q in range(-255, 256))


def test_add_asymmetric_keeps_one_rshift():
    """Zero points keep the shared-rshift form on bm1684x (the chip's add
    cannot take them exactly): u8 multipliers, the largest in [128, 256)."""
    net = Net()
    a = net.input("a", SHAPE, (0.0, 4.0))
    b = net.input("b", SHAPE, (-2.0, 2.0))
    y = net.op("top.Add", [a, b], "y", SHAPE, (-1.0, 5.0))
    module, _ = lower(net.text(y), asymmetric=True)
    add = op_named(module, "y")
    assert QuantParams.of(element(add.results[0])).zero_point != 0
    assert len(add.value("rshift")) == 1 and max(add.value("multiplier")) in range(128, 256)


def test_add_multipliers_fit_and_bound():
    """Ratios above 2^(bits-1) need a left shift: multipliers scaled down
    with it. Worst |acc| = 255·Σ|M| stays in int32 at the chips' widths."""
    assert eltwise_multipliers([200.0, 100.0], 8) == ([100, 50], -1)
    assert eltwise_multipliers([0.8, 0.4], 8) == ([102, 51], 7)
    for bits in (8, 16):
        worst = 255 * 2 * (2 ** (bits - 1) - 1)
        assert worst < 2**31


def test_add_with_weight_and_relu():
    """A weight input becomes a per-tensor int8 weight (threshold = absmax);
    the fused ReLU stays on the TPU op; the output is u8 ([0, 5])."""
    net = Net()
    a = net.input("a", SHAPE, (-4.0, 4.0))
    w = net.weight("w", [[[0.5, -1.0, 0.25, 2.0]]])
    y = net.op("top.Add", [a, w], "y", SHAPE, (0.0, 5.0), do_relu=True)
    module, store = lower(net.text(y))
    add = op_named(module, "y")
    assert add.value("do_relu") is True
    weight = add.operands[1].owner
    q = QuantParams.of(element(weight.results[0]))
    assert q.scale == pytest.approx(2.0 / 127) and q.zero_point == 0
    np.testing.assert_array_equal(
        store[weight.attributes["name"].data].reshape(-1), [32, -64, 16, 127]
    )
    out = QuantParams.of(element(add.results[0]))
    assert (out.qmin, out.qmax) == (0, 255)
    want = [4 / 127 / (5 / 255), 2 / 127 / (5 / 255)]
    got, rshift = add.value("multiplier"), add.value("rshift")
    assert all(m in range(128, 256) for m in got)  # bm1684x: u8 multipliers, one rshift each
    assert [m / 2**r for m, r in zip(got, rshift, strict=True)] == pytest.approx(want, rel=1e-2)


def test_mul_multiplier():
    """One multiplier for S_a·S_b/S_out at the chip's width (bm168x's
    bcbinary MUL: unsigned 8 bits, [128, 256); cv18xx: 8 signed bits)."""
    net = Net()
    a = net.input("a", SHAPE, (-4.0, 4.0))
    b = net.input("b", SHAPE, (-2.0, 2.0))
    y = net.op("top.Mul", [a, b], "y", SHAPE, (-8.0, 8.0))
    scale = (4 / 127) * (2 / 127) / (8 / 127)
    for chip, bits in (("bm1684x", 9), ("cv183x", 8)):
        mul = op_named(lower(net.text(y), chip=chip)[0], "y")
        m, r = mul.value("multiplier")[0], mul.value("rshift")[0]
        assert 2 ** (bits - 2) <= m < 2 ** (bits - 1)
        assert m / 2**r == pytest.approx(scale, rel=2.0 ** (2 - bits))
    # 1/127 = 0.0078740157: frexp -> 0.5039 · 2^-6 -> M = round(0.5039·2^31)
    assert multiplier_rshift(scale, 32) == (1082196484, 37)


def test_mul_of_three_falls_back():
    net = Net()
    a = net.input("a", SHAPE, (-1.0, 1.0))
    y = net.op("top.Mul", [a, a, a], "y", SHAPE, (-1.0, 1.0))
    mul = op_named(lower(net.text(y))[0], "y")
    assert isinstance(element(mul.results[0]), Float32Type)


def test_concat_requant():
    """Input of the output's type: identity (1, 0); else S_i/S_out: on
    bm1684x the chip's MulShift, a u8 multiplier in [128, 256) and its own
    rshift rounded half up (0.8 = 205/2^8, TPU-MLIR's 8-bit do_transfer);
    asymmetric, a 32-bit multiplier; cv183x its 8-bit one."""
    net = Net()
    a = net.input("a", SHAPE, (-4.0, 4.0))
    b = net.input("b", SHAPE, (-5.0, 5.0))
    y = net.op("top.Concat", [a, b], "y", (1, 4, 4), (-5.0, 5.0), axis=1)
    cat = op_named(lower(net.text(y))[0], "y")
    assert cat.value("multiplier") == [205, 1] and cat.value("rshift") == [8, 0]
    assert cat.value("round_mode") == "HalfUp"
    cat = op_named(lower(net.text(y), asymmetric=True)[0], "y")
    assert cat.value("multiplier")[0] / 2 ** cat.value("rshift")[0] == pytest.approx(0.8, abs=1e-6)
    assert cat.value("round_mode") == "HalfAwayFromZero"
    cat = op_named(lower(net.text(y), chip="cv183x")[0], "y")
    assert cat.value("multiplier") == [102, 1] and cat.value("rshift") == [7, 0]


def test_concat_inputs_it_alone_reads_take_its_scale():
    """An input made by a requantizing op for the Concat alone takes the
    Concat's range (TPU-MLIR's lowering): the Concat copies it; an input also
    read elsewhere keeps its own and is requantized (3/4 here)."""
    net = Net()
    a = net.input("a", SHAPE, (-1.0, 1.0))
    p = net.op("top.Add", [a, a], "p", SHAPE, (-2.0, 2.0))
    q = net.op("top.Add", [a, a], "q", SHAPE, (-3.0, 3.0))
    r = net.op("top.Add", [q, q], "r", SHAPE, (-6.0, 6.0))
    y = net.op("top.Concat", [p, q], "y", (1, 4, 4), (-4.0, 4.0), axis=1)
    module = lower(net.text(y, r))[0]
    cat = op_named(module, "y")
    assert element(op_named(module, "p").results[0]) == element(cat.results[0])
    assert QuantParams.of(element(op_named(module, "q").results[0])).scale == 3.0 / 127
    assert cat.value("multiplier")[0] == 1 and cat.value("rshift")[0] == 0
    assert cat.value("multiplier")[1] / 2 ** cat.value("rshift")[1] == pytest.approx(0.75)


# --- lookup tables -----------------------------------------------------------------------


def unary_net(kind, in_rng, out_rng, **attrs):
    net = Net()
    x = net.input("x", SHAPE, in_rng)
    return net.text(net.op(kind, [x], "y", SHAPE, out_rng, **attrs))


def near_tie(v: np.ndarray) -> np.ndarray:
    return np.abs(np.abs(v - np.trunc(v)) - 0.5) < 1e-3


def test_relu_table_i8_to_u8():
    """i8 input [-4, 4] -> u8 output [0, 4]: table[q + 128] =
    round(max(q, 0)·255/127) (S_in = 4/127, S_out = 4/255)."""
    module, store = lower(unary_net("top.Relu", (-4.0, 4.0), (0.0, 4.0)))
    table = table_of(module, store, "y")
    lut = op_named(module, "y")
    assert table.dtype == np.uint8 and table.shape == (256,)
    assert element(lut.operands[1]) == element(lut.results[0])
    q = np.arange(-128, 128)
    exact = np.maximum(q, 0) * 255 / 127
    want = np.floor(exact + 0.5)
    assert not near_tie(exact).any()
    np.testing.assert_array_equal(table, want)
    assert table[128 + 64] == 129 and table[128 - 5] == 0


def test_sigmoid_table():
    """table[q + 128] = round(255·sigmoid(8q/127)) on i8 [-8, 8] -> u8 [0, 1]."""
    module, store = lower(unary_net("top.Sigmoid", (-8.0, 8.0), (0.0, 1.0)))
    table = table_of(module, store, "y")
    q = np.arange(-128, 128)
    exact = 255.0 / (1.0 + np.exp(-8.0 * q / 127))
    want = np.floor(exact + 0.5)
    ok = ~near_tie(exact)
    np.testing.assert_array_equal(table[ok], want[ok])
    assert np.abs(table.astype(float) - want).max() <= 1
    assert table[0] == 0 and table[255] == 255 and table[128 + 16] == 187  # 255·0.73261


def test_asymmetric_table_and_attrs():
    """Asymmetric i8 in and out; LeakyRelu's alpha and AddConst's fused relu
    come from the TOP kernel."""
    text = unary_net("top.LeakyRelu", (-2.0, 6.0), (-0.2, 6.0), alpha=0.1)
    module, store = lower(text, asymmetric=True)
    table = table_of(module, store, "y")
    qin, qout = QuantParams.of(element(op_named(module, "y").operands[0])), None
    qout = QuantParams.of(element(op_named(module, "y").results[0]))
    assert qin.zero_point != 0 and table.dtype == np.int8
    x = qin.scale * (np.arange(-128, 128) - qin.zero_point)
    y = np.where(x >= 0, x, 0.1 * x)
    exact = y / qout.scale + qout.zero_point
    want = np.clip(np.sign(exact) * np.floor(np.abs(exact) + 0.5), -128, 127)
    ok = ~near_tie(exact)
    np.testing.assert_array_equal(table[ok], want[ok])
    module, store = lower(
        unary_net("top.AddConst", (-4.0, 4.0), (0.0, 5.0), const_val=1.0, do_relu=True)
    )
    table = table_of(module, store, "y")
    q = np.arange(-128, 128)
    exact = np.maximum(q * 4 / 127 + 1.0, 0) * 255 / 5
    ok = ~near_tie(exact)
    np.testing.assert_array_equal(table[ok], np.floor(exact + 0.5)[ok])


def test_log_of_non_positive_saturates_or_zero():
    """log(0) = -inf saturates to qmin; NaN (log of negatives) maps to 0."""
    module, store = lower(unary_net("top.Log", (-1.0, 1.0), (-5.0, 5.0)))
    table = table_of(module, store, "y")
    assert table[128] == -128 and table[0] == 0
    assert table[255] == 0  # log(1) = 0


def test_prelu_channel_tables():
    """One table per channel ([C, 256]); other slopes run in float."""
    net = Net()
    x = net.input("x", SHAPE, (-4.0, 4.0))
    s = net.weight("s", [[0.1], [0.5]])
    y = net.op("top.PRelu", [x, s], "y", SHAPE, (-2.0, 4.0))
    module, store = lower(net.text(y))
    table = table_of(module, store, "y")
    assert table.shape == (2, 256)
    q = np.arange(-128, 128)
    for c, alpha in enumerate((0.1, 0.5)):
        x = q * 4 / 127
        exact = np.where(x >= 0, x, alpha * x) * 127 / 4
        ok = ~near_tie(exact)
        want = np.sign(exact) * np.floor(np.abs(exact) + 0.5)
        np.testing.assert_array_equal(table[c][ok], np.clip(want, -128, 127)[ok])
    net = Net()
    x = net.input("x", SHAPE, (-4.0, 4.0))
    s = net.weight("s", [[[0.1, 0.2, 0.3, 0.4]]])
    y = net.op("top.PRelu", [x, s], "y", SHAPE, (-2.0, 4.0))
    prelu = op_named(lower(net.text(y))[0], "y")
    assert prelu.name == "tpu.PRelu"


# --- data movement -------------------------------------------------------------------------


def test_moves_keep_the_input_type():
    """Reshape/Permute/Slice results take the input's type, not their own
    calibrated range; no requant."""
    net = Net()
    x = net.input("x", SHAPE, (-4.0, 4.0))
    r = net.op("top.Reshape", [x], "r", (8,), (-3.0, 3.0), shape=[8])
    p = net.op("top.Permute", [x], "p", (1, 4, 2), (-1.0, 1.0), order=[0, 2, 1])
    module, _ = lower(net.text(r, p), asymmetric=True)
    x_type = element(op_named(module, "r").operands[0])
    assert element(op_named(module, "r").results[0]) == x_type
    assert element(op_named(module, "p").results[0]) == x_type


def test_pad_value_is_quantized():
    """val 1.0 with S = 4/127 -> round(31.75) = 32; asymmetric adds Z."""
    net = Net()
    x = net.input("x", SHAPE, (-4.0, 4.0))
    y = net.op("top.Pad", [x], "y", (1, 2, 6), (-4.0, 4.0), paddings=[0, 0, 1, 0, 0, 1], val=1.0)
    pad = op_named(lower(net.text(y))[0], "y")
    assert pad.value("val") == 32.0
    net = Net()
    x = net.input("x", SHAPE, (-2.0, 6.0))
    y = net.op("top.Pad", [x], "y", (1, 2, 6), (-2.0, 6.0), paddings=[0, 0, 1, 0, 0, 1], val=-1.0)
    pad = op_named(lower(net.text(y), asymmetric=True)[0], "y")
    q = QuantParams.of(element(pad.operands[0]))
    # S = 8/255, Z = round(-128 + 2/S) = round(-64.25) = -64
    assert (q.scale, q.zero_point) == (pytest.approx(8 / 255), -64)
    assert pad.value("val") == -96.0  # round(-31.875) - 64


def test_interp_nearest_only_and_gather_indices():
    net = Net()
    x = net.input("x", (1, 1, 2, 2), (-1.0, 1.0))
    near = net.op("top.Interp", [x], "near", (1, 1, 4, 4), (-1.0, 1.0), target_shape=[4, 4])
    lin = net.op(
        "top.Interp", [x], "lin", (1, 1, 4, 4), (-1.0, 1.0), target_shape=[4, 4], mode="linear"
    )
    i = net.weight("idx", [1.0, 0.0])
    g = net.op("top.Gather", [x, i], "g", (1, 1, 2, 2), (-1.0, 1.0), axis=3)
    module, _ = lower(net.text(near, lin, g))
    assert isinstance(element(op_named(module, "near").results[0]), UniformQuantizedType)
    assert isinstance(element(op_named(module, "lin").results[0]), Float32Type)
    gather = op_named(module, "g")
    assert isinstance(element(gather.operands[1]), Float32Type)


def test_max_min_shared_type():
    """Inputs of one calibrated range run on stored integers (one rescaled
    when a pass-through gave it another type); different ranges: float."""
    net = Net()
    a = net.input("a", SHAPE, (-4.0, 4.0))
    b = net.input("b", SHAPE, (-2.0, 2.0))
    rb = net.op("top.Reshape", [b], "rb", SHAPE, (-4.0, 4.0), shape=list(SHAPE))
    same = net.op("top.Max", [a, rb], "same", SHAPE, (-4.0, 4.0))
    other = net.op("top.Min", [a, b], "other", SHAPE, (-4.0, 4.0))
    module, _ = lower(net.text(same, other))
    mx = op_named(module, "same")
    assert mx.name == "tpu.Max" and element(mx.operands[0]) == element(mx.operands[1])
    requant = mx.operands[1].owner
    assert requant.name == "tpu.RequantInt"
    assert requant.value("multiplier")[0] / 2 ** requant.value("rshift")[0] == pytest.approx(0.5)
    assert isinstance(element(op_named(module, "other").results[0]), Float32Type)


def test_float_only_ops_fall_back():
    """Softmax has no INT8 rule: BF16 on cv183x, F32 on bm1684x."""
    module, _ = lower(unary_net("top.Softmax", (-4.0, 4.0), (0.0, 1.0), axis=2), chip="cv183x")
    assert str(element(op_named(module, "y").results[0])) == "bf16"


# --- numerics on the TPU interpreter ---------------------------------------------------------


def tpu_interp():
    from tpuc.interp import tpu_interpreter

    return tpu_interpreter


def test_add_book_example_runs():
    """The interpreter's integer Add gives the book's 60 for (100, -50)."""
    interp = tpu_interp()
    module, store = lower(add_net(), chip="cv183x")
    feeds = {
        "a": np.full(SHAPE, 100 * 4 / 127, np.float32),
        "b": np.full(SHAPE, -50 * 2 / 127, np.float32),
    }
    out = interp.run_tpu(module, store, feeds)["y"]
    np.testing.assert_allclose(out, 60 * 5 / 127, rtol=1e-6)


def canonicalized_equal(text: str, feeds: dict) -> None:
    interp = tpu_interp()
    before = parse_module(text)
    after = parse_module(text)
    get_pass("canonicalize")().apply(None, after)
    kinds = [op.name for op in next(iter(after.ops)).body.block.ops]
    assert "tpu.RequantInt" in kinds
    ref = interp.run_tpu(before, {}, feeds)
    got = interp.run_tpu(after, {}, feeds)
    for name, value in ref.items():
        scale = max(float(np.abs(value).max()), 1e-6) / 100
        np.testing.assert_allclose(got[name], value, atol=scale, err_msg=name)


Q1 = "!quant.uniform<i8:f32, 0.04>"
Q2 = "!quant.uniform<u8:f32, 0.02:7>"
Q3 = "!quant.uniform<i8:f32, 0.05:3>"


def chain(first: str, second: str) -> str:
    """x -> Q1, then two steps (`first`, `second`: op text without operands)
    to Q2, then f32."""
    return f"""
builtin.module attributes {{module.chip = "bm1684x"}} {{
  func.func @main(%arg0: tensor<64xf32>) -> tensor<64xf32> {{
    %0 = "top.Input"(%arg0) {{name = "x"}} : (tensor<64xf32>) -> tensor<64xf32>
    %1 = "tpu.Cast"(%0) {{name = "x_q"}} : (tensor<64xf32>) -> tensor<64x{Q1}>
    %2 = {first.format("%1")}
    %3 = {second.format("%2")}
    %4 = "tpu.Cast"(%3) {{name = "y"}} : (tensor<64x{Q2}>) -> tensor<64xf32>
    func.return %4 : tensor<64xf32>
  }}
}}"""


def requant_text(name: str, src: str, dst: str, scale: float) -> str:
    m, r = multiplier_rshift(scale, 32)
    attrs = f'name = "{name}", multiplier = [{m}], rshift = [{r}]'
    return f'"tpu.RequantInt"({{}}) {{{{{attrs}}}}} : (tensor<64x{src}>) -> tensor<64x{dst}>'


def test_cast_fold_keeps_values():
    """Cast(q->f32)->Cast(f32->q') and RequantInt chains, folded into one
    RequantInt, give the same values to within one output step."""
    x = {"x": np.linspace(-6, 6, 64, dtype=np.float32)}
    casts = chain(
        f'"tpu.Cast"({{}}) {{{{name = "x_f"}}}} : (tensor<64x{Q1}>) -> tensor<64xf32>',
        f'"tpu.Cast"({{}}) {{{{name = "y_q"}}}} : (tensor<64xf32>) -> tensor<64x{Q2}>',
    )
    canonicalized_equal(casts, x)
    requants = chain(
        requant_text("x_f", Q1, Q3, 0.04 / 0.05), requant_text("y_q", Q3, Q2, 0.05 / 0.02)
    )
    canonicalized_equal(requants, x)
