"""F16/BF16 tpu.Scale (a BatchNormalization with ReLU) as a local op of a
layer group (local/scale.py, TPU-MLIR's backend_api_scale_local): a
Concat, the Scale and a 1x1 conv, densenet121's dense layer, in one
group instead of three, bit for bit against tpuc's interpreter in the
vendor runtime and cheaper than with the Scale global."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node

SIZES = {"whole": (96, 28), "h split": (256, 56)}


def dense_layer(rng, c, side):
    half = c // 2
    inits = [
        ("w0", (rng.standard_normal((half, half, 3, 3)) * 0.05).astype("f4")),
        ("s", rng.standard_normal(c).astype("f4")),
        ("bb", rng.standard_normal(c).astype("f4")),
        ("m", rng.standard_normal(c).astype("f4")),
        ("v", (np.abs(rng.standard_normal(c)) + 0.5).astype("f4")),
        ("w1", (rng.standard_normal((32, c, 1, 1)) * 0.05).astype("f4")),
    ]
    nodes = [
        node("Conv", ["a", "w0"], ["c0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Concat", ["a", "c0"], ["cat"], axis=1),
        node("BatchNormalization", ["cat", "s", "bb", "m", "v"], ["bn"], epsilon=1e-5),
        node("Relu", ["bn"], ["r"]),
        node("Conv", ["r", "w1"], ["y"], kernel_shape=[1, 1]),
    ]
    return nodes, {"a": rng.standard_normal((1, half, side, side)).astype("f4")}, inits


@pytest.mark.parametrize("mode", ["F16", "BF16"])
@pytest.mark.parametrize("size", list(SIZES))
def test_half_scale_in_a_group_bit_exact(tmp_path, mode, size):
    nodes, feeds, inits = dense_layer(np.random.default_rng(0), *SIZES[size])
    for sub in ("g", "a"):
        (tmp_path / sub).mkdir()
    run, grouped = native_run_and_cycles(tmp_path / "g", nodes, feeds, ["y"], mode, inits)
    _, alone = native_run_and_cycles(tmp_path / "a", nodes, feeds, ["y"], mode, inits,
                                     all_global=True)  # fmt: skip
    assert "tpu.Scale" in run.kinds
    chip, tpuc = np.asarray(run.got["y"]).ravel(), np.asarray(run.expected["y"]).ravel()
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"
    assert grouped < alone
