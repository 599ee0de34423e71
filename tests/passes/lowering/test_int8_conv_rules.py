"""INT8 lowering of conv/matmul/pool/reduce/scale (passes/lowering/int8_conv.py):
tiny TOP_CALIBRATED modules with inline weights go through processor-assign and
convert-top-to-tpu; the int8 filters, int32 biases, multipliers/rshifts and
result types are checked against values computed by hand, on bm1684x (32-bit
multipliers) and cv183x (8-bit), symmetric and asymmetric, and the forms
without an exact integer meaning fall back to the chip's float mode."""

from __future__ import annotations

import numpy as np
import pytest
from calibrated_net import Net
from xdsl.dialects.builtin import BFloat16Type, Float32Type, IntegerType, TensorType

from tpuc.dialects.quant import UniformQuantizedType
from tpuc.ir.context import make_context
from tpuc.ir.module_io import module_attr, parse_module
from tpuc.ir.weights import weights_of
from tpuc.passes.registry import get_pass

# --- building tiny calibrated modules as MLIR text -------------------------------------


def lower(net: Net, outs, chip="bm1684x", asymmetric=False):
    module = parse_module(net.text(*outs), "test")
    ctx = make_context()
    get_pass("processor-assign")(chip=chip, mode="INT8").apply(ctx, module)
    get_pass("convert-top-to-tpu")(asymmetric=asymmetric).apply(ctx, module)
    module.verify()
    return Lowered(module)


class Lowered:
    def __init__(self, module):
        self.module = module
        self.store = weights_of(module)
        self.ops = list(next(iter(module.ops)).body.block.ops)

    def op(self, kind: str, index: int = 0):
        found = [o for o in self.ops if o.name == kind]
        return found[index]

    def kinds(self) -> list[str]:
        return [o.name for o in self.ops if o.name not in ("top.Weight", "top.None", "func.return")]

    def weight(self, op, index: int) -> np.ndarray:
        owner = op.operands[index].owner
        return self.store[owner.value("name")]


def element(value):
    return value.type.element_type


def requant(op):
    return op.value("multiplier"), op.value("rshift")


def conv1x1(chip="bm1684x", asymmetric=False, x_rng=(-1.27, 1.27), y_rng=(-2.54, 2.54), **kw):
    """x [1,2,2,2] ⊛ filter [3,2,1,1] + bias: channel 0 |w| max 0.5, channel 1
    all zero, channel 2 max 2.5 (exact in f32, like the other weights)."""
    net = Net()
    x = net.input("x", [1, 2, 2, 2], x_rng)
    w = net.weight("w", np.array([[0.5, -0.2], [0.0, 0.0], [-2.5, 1.0]]).reshape(3, 2, 1, 1))
    b = net.weight("b", [0.05, 0.3, -0.1])
    y = net.op(
        "Conv", [x, w, b], "y", [1, 3, 2, 2], y_rng, kernel_shape=[1, 1], strides=[1, 1], **kw
    )
    return lower(net, [y], chip, asymmetric)


# --- Conv ---------------------------------------------------------------------------


def test_conv_per_channel_filter_bias_multipliers_bm1684x():
    # S_in = 1.27/127 = 0.01, S_out = 0.02, S_w = [0.5/127, 1 (zero channel), 2.5/127]
    low = conv1x1()
    conv = low.op("tpu.Conv2D")
    q_w = low.weight(conv, 1)
    assert q_w.dtype == np.int8 and q_w.shape == (3, 2, 1, 1)
    # -0.2 / (0.5/127) = -50.8 -> -51; 1.0 / (2.5/127) = 50.8 -> 51
    assert q_w.reshape(3, 2).tolist() == [[127, -51], [0, 0], [-127, 51]]
    assert isinstance(element(conv.operands[1]), IntegerType)
    bias = low.weight(conv, 2)
    assert bias.dtype == np.int32
    # 0.05/(0.01·0.5/127) = 1270, 0.3/(0.01·1) = 30, -0.1/(0.01·2.5/127) = -508
    assert bias.tolist() == [1270, 30, -508]
    # scales 0.25/127 = (64/127)·2^-8, 0.5, 1.25/127 = (80/127)·2^-6; Q31 mantissas
    # 2^31·64/127 = 1082196483.8, 2^31·80/127 = 1352745605.04
    assert requant(conv) == ([1082196484, 2**30, 1352745605], [39, 31, 37])
    assert conv.value("round_mode") == "HalfAwayFromZero"
    out = element(conv.results[0])
    assert isinstance(out, UniformQuantizedType) and out.is_signed
    assert out.scale == pytest.approx(0.02) and out.zero_point == 0
    cast = low.op("tpu.Cast")  # the f32 input quantized for the conv
    assert element(cast.results[0]).scale == pytest.approx(0.01)


