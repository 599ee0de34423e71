"""F16/BF16 convolutions and weight matmuls: the chip's arithmetic, found by
probing the vendor's chip model, and tpuc's interpreter (`half_conv`)
computing it bit for bit.

What the probes show (one output channel per probe, products made by
weights on inputs of 1): the accumulator is f32 and starts at the bias; per
block of 32 input channels (outer) and kernel position (inner) the products
are cut toward zero below 2^(E-24), E the exponent of the block's largest
|product|, summed exactly and rounded once to f32; the result is rounded to
the half type at the end."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_vs_interp, node, one_weighted_op_bit_exact

E25 = 2.0**25

# (name, {(channel, kh, kw): product}, bias, what the chip returns)
PROBES = [
    # one block: 1 is cut away next to ±2^25 wherever it sits
    ("cut in a block", {(0, 0, 0): E25, (1, 0, 0): -E25, (2, 0, 0): 1.0}, 0.0, 0.0),
    ("cut, last channel", {(0, 0, 0): E25, (31, 0, 0): -E25, (5, 0, 0): 1.0}, 0.0, 0.0),
    # a block of its own keeps it
    ("next block", {(0, 0, 0): E25, (1, 0, 0): -E25, (32, 0, 0): 1.0}, 0.0, 1.0),
    # the cut is toward zero on a grid of 2^(23-24): 1.25 -> 1, -1.25 -> -1
    ("grid, positive", {(0, 0, 0): 2.0**23, (1, 0, 0): -(2.0**23), (2, 0, 0): 1.25}, 0.0, 1.0),
    ("grid, negative", {(0, 0, 0): 2.0**23, (1, 0, 0): -(2.0**23), (2, 0, 0): -1.25}, 0.0, -1.0),
    # each product is cut on its own: 0.75 + 0.75 on a grid of 1 -> 0
    (
        "cut per product",
        {(0, 0, 0): 2.0**24, (1, 0, 0): -(2.0**24), (2, 0, 0): 0.75, (3, 0, 0): 0.75},
        0.0,
        0.0,
    ),  # fmt: skip
    # a block's exact sum 2^25 + 3 rounds to f32 (nearest even) before the
    # next block subtracts 2^25
    (
        "block sum to f32",
        {(0, 0, 0): 2.0**24, (1, 0, 0): 2.0**24, (2, 0, 0): 3.0, (32, 0, 0): -E25},
        0.0,
        4.0,
    ),  # fmt: skip
    # the bias comes first: 2^25 - 2^25 + 3 (last: (-2^25 + 3) + 2^25 = 4)
    ("bias first", {(0, 0, 0): -E25, (32, 0, 0): 3.0}, E25, 3.0),
    # kernel positions are units of their own, added in row-major order
    # within a block: (2^25 at (0,0)) + (1 at (0,1)) is cut, then -2^25
    ("taps in order", {(0, 0, 0): E25, (0, 0, 1): 1.0, (0, 1, 0): -E25}, 0.0, 0.0),
    ("taps in order, 1 last", {(0, 0, 0): E25, (0, 0, 1): -E25, (0, 1, 0): 1.0}, 0.0, 1.0),
    # blocks are the outer loop: block 0's taps all come before block 1's
    # (taps outer would give 0, then 1)
    ("blocks outer", {(32, 0, 0): E25, (0, 2, 2): -E25, (32, 0, 1): 1.0}, 0.0, 1.0),
    ("blocks outer, 1 cut", {(32, 0, 1): E25, (0, 0, 0): -E25, (0, 2, 2): 1.0}, 0.0, 0.0),
]


def test_probes_show_the_chips_order_and_cut(tmp_path):
    """BF16: every probe gives the chip's value, natively and in tpuc."""
    w = np.zeros((len(PROBES), 64, 3, 3), np.float32)
    bias = np.array([p[2] for p in PROBES], np.float32)
    for o, (_, products, _, _) in enumerate(PROBES):
        for (c, i, j), v in products.items():
            w[o, c, i, j] = v
    x = np.ones((1, 64, 3, 3), np.float32)
    nodes = [node("Conv", ["a", "w", "b"], ["y"], kernel_shape=[3, 3])]
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": x}, ["y"], "BF16", inits=[("w", w), ("b", bias)]
    )
    assert "tpu.Conv2D" in kinds
    chip = np.asarray(got["y"]).ravel()
    want = np.array([p[3] for p in PROBES], np.float32)
    wrong = [f"{p[0]}: {v}" for p, v in zip(PROBES, chip, strict=True) if v != p[3]]
    assert not wrong, wrong
    assert np.array_equal(np.asarray(expected["y"]).ravel(), want)


CONVS = {
    "3x3 pad": dict(ic=64, oc=16, side=8, k=3, pads=[1, 1, 1, 1]),
    "ic 40 stride 2": dict(ic=40, oc=8, side=9, k=3, strides=[2, 2]),
    "1x1 ic 96": dict(ic=96, oc=8, side=7, k=1),
    "dilation 2": dict(ic=16, oc=8, side=9, k=3, dilations=[2, 2]),
    "2 groups": dict(ic=64, oc=16, side=6, k=3, group=2, pads=[1, 1, 1, 1]),
    "7x7 ic 3": dict(ic=3, oc=8, side=14, k=7, strides=[2, 2], pads=[3, 3, 3, 3]),
    "ic 1024": dict(ic=1024, oc=8, side=3, k=3, pads=[1, 1, 1, 1]),
}


