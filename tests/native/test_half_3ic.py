"""F16/BF16 convolutions with few input channels in TPU-MLIR 1.30.2's 3ic
form (`use_3ic_optimize`: kernel rows, columns or both folded into the
input channels, its 8-bit rule over 32 channels, flag 0x10): the kernel's
dot-product units then take the folded channels, so one unit sums what
were several taps, and tpuc's interpreter (half_conv.folded) sums them so:
bit for bit against the vendor runtime, as a global layer and inside a
layer group, in fewer vendor cycles."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node

# (ic, oc, side, kh, kw, stride): the fold
CONVS = {
    "3x3 ic 3 (mode 3, smallcnn)": (3, 16, 32, 3, 3, 1),
    "7x7 ic 3 stride 2 (mode 1, resnet50's stem)": (3, 64, 56, 7, 7, 2),
    "3x5 ic 3 (mode 2)": (3, 8, 20, 3, 5, 1),
    "5x5 ic 4 (mode 1)": (4, 16, 20, 5, 5, 1),
}


def conv_model(mode, ic, oc, side, kh, kw, stride, then_relu_conv=False):
    from tpuc.base.numerics import to_bf16, to_f16

    rnd = to_bf16 if mode == "BF16" else to_f16
    rng = np.random.default_rng(ic * kh + kw)
    x = rnd(rng.standard_normal((1, ic, side, side)).astype(np.float32))
    w = rnd((rng.standard_normal((oc, ic, kh, kw)) * 0.3).astype(np.float32))
    b = rng.standard_normal(oc).astype(np.float32)
    pads = [kh // 2, kw // 2, kh // 2, kw // 2]
    out = "c" if then_relu_conv else "y"
    nodes = [node("Conv", ["a", "w", "b"], [out], kernel_shape=[kh, kw], pads=pads,
                  strides=[stride, stride])]  # fmt: skip
    inits = [("w", w), ("b", b)]
    if then_relu_conv:
        w2 = rnd((rng.standard_normal((oc, oc, 3, 3)) * 0.1).astype(np.float32))
        pads = [1, 1, 1, 1]
        nodes += [node("Relu", ["c"], ["r"]),
                  node("Conv", ["r", "w2"], ["y"], kernel_shape=[3, 3], pads=pads)]  # fmt: skip
        inits.append(("w2", w2))
    return nodes, {"a": x}, inits


def exact(run) -> None:
    chip = np.asarray(run.got["y"])
    tpuc = np.asarray(run.expected["y"]).reshape(chip.shape)
    differ = np.count_nonzero(chip != tpuc)
    assert differ == 0, f"{differ} of {chip.size} differ"


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("case", list(CONVS))
def test_half_3ic_global_bit_exact(tmp_path, mode, case):
    nodes, feeds, inits = conv_model(mode, *CONVS[case])
    run, _ = native_run_and_cycles(tmp_path, nodes, feeds, ["y"], mode, inits, all_global=True)
    assert "tpu.Conv2D" in run.kinds
    exact(run)


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_half_3ic_in_a_group_bit_exact(tmp_path, mode):
    """The 3x3 ic-3 conv, ReLU and a 3x3 conv in one layer group."""
    nodes, feeds, inits = conv_model(mode, 3, 16, 32, 3, 3, 1, then_relu_conv=True)
    run, _ = native_run_and_cycles(tmp_path, nodes, feeds, ["y"], mode, inits)
    exact(run)


# (kh, stride): a 224x224 stem (3 -> 64, ReLU, 3x3/2 max pool) in one group,
# F16, vendor cycles measured 2026-11-27 unfolded -> folded (the local 3ic
# buffer as getBufferSize_bm1684x's 16-bit one; with an input copy the fold
# left squeezenet's group and cost 89,623 cycles global)
STEMS = {(3, 2): (75_348, 67_671), (7, 2): (203_821, 80_704)}  # squeezenet's, resnet50's


@pytest.mark.parametrize("k, stride", list(STEMS))
def test_half_3ic_stem_in_a_group(tmp_path, k, stride):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    w = (rng.standard_normal((64, 3, k, k)) * 0.3).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    nodes = [
        node("Conv", ["a", "w", "b"], ["c"], kernel_shape=[k, k], pads=[k // 2] * 4,
             strides=[stride, stride]),
        node("Relu", ["c"], ["r"]),
        node("MaxPool", ["r"], ["y"], kernel_shape=[3, 3], strides=[2, 2]),
    ]  # fmt: skip
    run, cycles = native_run_and_cycles(tmp_path, nodes, {"a": x}, ["y"], "F16",
                                        [("w", w), ("b", b)])  # fmt: skip
    exact(run)
    unfolded, folded = STEMS[(k, stride)]
    assert cycles < (unfolded + folded) / 2
