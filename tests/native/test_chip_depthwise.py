"""Depthwise convolutions: the chip's f32 order of summation, found by
probing the vendor's chip model, and tpuc's interpreter
(`tpuc.kernels.chip_depthwise`) computing it bit for bit, in F32 and in
F16/BF16 (which the native target runs in f32 between casts).

What the probes show (inputs of 1, so each product is its weight; one
output pixel per channel): the kernel positions go in row-major order, the
even ones into an accumulator starting at 0, the odd ones into one
starting at the bias, and the two are added at the end."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_vs_interp, node, one_weighted_op_bit_exact

E25 = 2.0**25

# (name, {kernel position: product}, bias, what the chip returns)
PROBES = [
    # row-major in one accumulator would give (2^25 + 1) - 2^25 = 0
    ("odd position apart", {0: E25, 1: 1.0, 2: -E25}, 0.0, 1.0),
    ("even positions together", {0: E25, 2: 1.0, 4: -E25}, 0.0, 0.0),
    # the bias starts the odd accumulator: (1 + 2^25) - 2^25 = 0
    ("bias with the odd ones", {1: E25, 3: -E25}, 1.0, 0.0),
    ("bias apart from the even ones", {0: E25, 2: -E25}, 1.0, 1.0),
    # the last position (8) is even
    ("last position even", {8: E25, 6: -E25, 7: 1.0}, 0.0, 1.0),
    # the two sums meet once: 2^25 + (1 + 2) rounds up to 2^25 + 4 (one
    # accumulator: 2^25 + 1 -> 2^25, + 2 -> 2^25, a tie to even)
    ("sums added at the end", {0: E25, 1: 1.0, 3: 2.0}, 0.0, E25 + 4.0),
]


def probe_model():
    """One channel per probe, 3x3 filter, a 3x3 input of ones (no padding)."""
    c = len(PROBES)
    w = np.zeros((c, 1, 3, 3), np.float32)
    for ch, (_, products, _, _) in enumerate(PROBES):
        for pos, v in products.items():
            w[ch, 0, pos // 3, pos % 3] = v
    bias = np.array([p[2] for p in PROBES], np.float32)
    x = np.ones((1, c, 3, 3), np.float32)
    nodes = [node("Conv", ["a", "w", "b"], ["y"], kernel_shape=[3, 3], group=c)]
    return nodes, x, w, bias


def test_probes_show_the_chips_order(tmp_path):
    """F32: every probe gives the chip's value, natively and in tpuc."""
    nodes, x, w, bias = probe_model()
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": x}, ["y"], "F32", inits=[("w", w), ("b", bias)]
    )
    assert "tpu.Conv2D" in kinds
    chip = np.asarray(got["y"]).ravel()
    wrong = [f"{p[0]}: {v}" for p, v in zip(PROBES, chip, strict=True) if v != p[3]]
    assert not wrong, wrong
    assert np.array_equal(np.asarray(expected["y"]).ravel(), [p[3] for p in PROBES])


DEPTHWISE = {
    "3x3 pad": dict(c=16, side=12, k=3, pads=[1, 1, 1, 1]),
    "3x3 stride 2": dict(c=8, side=13, k=3, strides=[2, 2], pads=[1, 1, 1, 1]),
    "5x5 stride 2": dict(c=8, side=11, k=5, strides=[2, 2], pads=[2, 2, 2, 2]),
    "2x2 dilation 2": dict(c=4, side=9, k=2, dilations=[2, 2]),
}


@pytest.mark.parametrize("mode", ["F32", "BF16", "F16"])
@pytest.mark.parametrize("case", list(DEPTHWISE))
def test_depthwise_bit_exact(tmp_path, mode, case):
    """Random inputs (BLAS's order differs from the chip's in about half the
    f32 outputs): the native outputs equal the interpreter's bit for bit."""
    from tpuc.base.numerics import to_bf16, to_f16

    spec = dict(DEPTHWISE[case])
    c, side, k = (spec.pop(key) for key in ("c", "side", "k"))
    rnd = {"F32": np.float32, "BF16": to_bf16, "F16": to_f16}[mode]
    rng = np.random.default_rng(len(case))
    x = rnd(rng.standard_normal((1, c, side, side)).astype(np.float32)).astype(np.float32)
    w = rnd(rng.standard_normal((c, 1, k, k)).astype(np.float32)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    one_weighted_op_bit_exact(
        tmp_path, "Conv", "tpu.Conv2D", mode, x, w, b, kernel_shape=[k, k], group=c, **spec
    )
