"""F16/BF16 transposed convolutions: the chip computes them as its half
convolution over the zero-inserted input with the flipped filter
(`tpuc.kernels.half_deconv`), bit for bit with tpuc's interpreter.

The inputs are stressed as in test_half_conv.py: channel 0 is 1 everywhere
and every kernel position of its filter is ±2^16 (BF16; 2^10 for F16),
which the bias takes back for the outputs that all positions reach, so
the accumulator runs large and the cut and the order of the taps show."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import one_weighted_op_bit_exact

DECONVS = {
    "2x2 stride 2 (ppocr_det)": dict(ic=24, oc=24, side=6, k=2, strides=[2, 2]),
    "3x3 stride 2 ic 40": dict(ic=40, oc=8, side=5, k=3, strides=[2, 2], pads=[1, 1, 1, 1]),
    "4x4 stride 2 output padding": dict(
        ic=16, oc=8, side=4, k=4, strides=[2, 2], pads=[1, 0, 2, 1], output_padding=[1, 1]
    ),
    "3x3 stride 1 ic 64": dict(ic=64, oc=8, side=5, k=3),
    "2 groups": dict(ic=64, oc=16, side=4, k=3, strides=[2, 2], group=2),
}


def stressed_deconv(rng, mode: str, ic: int, oc: int, side: int, k: int, group: int = 1):
    """Half-valued input, filter [ic, oc/g, k, k] and f32 bias (module docstring)."""
    from tpuc.base.numerics import to_bf16, to_f16

    rnd = to_bf16 if mode == "BF16" else to_f16
    x = rnd(np.maximum(rng.standard_normal((1, ic, side, side)), 0).astype(np.float32) * 2)
    w = rnd((rng.standard_normal((ic, oc // group, k, k)) * 0.1).astype(np.float32))
    b = rng.standard_normal(oc).astype(np.float32)
    big = 2.0 ** (16 if mode == "BF16" else 10)
    cg, og = ic // group, oc // group
    for g in range(group):
        x[0, g * cg] = 1
        sign = rng.choice([-1.0, 1.0], og) * big
        w[g * cg] = sign[:, None, None]
        b[g * og : (g + 1) * og] -= sign
    return x.astype(np.float32), w.astype(np.float32), b


@pytest.mark.parametrize("mode", ["BF16", "F16"])
@pytest.mark.parametrize("case", list(DECONVS))
def test_half_deconv_bit_exact(tmp_path, mode, case):
    spec = dict(DECONVS[case])
    ic, oc, side, k = (spec.pop(key) for key in ("ic", "oc", "side", "k"))
    rng = np.random.default_rng(len(case))
    x, w, b = stressed_deconv(rng, mode, ic, oc, side, k, spec.get("group", 1))
    one_weighted_op_bit_exact(
        tmp_path, "ConvTranspose", "tpu.Deconv", mode, x, w, b, kernel_shape=[k, k], **spec
    )
