"""F16/BF16 average pools the global rule runs in f32 between casts
(pool.half_via_f32), as local ops of a layer group (local/half_pool.py:
cast in, f32 pooling, cast out per slice, as TPU-MLIR groups its own
Cast, Pool2D, Cast): a 1x1 conv, ReLU and the pool in one group, against
tpuc's interpreter in the vendor runtime, and cheaper than every op
global (measured 2026-11-27: 2x2 over 64x28x28 F16 25,509 -> 6,218 cycles;
squeezenet's 1000x13x13 global pool 109,157 -> 100,536)."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node

POOLS = {
    "2x2 stride 2": (64, 28, dict(kernel_shape=[2, 2], strides=[2, 2])),
    "3x3 stride 2": (96, 14, dict(kernel_shape=[3, 3], strides=[2, 2])),
}


def conv_relu_pool(rng, c, side, pool):
    w = (rng.standard_normal((c, c, 1, 1)) * 0.05).astype("f4")
    last = (node("AveragePool", ["r"], ["y"], **pool) if pool
            else node("GlobalAveragePool", ["r"], ["y"]))  # fmt: skip
    nodes = [node("Conv", ["a", "w"], ["r0"], kernel_shape=[1, 1]), node("Relu", ["r0"], ["r"]),
             last]  # fmt: skip
    return nodes, {"a": rng.standard_normal((1, c, side, side)).astype("f4")}, [("w", w)]


def grouped_and_global(tmp_path, mode, nodes, feeds, inits):
    for sub in ("g", "a"):
        (tmp_path / sub).mkdir()
    run, grouped = native_run_and_cycles(tmp_path / "g", nodes, feeds, ["y"], mode, inits)
    _, alone = native_run_and_cycles(tmp_path / "a", nodes, feeds, ["y"], mode, inits,
                                     all_global=True)  # fmt: skip
    return run, grouped, alone


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("case", list(POOLS))
def test_half_average_pool_in_a_group_bit_exact(tmp_path, mode, case):
    c, side, pool = POOLS[case]
    nodes, feeds, inits = conv_relu_pool(np.random.default_rng(0), c, side, pool)
    run, grouped, alone = grouped_and_global(tmp_path, mode, nodes, feeds, inits)
    chip, tpuc = np.asarray(run.got["y"]).ravel(), np.asarray(run.expected["y"]).ravel()
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"
    assert grouped < alone / 2


def test_squeezenet_global_pool_in_a_group(tmp_path):
    """The 13x13 global pool over 1000 channels: the f32 pool's order is not
    the interpreter's (1 of 1000 values one f16 step off, as the global
    rule's lanes view): within one step, cheaper than global."""
    nodes, feeds, inits = conv_relu_pool(np.random.default_rng(0), 1000, 13, None)
    run, grouped, alone = grouped_and_global(tmp_path, "F16", nodes, feeds, inits)
    chip, tpuc = np.asarray(run.got["y"]).ravel(), np.asarray(run.expected["y"]).ravel()
    assert np.all(np.abs(chip - tpuc) <= np.abs(tpuc) * 2.0**-10)
    assert grouped < alone
