"""The pieces of `tpuc.kernels.chip_float` (bm168x's own float arithmetic)
on values the vendor's chip model gave (exp, reciprocal) and on cases worked
out by hand (the even/odd sums, the log's range split); the whole ops are
checked against the vendor runtime in tests/native/test_chip_float.py."""

from __future__ import annotations

import numpy as np

from tpuc.kernels import activation, chip_float, elementwise, norm, pooling

F = np.float32


def bits(x) -> np.ndarray:
    return np.asarray(x, F).view(np.uint32)


# (input, the vendor runtime's exp) of one-op F32 Exp models on the chip model
VENDOR_EXP = [(0x42335C5A, 0x5FCE9A4B), (0x429D3C66, 0x782B7674), (0xC27E10DD, 0x11A4DC59),
              (0x41134345, 0x461B401E), (0x00000000, 0x3F800000)]  # fmt: skip


def test_exp_matches_the_vendor_values():
    x = np.array([i for i, _ in VENDOR_EXP], np.uint32).view(F)
    assert list(bits(chip_float.exp(x))) == [o for _, o in VENDOR_EXP]
    assert chip_float.exp(F(-200.0)) == 0  # 2^n below 2^-126 is zero


def test_reciprocal_matches_the_vendor_values():
    """1/1, 1/2, 1/3, 1/4 of a one-op Reciprocal model: the rsqrt-Newton
    division is not IEEE's (1/1 is 0.9999999)."""
    x = np.array([1, 2, 3, 4], F)
    got = chip_float.divide(np.ones_like(x), x)
    assert [hex(b) for b in bits(got)] == ["0x3f7ffffe", "0x3f000001", "0x3eaaaaaa", "0x3e7ffffe"]
    assert chip_float.divide(F(-6.0), F(3.0)) < 0 and chip_float.divide(F(6.0), F(-3.0)) < 0


def test_window_sum_adds_even_and_odd_positions_apart():
    """[1, 2^24, 1, -2^24]: evens 1 + 1 = 2, odds 2^24 − 2^24 = 0, total 2
    (in order it would be 0: 2^24 + 1 rounds back to 2^24)."""
    x = np.array([[1.0, 2.0**24, 1.0, -(2.0**24)]], F)
    assert chip_float.window_sum(x, 1)[0, 0] == 2.0
    assert chip_float.window_sum(x, 1, scale=0.5)[0, 0] == 1.0


def test_axis_sum_two_stages_on_a_short_innermost_axis():
    """17 values: rows of 16 (zero-padded), columns summed, then across."""
    x = np.zeros([1, 17], F)
    x[0, 0], x[0, 16], x[0, 1], x[0, 2] = 2.0**24, 1.0, 1.0, -(2.0**24)
    # column 0: 2^24 + 1 -> 2^24; columns: [2^24, 1, -2^24, 0...] -> evens 0, odds 1
    assert chip_float.axis_sum(x, 1)[0, 0] == 1.0


def long_row(lead: tuple[int, ...]) -> np.ndarray:
    """Rows of 6625 (ppocr_rec's classes) where the two orders differ:
    2^24 at 0, 1 at 16 and at 2, −2^24 at 4."""
    x = np.zeros([*lead, 6625], F)
    x[..., 0], x[..., 16], x[..., 2], x[..., 4] = 2.0**24, 1.0, 1.0, -(2.0**24)
    return x


def test_axis_sum_two_stages_on_a_long_row_the_local_kernel_holds():
    """[1, 40, 6625]: the native target's local softmax (two stages at any
    length). Column 0: 2^24 + 1 -> 2^24; column 2: 1; column 4: −2^24;
    across, evens 2^24 + 1 -> 2^24, − 2^24 = 0; odds 0: total 0."""
    sums = chip_float.axis_sum(long_row((1, 40)), 2)
    assert sums.shape == (1, 40, 1) and np.all(sums == 0.0)


def test_axis_sum_one_window_on_a_long_row_the_global_kernel_runs():
    """[2, 40, 6625] (N > 1) and [1, 200, 6625] (4 rows a lane) stay the
    global kernel's: one window, evens 2^24 + 1 -> 2^24, + 1 -> 2^24,
    − 2^24 = 0, + 1 (position 16) = 1; odds 0: total 1."""
    for lead in ((2, 40), (1, 200)):
        sums = chip_float.axis_sum(long_row(lead), 2)
        assert np.all(sums == 1.0), lead


def test_log_halves_the_mantissa_above_four_thirds():
    """log of 1.5 = log(0.75) + ln 2: t = −0.25, where the series converges;
    4/3 itself (mantissa 0x2AAAAB) is not halved."""
    assert abs(float(chip_float.log(F(1.5))) - np.log(1.5)) < 2e-7
    assert chip_float.log(F(1.0)) == 0
    four_thirds = np.array([0x3FAAAAAB, 0x3FAAAAAC], np.uint32).view(F)
    t = chip_float.log(four_thirds) - np.array([0, chip_float.LN2], F)
    assert t[0] > 0.28 and t[1] < -0.4  # log(1 + 1/3) by the series; log(2/3) + ln 2


