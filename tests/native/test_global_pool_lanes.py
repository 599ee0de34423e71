"""An INT8 global average pool of one image over more than 64 channels runs
on the view [1, L, R·H, W] (pool_conv.lanes_view), its [1, L, R, 1] result
stored in L bursts instead of one byte per channel: bit for bit against
tpuc's TPU interpreter in the vendor runtime, through the depthwise
convolution of ones (windows above 7) and through the pooling kernel (7x7),
and squeezenet's 13x13 pool over 1000 channels in fewer vendor cycles."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import matches, native_run_and_cycles, node


def conv_relu_pool(rng, c: int, h: int):
    w = (rng.standard_normal((c, c, 1, 1)) * 0.05).astype("f4")
    nodes = [node("Conv", ["a", "w"], ["r0"], kernel_shape=[1, 1]), node("Relu", ["r0"], ["r"]),
             node("GlobalAveragePool", ["r"], ["y"])]  # fmt: skip
    return nodes, {"a": rng.standard_normal((1, c, h, h)).astype("f4")}, [("w", w)]


# (channels, side): whole-net vendor cycles (a 1x1 conv, the pool, the
# casts), every op global, measured 2026-11-27 before -> after the view
CASES = {
    (1000, 13): (95_905, 64_135),  # squeezenet's: the pool 36,801 -> 5,031 (TPU-MLIR 30,055)
    (96, 13): (7_449, 5_739),
    (1024, 7): (43_895, 43_160),  # the pooling kernel: the pool 3,310 -> 2,575
}


@pytest.mark.parametrize("c, h", list(CASES))
def test_global_pool_on_lanes(tmp_path, c, h, vendor):
    nodes, feeds, inits = conv_relu_pool(np.random.default_rng(0), c, h)
    run, cycles = native_run_and_cycles(tmp_path, nodes, feeds, ["y"], "INT8", inits,
                                        all_global=True)  # fmt: skip
    assert "tpu.Pool2D" in run.kinds
    matches(run.got, run.expected, "INT8")
    before, after = CASES[(c, h)]
    assert cycles < (before + after) / 2
