"""F16/BF16 fc by a weight with a bias (`backend_api_fc_global`): the chip's
two paths, found by probing the vendor's chip model, and tpuc's interpreter
(`half_conv.matmul`) computing each bit for bit.

With a half result and a half bias (TPU-MLIR's form) the call runs MM2
unless N > 256·M: the product (the f32 accumulator of the 1x1 convolution
over the rows, test_half_conv.py) is rounded to the half type, then the bias
is added and the sum rounded again. Above that it runs MM, whose f32
accumulator starts at the bias like a convolution's; the native rule then
keeps lowering's f32 bias and an f32 result cast once (the MM2 form needs
the bias rounded, so TPU-MLIR's bias is f16/bf16)."""

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
    """BF16, M = 1, N = 3 (MM2), x of ones, against values worked by hand.
    Column 0: products −2^25 and 3 in one block sum to −2^25 + 2 (the cut),
    bias 2^25: added first (a convolution's order) they would give 2; the
    product rounded to bf16 first is −2^25, and + 2^25 gives 0. Column 1:
    product 1, bias 0.5: 1.5. Column 2: 2^25 and, in the next block, 1 sum
    to 2^25 in f32, bias −2^25: 0 (bias first: 0 + 1 = 1)."""
    w = np.zeros((3, 64), np.float32)
    w[0, 0], w[0, 1] = -E25, 3.0
    w[1, 5] = 1.0
    w[2, 0], w[2, 40] = E25, 1.0
    b = np.array([E25, 0.5, -E25], np.float32)
    chip, tpuc, _ = fc_run(tmp_path, "BF16", np.ones((1, 64), np.float32), w, b)
    assert chip.ravel().tolist() == [0.0, 1.5, 0.0]
    assert np.array_equal(chip, tpuc)


SHAPES = {
    # (M, K, N): MM2 (N <= 256·M) ...
    "smallcnn fc1 1x2048x128": (1, 2048, 128),
    "M 6, K 300": (6, 300, 40),
    "M 64": (64, 512, 256),
    "M 2, N 512": (2, 64, 512),
    # ... and MM (N > 256·M): the f32 form
    "M 1, N 257": (1, 64, 257),
    "M 2, N 513": (2, 96, 513),
}


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("case", list(SHAPES))
def test_half_fc_bit_exact(tmp_path, mode, case):
    """Random half inputs and weights, an f32 bias of no half value, ReLU:
    the chip's values equal tpuc's on both paths."""
    from tpuc.base.numerics import to_bf16, to_f16

    m, k, n = SHAPES[case]
    rnd = to_bf16 if mode == "BF16" else to_f16
    rng = np.random.default_rng(m * 7 + n)
    x = rnd(rng.standard_normal((m, k)).astype(np.float32))
    w = rnd((rng.standard_normal((n, k)) * 0.1).astype(np.float32))
    b = (rng.standard_normal(n) * 3).astype(np.float32)
    chip, tpuc, _ = fc_run(tmp_path, mode, x, w, b, relu=True)
    differ = np.count_nonzero(chip != tpuc)
    assert differ == 0, f"{differ} of {chip.size} differ"


def test_mm2_form_is_cheaper(tmp_path):
    """smallcnn's fc1 (1x2048x128, F16): the whole net (input cast, fc,
    output cast) in the vendor's cycles, 35,379 with the f32 result and its
    cast, 13,412 in the half form (TPU-MLIR 1.30.2's MatMul alone 12,100)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2048)).astype(np.float32)
    w = (rng.standard_normal((128, 2048)) * 0.05).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    chip, tpuc, cycles = fc_run(tmp_path, "F16", x, w, b)
    assert np.array_equal(chip, tpuc)
    assert cycles < 15_000