def test_conv_multipliers_cv183x_are_8_bit():
    conv = conv1x1("cv183x").op("tpu.Conv2D")
    # 128·64/127 = 64.5 -> 65, 0.5 -> 64 (rshift 7), 128·80/127 = 80.6 -> 81
    assert requant(conv) == ([65, 64, 81], [15, 7, 13])


def test_conv_integer_arithmetic_matches_float():
    """The lowered parameters, run through ops.py's integer formula with plain
    numpy, reproduce the float conv within the quantization error."""
    from tpuc.base.numerics import dequantize, quantize, requantize, saturate

    low = conv1x1()
    conv = low.op("tpu.Conv2D")
    q_w = low.weight(conv, 1).reshape(3, 2).astype(np.int64)
    bias = low.weight(conv, 2).astype(np.int64)
    m, r = (np.array(v).reshape(1, 3, 1, 1) for v in requant(conv))
    x = np.random.default_rng(1).uniform(-0.6, 0.6, (1, 2, 2, 2)).astype(np.float32)
    w = np.array([[0.5, -0.2], [0.0, 0.0], [-2.5, 1.0]])
    b = np.array([0.05, 0.3, -0.1])
    want = np.einsum("nchw,oc->nohw", x, w) + b.reshape(1, 3, 1, 1)
    q_x = quantize(x, 0.01, 0, -128, 127).astype(np.int64)
    acc = np.einsum("nchw,oc->nohw", q_x, q_w) + bias.reshape(1, 3, 1, 1)
    got = dequantize(saturate(requantize(acc, m, r), -128, 127), 0.02, 0)
    # 1/2 LSB of output rounding + 1/2 LSB of input on Σ|w| = 3.5, + weight rounding
    assert np.abs(got - want).max() <= 0.01 + 0.005 * 3.5 + 1.27 * 2.5 / 254 + 1e-6


def test_conv_relu_output_is_u8_symmetric_and_i8_with_zero_point_asymmetric():
    sym = conv1x1(y_rng=(0.0, 5.1), do_relu=True).op("tpu.Conv2D")
    out = element(sym.results[0])
    assert not out.is_signed and out.zero_point == 0 and out.scale == pytest.approx(0.02)
    assert sym.value("do_relu") is True
    asym = conv1x1(asymmetric=True, x_rng=(-1.0, 3.0), y_rng=(0.0, 5.1), do_relu=True)
    conv = asym.op("tpu.Conv2D")
    out = element(conv.results[0])
    assert out.is_signed and out.zero_point == -128 and out.scale == pytest.approx(0.02)
    x_type = element(conv.operands[0])
    # S = 4/255, Z = round(-128 + 1/S) = round(-64.25) = -64
    assert x_type.scale == pytest.approx(4 / 255) and x_type.zero_point == -64
    # the bias does not absorb Z_in (ops.py: acc = Σ (q_in − Z_in)·q_w + bias)
    # S_in = 4/255: 0.05·127/(0.5·S_in) = 809.6, 0.3/S_in = 19.1, -0.1·127/(2.5·S_in) = -323.9
    assert asym.weight(conv, 2).tolist() == [810, 19, -324]
    assert module_attr(asym.module, "asymmetric") is True