# inputs 0, -0, ±2^-149, ±88.7, ±103, ±3.4e38 -> the vendor runtime's F32 outputs
ACTIVE_INPUTS = [0x0, 0x80000000, 0x1, 0x80000001, 0x42B16666, 0xC2B16666, 0x42CE0000,
                 0xC2CE0000, 0x7F7FC99E, 0xFF7FC99E]  # fmt: skip
VENDOR_ACTIVE = {
    "Sigmoid": [0x3F000001] * 4 + [0x3F7FFFFE, 0, 0x3F7FFFFE, 0, 0x3F7FFFFE, 0],
    "Tanh": [0xB4000000] * 4 + [0x3F800000, 0xBF7FFFFC] * 3,
    "Erf": [0x0] + [0xB4800000] * 3 + [0x3F800000, 0xBF800000] * 3,
}


def test_activations_match_the_vendor_values():
    """sigmoid(0) is 0.5 + 2^-24 (the Newton divide), tanh(0) is −2^-23, and
    erf gives −2^-22 at −0 and at subnormals (its compares' sign)."""
    x = np.array(ACTIVE_INPUTS, np.uint32).view(F)
    kernel = chip_float.chip_kernel("bm168x", activation.unary)
    for kind, expected in VENDOR_ACTIVE.items():
        p = activation.Unary(kind, 1.0, 0.0) if kind == "Sigmoid" else activation.Unary(kind)
        assert list(bits(kernel(p, x))) == expected, kind


def test_scaled_sigmoid_keeps_the_library_form():
    x = np.linspace(-5, 5, 11, dtype=F)
    p = activation.Unary("Sigmoid", 2.0, 0.5)
    kernel = chip_float.chip_kernel("bm168x", activation.unary)
    assert np.array_equal(kernel(p, x), activation.unary(p, x))


def test_other_chips_keep_the_library_kernels():
    for fn in (norm.softmax, norm.lrn, norm.layer_norm, pooling.avg_pool, activation.unary):
        assert chip_float.chip_kernel("cv18xx", fn) is fn
        assert chip_float.chip_kernel(None, fn) is fn
        assert chip_float.chip_kernel("bm168x", fn) is not fn


def test_order_key_sorts_nan_by_its_sign():
    """The chip's compares: the exp's NaN (0xFFC00000) below −inf, a
    positive NaN above +inf, ±0 equal."""
    values = np.array([0xFFC00000, 0xFF800000, 0xBF800000, 0x80000000, 0x00000000,
                       0x3F800000, 0x7F800000, 0x7FC00000], np.uint32).view(F)  # fmt: skip
    keys = chip_float.order_key(values)
    assert list(np.argsort(keys, kind="stable")) == list(range(8))
    assert keys[3] == keys[4]


def test_softplus_and_mish_edges():
    """Huge negative x whose reduced argument overflows the Taylor sum: the
    chip's exp is NaN (−inf·0); Softplus's max takes 2^−126, Mish's clamp
    the lower bound, so x − 2·(x/2) leaves the Newton divide's error (the
    vendor runtime's values). A large x: Mish gives x itself ((e + 1)² + 1
    stays below 3.4e38). A negative subnormal x: +0."""
    x = np.array([0xE25F481C, 0xDD654C2B], np.uint32).view(F)
    with np.errstate(all="ignore"):
        assert np.isnan(chip_float.exp(x)).all()
        assert bits(chip_float.softplus(x[:1]))[0] == 0xC2AEAC50  # −126·f32(ln 2)
        assert bits(chip_float.mish(x[1:]))[0] == 0x52000000
        large = np.array([1e30, 88.7, 3.4e38], F)
        assert list(chip_float.mish(large)) == list(large)
        assert bits(chip_float.mish(np.array([-1e-45], F)))[0] == 0


def test_fold_flushes_operands_and_results():
    """3 · 2^−127: a normal product of a subnormal operand, flushed first;
    2^−126 · 0.5 a subnormal product; the sum of two subnormals; −0 + 1e-45."""
    mul = elementwise.Fold("Mul")
    a = np.array([3.0, 2.0**-126, 1.0], F)
    b = np.array([2.0**-127, 0.5, 1.0], F)
    assert list(chip_float.fold(mul, a, b)) == [0.0, 0.0, 1.0]
    add = elementwise.Fold("Add")
    s = chip_float.fold(add, np.array([1e-45, -0.0], F), np.array([1e-45, 1e-45], F))
    assert list(bits(s)) == [0, 0]  # +0: the flushed −0 + +0
    sub = chip_float.binary(elementwise.Binary("Sub"), np.array([2.0**-126], F),
                            np.array([2.0**-127], F))  # fmt: skip
    assert sub[0] == F(2.0**-126)  # the subnormal operand flushed, not 2^−127