def stressed_conv(rng, mode: str, ic: int, oc: int, side: int, k: int, group: int = 1):
    """Inputs, filter and bias of half values where the cut and the order
    show: channel 0 of each group is 1 everywhere, and its centre tap
    multiplies it by ±2^16 (BF16; 2^10 for F16), which the bias takes back,
    so the accumulator runs at that size and the result is small."""
    from tpuc.base.numerics import to_bf16, to_f16

    rnd = to_bf16 if mode == "BF16" else to_f16
    x = rnd(np.maximum(rng.standard_normal((1, ic, side, side)), 0).astype(np.float32) * 2)
    w = rnd((rng.standard_normal((oc, ic // group, k, k)) * 0.1).astype(np.float32))
    b = rng.standard_normal(oc).astype(np.float32)
    big = 2.0 ** (16 if mode == "BF16" else 10)
    cg, og = ic // group, oc // group
    for g in range(group):
        x[0, g * cg] = 1
        w[g * og : (g + 1) * og, 0] = 0
        sign = rng.choice([-1.0, 1.0], og) * big
        w[g * og : (g + 1) * og, 0, k // 2, k // 2] = sign
        b[g * og : (g + 1) * og] -= sign
    return x.astype(np.float32), w.astype(np.float32), b


@pytest.mark.parametrize("mode", ["BF16", "F16"])
@pytest.mark.parametrize("case", list(CONVS))
def test_half_conv_bit_exact(tmp_path, mode, case):
    spec = dict(CONVS[case])
    ic, oc, side, k = (spec.pop(key) for key in ("ic", "oc", "side", "k"))
    rng = np.random.default_rng(len(case))
    x, w, b = stressed_conv(rng, mode, ic, oc, side, k, spec.get("group", 1))
    one_weighted_op_bit_exact(
        tmp_path, "Conv", "tpu.Conv2D", mode, x, w, b, kernel_shape=[k, k], **spec
    )


@pytest.mark.parametrize("mode", ["BF16", "F16"])
def test_half_weight_matmul_bit_exact(tmp_path, mode):
    """A Gemm by a weight (the chip's 1x1 convolution over the rows), with
    bias and ReLU, K = 300 (ten blocks, the last one short)."""
    from tpuc.base.numerics import to_bf16, to_f16

    rnd = to_bf16 if mode == "BF16" else to_f16
    rng = np.random.default_rng(11)
    x = rnd(rng.standard_normal((6, 300)).astype(np.float32)).astype(np.float32)
    w = rnd((rng.standard_normal((40, 300)) * 0.1).astype(np.float32)).astype(np.float32)
    b = rng.standard_normal(40).astype(np.float32)
    nodes = [node("Gemm", ["a", "w", "b"], ["g"], transB=1), node("Relu", ["g"], ["y"])]
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": x}, ["y"], mode, inits=[("w", w), ("b", b)]
    )
    assert "tpu.MatMul" in kinds
    chip, tpuc = np.asarray(got["y"]), np.asarray(expected["y"]).reshape(np.shape(got["y"]))
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"


@pytest.mark.parametrize("mode", ["BF16", "F16"])
@pytest.mark.parametrize("k, transposed", [(15, False), (40, True)])
def test_half_batch_matmul_bit_exact(tmp_path, mode, k, transposed):
    """Two activations (attention's q·kᵀ and p·v forms, ppocr_rec): K = 15
    (one block) and 40 (a short second block). Columns 0 and 1 of the left
    operand are 1 and rows 0 and 1 of the right one ±2^16 (BF16; 2^10 for
    F16) that cancel, so the first block's cut grid is far above the small
    products' bits."""
    from tpuc.base.numerics import to_bf16, to_f16

    rnd = to_bf16 if mode == "BF16" else to_f16
    rng = np.random.default_rng(k)
    a = rnd(rng.standard_normal((2, 3, 24, k)).astype(np.float32))
    b = rnd((rng.standard_normal((2, 3, k, 20)) * 0.1).astype(np.float32))
    big = 2.0 ** (16 if mode == "BF16" else 10)
    a[..., :2] = 1
    sign = rng.choice([-1.0, 1.0], (2, 3, 20)) * big
    b[..., 0, :], b[..., 1, :] = sign, -sign
    if transposed:
        b = np.swapaxes(b, -1, -2).copy()
        nodes = [
            node("Transpose", ["b"], ["bt"], perm=[0, 1, 3, 2]),
            node("MatMul", ["a", "bt"], ["y"]),
        ]
    else:
        nodes = [node("MatMul", ["a", "b"], ["y"])]
    feeds = {"a": a.astype(np.float32), "b": b.astype(np.float32)}
    got, expected, kinds, _ = native_vs_interp(tmp_path, nodes, feeds, ["y"], mode)
    assert "tpu.MatMul" in kinds
    chip, tpuc = np.asarray(got["y"]), np.asarray(expected["y"]).reshape(np.shape(got["y"]))
    same = np.count_nonzero(chip == tpuc)
    assert same == chip.size, f"{same} of {chip.size} equal"