def test_conv_without_bias_keeps_none_and_groups_use_axis_0():
    net = Net()
    x = net.input("x", [1, 4, 3, 3], (-1.0, 1.0))
    w = (
        np.arange(1, 9, dtype=np.float32).reshape(4, 2, 1, 1)
        * np.array([1, -1, 2, 4])[:, None, None, None]
    )
    y = net.op(
        "Conv",
        [x, net.weight("w", w), net.none()],
        "y",
        [1, 4, 3, 3],
        (-8.0, 8.0),
        kernel_shape=[1, 1],
        group=2,
    )
    low = lower(net, [y])
    conv = low.op("tpu.Conv2D")
    assert conv.operands[2].owner.name == "top.None"
    assert conv.value("group") == 2
    q = low.weight(conv, 1).reshape(4, 2)
    # per output channel (axis 0) the larger |w| maps to ±127
    assert np.abs(q).max(axis=1).tolist() == [127] * 4
    assert q[0].tolist() == [64, 127]  # w = [1, 2]: 63.5 rounds away from zero
    assert len(conv.value("multiplier")) == 4


def test_conv_with_activation_filter_falls_back_to_float():
    net = Net()
    x = net.input("x", [1, 1, 2, 2], (-1.0, 1.0))
    f = net.input("f", [1, 1, 1, 1], (-1.0, 1.0))
    y = net.op("Conv", [x, f, net.none()], "y", [1, 1, 2, 2], (-1.0, 1.0), kernel_shape=[1, 1])
    conv = lower(net, [y]).op("tpu.Conv2D")
    assert isinstance(element(conv.results[0]), Float32Type)


# --- Deconv --------------------------------------------------------------------------


