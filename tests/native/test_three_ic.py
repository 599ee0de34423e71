"""INT8 convolutions with few input channels fold kernel rows and/or
columns into the input channels (TPU-MLIR's `use_3ic_optimize`,
passes/native/three_ic.py): every mode bit for bit against tpuc's TPU
interpreter in the vendor runtime, and resnet50's first convolution in
fewer vendor cycles than without the fold."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import matches, native_run_and_cycles, node

from tpuc.passes.native.three_ic import folded_filter, three_ic_mode


def test_modes_follow_tpu_mlir():
    assert three_ic_mode(3, 7, 7) == 1  # resnet50's first: 3·7·7 > 64, 3·7 <= 64
    assert three_ic_mode(3, 3, 3) == 3  # 27 input channels after the fold
    assert three_ic_mode(8, 3, 5) == 2  # kh < kw: fold the columns
    assert three_ic_mode(16, 3, 3) == 1
    assert three_ic_mode(64, 3, 3) == 0
    assert three_ic_mode(3, 1, 1) == 0


def test_folded_filter_layout():
    """Mode 2 swaps kh and kw before folding kw into the input channels."""
    filt = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 20)
    got = folded_filter(filt, 2, 4, 5)
    assert got.shape == (2, 15, 4)
    # output 1, input channel 2, kernel column 3, kernel row 1
    assert got[1, 2 * 5 + 3, 1] == filt.reshape(2, 3, 4, 5)[1, 2, 1, 3]


def conv_model(rng, ic, kernel, stride, pad, hw, oc=32, second_reader=False):
    w = (rng.standard_normal((oc, ic, *kernel)) * 0.1).astype("f4")
    b = rng.standard_normal(oc).astype("f4")
    attrs = dict(kernel_shape=list(kernel), strides=[stride] * 2, pads=[pad] * 4)
    nodes = [node("Conv", ["a", "w", "b"], ["c"], **attrs), node("Relu", ["c"], ["y"])]
    outputs = ["y"]
    if second_reader:  # the input read twice: the 0x30 flag
        nodes.append(node("MaxPool", ["a"], ["z"], kernel_shape=[2, 2], strides=[2, 2]))
        outputs.append("z")
    feeds = {"a": rng.standard_normal((1, ic, hw, hw)).astype("f4")}
    return nodes, feeds, outputs, [("w", w), ("b", b)]


CASES = {  # (ic, kernel, stride, pad, hw, second reader): mode
    "rows (mode 1)": ((3, (7, 7), 2, 3, 32, False), 1),
    "columns (mode 2)": ((8, (3, 5), 1, 1, 20, False), 2),
    "rows and columns (mode 3)": ((3, (3, 3), 1, 1, 24, False), 3),
    "input read twice": ((3, (3, 3), 2, 1, 24, True), 3),
}


@pytest.mark.parametrize("case", list(CASES))
def test_three_ic_bit_exact(tmp_path, case, vendor):
    (ic, kernel, stride, pad, hw, twice), mode = CASES[case]
    assert three_ic_mode(ic, *kernel) == mode
    rng = np.random.default_rng(3)
    nodes, feeds, outputs, inits = conv_model(rng, ic, kernel, stride, pad, hw, second_reader=twice)
    run, _ = native_run_and_cycles(tmp_path, nodes, feeds, outputs, "INT8", inits, all_global=True)
    assert "tpu.Conv2D" in run.kinds
    matches(run.got, run.expected, "INT8")


def test_resnet50_first_conv_cycles(tmp_path, vendor):
    """3x224x224 by 64 7x7 filters, stride 2, then ReLU (with the input's
    cast and the output's): the vendor library counted 275,690 cycles for
    the net without the fold (the convolution alone 175,068; TPU-MLIR
    1.30.2's all-global 46,123) and 146,745 with it (the convolution
    46,123), measured 2026-11-27."""
    rng = np.random.default_rng(0)
    nodes, feeds, outputs, inits = conv_model(rng, 3, (7, 7), 2, 3, 224, oc=64)
    run, cycles = native_run_and_cycles(
        tmp_path, nodes, feeds, outputs, "INT8", inits, all_global=True
    )
    matches(run.got, run.expected, "INT8")
    assert cycles < 160_000
