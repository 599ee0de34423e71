"""The F16/BF16 model's input cast (f32 -> f16/bf16) as a local op in the
first layer group (`backend_api_cast_local`, local/quantize.py), as
TPU-MLIR groups it: bit for bit against tpuc's interpreter in the vendor
runtime, and the grouped net cheaper than every op global."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_input_cast_in_the_group(tmp_path, mode):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 16, 32, 32)).astype(np.float32)
    w = (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)
    nodes = [
        node("Conv", ["a", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Relu", ["c"], ["y"]),
    ]
    feeds, inits = {"a": x}, [("w", w)]
    for sub in ("g", "a"):
        (tmp_path / sub).mkdir()
    run, grouped = native_run_and_cycles(tmp_path / "g", nodes, feeds, ["y"], mode, inits)
    chip = np.asarray(run.got["y"])
    tpuc = np.asarray(run.expected["y"]).reshape(chip.shape)
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"
    _, alone = native_run_and_cycles(tmp_path / "a", nodes, feeds, ["y"], mode, inits,
                                     all_global=True)  # fmt: skip
    assert grouped < alone
