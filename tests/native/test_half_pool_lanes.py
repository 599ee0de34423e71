"""An F16/BF16 global average pool the chip's half kernel does not sum in
a measured order (squeezenet's 13x13, resnet50's 7x7: pool.half_via_f32)
pools in f32 between casts; over more than 64 channels of one image the
casts and the f32 pool now run on pool_conv.lanes_view's [1, L, R·H, W]
view, so the [1, L, R, 1] result leaves in L bursts instead of one
4-byte transfer per channel. The windowed f32 pool sums in another order
than the global one: against tpuc's interpreter (f32 mean, rounded once)
the values stay within one step of the half type (F16 1000x13: 1 of 1000
one step off; before the view 0), cosine ≥ 0.99999."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node

# (mode, channels, side): whole-net vendor cycles (a 1x1 conv, ReLU, the
# pool, the casts), every op global, measured 2026-11-27 before -> after
CASES = {
    ("F16", 1000, 13): (133_006, 109_157),  # squeezenet's
    ("BF16", 1000, 13): (133_006, 109_157),
    ("F16", 2048, 7): (251_943, 224_305),  # resnet50's
}


@pytest.mark.parametrize("mode, c, h", list(CASES))
def test_half_global_pool_on_lanes(tmp_path, mode, c, h):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((c, c, 1, 1)) * 0.05).astype("f4")
    nodes = [
        node("Conv", ["a", "w"], ["r0"], kernel_shape=[1, 1]),
        node("Relu", ["r0"], ["r"]),
        node("GlobalAveragePool", ["r"], ["y"]),
    ]
    feeds = {"a": rng.standard_normal((1, c, h, h)).astype("f4")}
    run, cycles = native_run_and_cycles(
        tmp_path, nodes, feeds, ["y"], mode, [("w", w)], all_global=True
    )
    assert "tpu.Pool2D" in run.kinds
    chip = np.asarray(run.got["y"]).ravel()
    tpuc = np.asarray(run.expected["y"]).ravel()
    step = 2.0 ** (-7 if mode == "BF16" else -10)
    assert np.all(np.abs(chip - tpuc) <= np.abs(tpuc) * step)
    assert chip @ tpuc / (np.linalg.norm(chip) * np.linalg.norm(tpuc)) >= 0.99999
    before, after = CASES[(mode, c, h)]
    assert cycles < (before + after) / 2