def test_deconv_scales_follow_the_output_channels_of_ic_ocg_k_layout():
    """Filter [ic=4, oc/group=3, 1, 1], group 2: output channel g·3 + o is the
    slice w[2g:2g+2, o]."""
    rng = np.random.default_rng(3)
    w = rng.uniform(-1, 1, (4, 3, 1, 1)).astype(np.float32)
    w[0:2, 1] *= 10  # make channel 1 (group 0) large, channel 4 (group 1) tiny
    w[2:4, 1] *= 0.01
    net = Net()
    x = net.input("x", [1, 4, 2, 2], (-1.27, 1.27))
    y = net.op(
        "Deconv",
        [x, net.weight("w", w), net.none()],
        "y",
        [1, 6, 2, 2],
        (-2.54, 2.54),
        kernel_shape=[1, 1],
        group=2,
    )
    low = lower(net, [y])
    deconv = low.op("tpu.Deconv")
    q = low.weight(deconv, 1)
    assert q.shape == w.shape
    absmax = [float(np.abs(w[2 * (c // 3) : 2 * (c // 3) + 2, c % 3]).max()) for c in range(6)]
    for c in range(6):
        g, o = divmod(c, 3)
        s_w = absmax[c] / 127
        want = np.clip(np.floor(np.abs(w[2 * g : 2 * g + 2, o]) / s_w + 0.5), 0, 127)
        assert np.array_equal(np.abs(q[2 * g : 2 * g + 2, o]), want), c
    mult, shift = requant(deconv)
    got = [m / 2.0**r for m, r in zip(mult, shift, strict=True)]
    want = [0.01 * a / 127 / 0.02 for a in absmax]
    np.testing.assert_allclose(got, want, rtol=1e-9)


# --- MatMul ---------------------------------------------------------------------------


@pytest.mark.parametrize("transpose", [False, True])
def test_matmul_weight_per_column_with_bias(transpose):
    w = np.array([[1.25, -0.1, 0.0], [0.5, 2.5, 0.0]], np.float32)  # [K=2, N=3]
    net = Net()
    x = net.input("x", [2, 2], (-1.27, 1.27))
    weight = net.weight("w", w.T if transpose else w)
    b = net.weight("b", [0.1, -0.2, 0.3])
    y = net.op("MatMul", [x, weight, b], "y", [2, 3], (-5.08, 5.08), right_transpose=transpose)
    low = lower(net, [y])
    mm = low.op("tpu.MatMul")
    q = low.weight(mm, 1)
    q = q.T if transpose else q
    # column scales 1.25/127, 2.5/127, 1 (zero column); 0.5·127/1.25 = 50.8
    assert q.tolist() == [[127, -5, 0], [51, 127, 0]]
    # bias / (S_in·S_w) = 0.1·127/0.0125, -0.2·127/0.025, 0.3/0.01
    assert low.weight(mm, 2).tolist() == [1016, -1016, 30]
    # S_out = 0.04: scales (80/127)·2^-8, (80/127)·2^-7, 0.25 as Q31 mantissas
    # 1352745605·2^-39, 1352745605·2^-38, 2^30·2^-32, then over one right
    # shift (the smallest, 32: the fc call's per-column requant): / 2^7, / 2^6
    assert requant(mm) == ([(1352745605 + 64) >> 7, (1352745605 + 32) >> 6, 2**30], [32] * 3)
    assert mm.value("right_transpose") is transpose


def test_matmul_two_activations_one_multiplier():
    net = Net()
    a = net.input("a", [2, 3], (-1.27, 1.27))
    r = net.input("r", [3, 4], (-2.54, 2.54))
    b = net.weight("b", [0.1, 0.2, -0.3, 0.0])
    y = net.op("MatMul", [a, r, b], "y", [2, 4], (-0.254, 0.254))
    low = lower(net, [y])
    mm = low.op("tpu.MatMul")
    assert [type(element(v)) for v in mm.operands[:2]] == [UniformQuantizedType] * 2
    # S_l·S_r = 2e-4; /S_out (0.002) = 0.1 = 0.8·2^-3
    assert requant(mm) == ([1717986918], [34])
    assert low.weight(mm, 2).tolist() == [500, 1000, -1500, 0]


# --- pooling ---------------------------------------------------------------------------


def avg_pool(chip="bm1684x", y_hi=2.54, kernel=(2, 2), **kw):
    net = Net()
    x = net.input("x", [1, 1, 4, 4], (-12.7, 12.7))
    c = net.op(
        "Conv",
        [x, net.weight("w", [[[[1.0]]]]), net.none()],
        "c",
        [1, 1, 4, 4],
        (-12.7, 12.7),
        kernel_shape=[1, 1],
    )
    out = kw.pop("out", [1, 1, 2, 2])
    y = net.op(
        "AvgPool", [c], "y", out, (-y_hi, y_hi), kernel_shape=list(kernel), strides=[2, 2], **kw
    )
    return lower(net, [y], chip)


def test_avg_pool_book_multiplier_0_1234():
    """S_in/(S_out·k) = 0.1234 -> (253, 11): bm168x's pooling takes a u8
    multiplier (0.9872·256 = 252.7)."""
    s_out = 0.1 / (4 * 0.1234)
    pool = avg_pool(y_hi=127 * s_out).op("tpu.Pool2D")
    assert pool.value("pool_mode") == "Avg"
    assert requant(pool) == ([253], [11])
    cv = avg_pool("cv183x", y_hi=127 * s_out).op("tpu.Pool2D")
    assert requant(cv) == ([126], [10])  # 0.9872·128 = 126.4


def test_avg_pool_counting_padding_stays_int8():
    pool = avg_pool(pads=[1, 1, 1, 1], count_include_pad=True, out=[1, 1, 3, 3]).op("tpu.Pool2D")
    assert isinstance(element(pool.results[0]), UniformQuantizedType)
    assert requant(pool) == ([160], [7])  # 0.1/(0.02·4) = 1.25 = 0.625·2^1, u8


@pytest.mark.parametrize(
    ("chip", "float_type"), [("bm1684x", Float32Type), ("cv183x", BFloat16Type)]
)
def test_avg_pool_excluding_padding_falls_back_with_casts(chip, float_type):
    low = avg_pool(chip, pads=[1, 1, 1, 1], count_include_pad=False, out=[1, 1, 3, 3])
    pool = low.op("tpu.Pool2D")
    assert isinstance(element(pool.results[0]), float_type)
    assert not pool.value("multiplier")
    source = pool.operands[0].owner
    if chip == "cv183x":  # the int8 conv's result cast to bf16
        assert source.name == "tpu.Cast"
        assert isinstance(element(source.operands[0]), UniformQuantizedType)
    else:  # bm1684x: the int8 conv dequantizes its accumulator to f32 itself
        assert source.name == "tpu.Conv2D"
        assert isinstance(element(source.operands[0]), UniformQuantizedType)
        assert isinstance(element(source.results[0]), Float32Type)


def test_avg_pool_one_window_over_the_whole_input_is_a_global_int8_pool():
    """inception_v1's head: a 5x5 window, pads [0, 0, 1, 1], over 4x4, the
    padding excluded: the global average of 16 values, kept in INT8."""
    low = avg_pool(kernel=(5, 5), pads=[0, 0, 1, 1], count_include_pad=False, out=[1, 1, 1, 1])
    pool = low.op("tpu.Pool2D")
    assert isinstance(element(pool.results[0]), UniformQuantizedType)
    assert pool.value("kernel_shape") == [4, 4] and pool.value("pads") == [0, 0, 0, 0]
    assert requant(pool) == ([160], [9])  # 0.1/(0.02·16) = 0.3125 = 160/2^9, u8


def test_float_epilogue_only_when_every_reader_runs_in_float():
    """MatMul -> Softmax (F32 fallback): the accumulator goes straight to
    f32 at scale S_in·S_w; a second INT8 reader keeps the int8 result."""

    def build(extra_int8_reader: bool, chip="bm1684x"):
        net = Net()
        x = net.input("x", [2, 2], (-1.27, 1.27))
        w = net.weight("w", np.array([[1.25, -0.5], [0.5, 2.5]], np.float32))
        y = net.op("MatMul", [x, w, net.weight("b", [0.0, 0.0])], "y", [2, 2], (-5.08, 5.08))
        s = net.op("Softmax", [y], "s", [2, 2], (0.0, 1.0), axis=1)
        outs = [s]
        if extra_int8_reader:
            outs.append(net.op("Relu", [y], "r", [2, 2], (0.0, 5.08)))
        return lower(net, outs, chip)

    mm = build(False).op("tpu.MatMul")
    assert isinstance(element(mm.results[0]), Float32Type)
    assert [u.operation.name for u in mm.results[0].uses] == ["tpu.Softmax"]
    # S_in·S_w per column: 0.01·1.25/127 = (102.4/127)·2^-13, 0.01·2.5/127 = (102.4/127)·2^-12;
    # 2^31·102.4/127 = 1731514373.54
    assert requant(mm) == ([1731514374, 1731514374], [44, 43])
    for low in (build(True), build(False, "cv183x")):
        assert isinstance(element(low.op("tpu.MatMul").results[0]), UniformQuantizedType)


def test_avg_pool_ceil_mode_overhang_falls_back():
    low = avg_pool(kernel=(3, 3), ceil_mode=True, out=[1, 1, 2, 2])
    assert isinstance(element(low.op("tpu.Pool2D").results[0]), Float32Type)


def test_max_pool_keeps_input_type():
    net = Net()
    x = net.input("x", [1, 1, 4, 4], (-1.0, 3.0))
    y = net.op("MaxPool", [x], "y", [1, 1, 2, 2], (-0.5, 3.0), kernel_shape=[2, 2], strides=[2, 2])
    low = lower(net, [y], asymmetric=True)
    pool = low.op("tpu.Pool2D")
    assert pool.value("pool_mode") == "Max"
    assert element(pool.results[0]) == element(pool.operands[0])
    assert element(pool.results[0]).zero_point == -64
    assert not pool.value("multiplier")


# --- reductions ------------------------------------------------------------------------


def reduce(mode, **kw):
    net = Net()
    x = net.input("x", [1, 2, 3, 4], (-1.27, 1.27))
    y = net.op("Reduce", [x], "y", [1, 2, 1, 1], (-0.635, 0.635), axes=[2, 3], mode=mode, **kw)
    return lower(net, [y])


def test_reduce_mean_and_sum_requant():
    mean = reduce("ReduceMean").op("tpu.Reduce")
    # 0.01 / (0.005 · 12) = 1/6 = 0.6667·2^-2
    assert requant(mean) == ([1431655765], [33])
    total = reduce("ReduceSum").op("tpu.Reduce")
    assert requant(total) == ([2**30], [29])  # 0.01/0.005 = 2 = 0.5·2^2


def test_reduce_max_shares_type_and_l2_falls_back():
    mx = reduce("ReduceMax").op("tpu.Reduce")
    assert element(mx.results[0]) == element(mx.operands[0])
    assert mx.value("mode") == "ReduceMax"
    l2 = reduce("ReduceL2").op("tpu.Reduce")
    assert isinstance(element(l2.results[0]), Float32Type)


# --- Scale and BatchNorm as depthwise convolutions ---------------------------------------


def test_scale_becomes_depthwise_conv():
    net = Net()
    x = net.input("x", [1, 3, 2, 2], (-12.7, 12.7))
    s = net.weight("s", [1.25, -0.625, 0.0])
    b = net.weight("b", [0.375, 0.0, 0.125])
    y = net.op("Scale", [x, s, b], "y", [1, 3, 2, 2], (-2.54, 2.54), do_relu=False)
    low = lower(net, [y])
    assert low.kinds() == ["top.Input", "tpu.Cast", "tpu.Conv2D", "tpu.Cast"]
    conv = low.op("tpu.Conv2D")
    assert conv.value("group") == 3 and conv.value("kernel_shape") == [1, 1]
    assert low.weight(conv, 1).reshape(-1).tolist() == [127, -127, 0]
    assert low.weight(conv, 1).shape == (3, 1, 1, 1)
    # S_in = 0.1, S_w = [1.25/127, 0.625/127, 1]: 0.375·127/0.125 = 381, 0, 1.25 -> 1
    assert low.weight(conv, 2).tolist() == [381, 0, 1]
    # S_in·S_w/S_out = 6.25/127, 3.125/127, 5
    got = [m / 2.0**r for m, r in zip(*requant(conv), strict=True)]
    np.testing.assert_allclose(got, [6.25 / 127, 3.125 / 127, 5.0], rtol=1e-9)


def test_scale_tiny_factor_large_bias_keeps_bias_in_int32():
    net = Net()
    x = net.input("x", [1, 1, 2, 2], (-1.27, 1.27))
    y = net.op(
        "Scale",
        [x, net.weight("s", [1e-7]), net.weight("b", [1.0])],
        "y",
        [1, 1, 2, 2],
        (-1.27, 1.27),
    )
    low = lower(net, [y])
    conv = low.op("tpu.Conv2D")
    bias = int(low.weight(conv, 2)[0])
    assert 2**29 < bias <= 2**30
    (m,), (r,) = requant(conv)
    assert bias * m / 2.0**r == pytest.approx(1.0 / 0.01, rel=1e-6)  # = b / S_out


def test_batch_norm_becomes_depthwise_conv():
    net = Net()
    x = net.input("x", [1, 2, 2, 2], (-1.27, 1.27))
    ops = [
        net.weight(n, v)
        for n, v in [("m", [0.5, -1.0]), ("v", [4.0, 0.25]), ("g", [1.0, -0.5]), ("be", [0.1, 0.2])]
    ]
    y = net.op("BatchNorm", [x, *ops], "y", [1, 2, 2, 2], (-2.54, 2.54), epsilon=0.0)
    low = lower(net, [y])
    conv = low.op("tpu.Conv2D")
    assert conv.value("group") == 2
    # s = g/sqrt(v) = [0.5, -1.0], b = be − m·s = [-0.15, -0.8]
    assert low.weight(conv, 1).reshape(-1).tolist() == [127, -127]
    # b/(S_in·S_w): -0.15·127/(0.01·0.5) = -3810, -0.8·127/0.01 = -10160
    assert low.weight(conv, 2).tolist() == [-3810, -10160]


def test_rank_2_scale_falls_back():
    net = Net()
    x = net.input("x", [2, 3], (-1.0, 1.0))
    y = net.op("Scale", [x, net.weight("s", [1.0, 2.0, 3.0]), net.none()], "y", [2, 3], (-3.0, 3.0))
    scale = lower(net, [y]).op("tpu.Scale")
    assert isinstance(element(scale.results[0]), Float32Type)
    assert isinstance(scale.results[0].type, TensorType)
