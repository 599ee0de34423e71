"""F16/BF16 fc by a weight with a bias (`backend_api_fc_global`): the chip's
two paths, found by probing the vendor's chip model, and tpuc's interpreter
(`half_conv.matmul`) computing each bit for bit.

With a half result and a half bias (TPU-MLIR's form) the call runs MM2
unless N > 256·M: the product (the f32 accumulator of the 1x1 convolution
over the rows, test_half_conv.py) is rounded to the half type, then the bias
is added and the sum rounded again. Above that it runs MM, whose f32
accumulator starts at the bias like a convolution's; the native rule then
keeps lowering's f32 bias and an f32 result cast once, and so it does where
MM2 costs more (narrow results: `half_conv.fc_half_form`)."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node

E25 = 2.0**25


def fc_run(tmp_path, mode, x, w, b, relu=False):
    """Gemm(x, wᵀ, b) [+ Relu] natively and in the TPU interpreter, every op global."""
    nodes = [node("Gemm", ["a", "w", "b"], ["g" if relu else "y"], transB=1)]
    if relu:
        nodes.append(node("Relu", ["g"], ["y"]))
    run, cycles = native_run_and_cycles(
        tmp_path, nodes, {"a": x}, ["y"], mode, inits=[("w", w), ("b", b)], all_global=True
    )
    assert "tpu.MatMul" in run.kinds
    chip = np.asarray(run.got["y"])
    return chip, np.asarray(run.expected["y"]).reshape(chip.shape), cycles


def test_mm2_rounds_the_product_before_the_bias(tmp_path):
    """BF16, M = 1, N = 48 (the half form, MM2), x of ones, against values
    worked by hand (columns 3.. are 0).
    Column 0: products −2^25 and 3 in one block sum to −2^25 + 2 (the cut),
    bias 2^25: added first (a convolution's order) they would give 2; the
    product rounded to bf16 first is −2^25, and + 2^25 gives 0. Column 1:
    product 1, bias 0.5: 1.5. Column 2: 2^25 and, in the next block, 1 sum
    to 2^25 in f32, bias −2^25: 0 (bias first: 0 + 1 = 1)."""
    w = np.zeros((48, 64), np.float32)
    w[0, 0], w[0, 1] = -E25, 3.0
    w[1, 5] = 1.0
    w[2, 0], w[2, 40] = E25, 1.0
    b = np.zeros(48, np.float32)
    b[:3] = [E25, 0.5, -E25]
    chip, tpuc, _ = fc_run(tmp_path, "BF16", np.ones((1, 64), np.float32), w, b)
    assert chip.ravel().tolist() == [0.0, 1.5] + [0.0] * 46
    assert np.array_equal(chip, tpuc)


HALF_FORM = {
    # (M, K, N) of the half form, MM2
    "smallcnn fc1 1x2048x128": (1, 2048, 128),
    "M 6, N 48": (6, 300, 48),
    "M 64": (64, 512, 256),
    "M 2, N 512": (2, 64, 512),
    "M 16, N 10": (16, 128, 10),
}
F32_FORM = {
    # MM (N > 256·M), or MM2 would cost more
    "M 1, N 257": (1, 64, 257),
    "M 2, N 513": (2, 96, 513),
    "resblock logits 1x32x10": (1, 32, 10),
    "M 6, N 40": (6, 300, 40),
}


def random_fc(mode, m, k, n):
    """Half inputs and weights, an f32 bias of no half value."""
    from tpuc.base.numerics import to_bf16, to_f16

    rnd = to_bf16 if mode == "BF16" else to_f16
    rng = np.random.default_rng(m * 7 + n)
    x = rnd(rng.standard_normal((m, k)).astype(np.float32))
    w = rnd((rng.standard_normal((n, k)) * 0.1).astype(np.float32))
    return x, w, (rng.standard_normal(n) * 3).astype(np.float32)


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("case", list(HALF_FORM))
def test_half_form_bit_exact(tmp_path, mode, case):
    """With ReLU: the chip's values equal tpuc's."""
    chip, tpuc, _ = fc_run(tmp_path, mode, *random_fc(mode, *HALF_FORM[case]), relu=True)
    differ = np.count_nonzero(chip != tpuc)
    assert differ == 0, f"{differ} of {chip.size} differ"


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("case", list(F32_FORM))
def test_f32_form_within_one_step(tmp_path, mode, case):
    """The f32 form (MM) as before the half form: tpuc's bias-first f32
    accumulator is not always the chip's (F16 6x300x40: 1 of 240 values one
    half step off, a value whose exact sum lies 1.2e-7 past the rounding
    midpoint, so the chip's MM path sums K in another order): every value
    within one step of the half type, cosine ≥ 0.99999."""
    chip, tpuc, _ = fc_run(tmp_path, mode, *random_fc(mode, *F32_FORM[case]), relu=True)
    step = 2.0 ** (-7 if mode == "BF16" else -10)
    assert np.all(np.abs(chip - tpuc) <= np.maximum(np.abs(tpuc), 2.0**-14) * step)
    a, b = chip.ravel().astype(np.float64), tpuc.ravel().astype(np.float64)
    assert a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) >= 0.99999


# (M, K, N): the whole net's vendor cycles (input cast, fc, output cast)
# with the form fc_half_form chooses, and with the other one, F16, measured
# 2026-11-27; TPU-MLIR 1.30.2 emits the half form everywhere
CHOICES = {
    (1, 2048, 128): (13_404, 35_379),  # smallcnn's fc1 (TPU-MLIR's MatMul alone 12,100)
    (40, 480, 120): (6_717, 49_849),
    (64, 128, 10): (5_945, 12_836),
    (1, 32, 10): (756, 1_088),  # resblock's logits: MM2's short weight rows cost
    (1, 128, 16): (1_833, 3_309),
    (8, 128, 10): (3_405, 3_858),
}


@pytest.mark.parametrize("shape", list(CHOICES))
def test_the_cheaper_form(tmp_path, shape):
    """fc_half_form picks the form with the fewer vendor cycles; the cycles
    are the chosen form's (within 2%)."""
    m, k, n = shape
    rng = np.random.default_rng(1)
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    chip, tpuc, cycles = fc_run(tmp_path, "F16", x, w, b)
    assert np.array_equal(chip, tpuc)
    chosen, other = CHOICES[shape]
    assert chosen < other and abs(cycles - chosen) <= chosen * 0.02
