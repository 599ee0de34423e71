"""An INT8 layer read by F16/BF16 layers (auto-mix or a quantize table keeps
them in a half type): the INT8 -> f16/bf16 cast joins a layer group as a
local `backend_api_dequant_float_local` (local/quantize.py), instead of a
global cast that reads the int8 tensor and writes the half one back to
DDR before the group loads it again (ppocr_rec's p2o.Mul.107_f16 and
p2o.Mul.147_f16: 23k vendor cycles each). Bit for bit against tpuc's TPU
interpreter in the vendor runtime."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node


def grouped_casts(module) -> list[str]:
    """(source type, result type) of every tpu.Cast inside a tpu.Group."""
    func = next(iter(module.ops))
    found = []
    for group in func.body.block.ops:
        if group.name != "tpu.Group":
            continue
        for op in group.regions[0].block.ops:
            if op.name == "tpu.Cast":
                src, dst = op.operands[0].type.element_type, op.results[0].type.element_type
                found.append(f"{src} -> {dst}")
    return found


@pytest.mark.parametrize("half", ["F16", "BF16"])
def test_int8_to_half_cast_is_local(tmp_path, half):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 32, 24, 40)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 1, 1)) * 0.2).astype(np.float32)
    dw = (rng.standard_normal((32, 1, 3, 3)) * 0.3).astype(np.float32)
    nodes = [
        node("Conv", ["a", "w"], ["c"], kernel_shape=[1, 1]),
        node("Sigmoid", ["c"], ["s"]),  # an INT8 table: no float epilogue to fold the cast into
        # not elementwise, so it stays INT8 (an elementwise op read only by
        # F16 layers runs in F16 itself: passes/lowering/convert.py)
        node("MaxPool", ["s"], ["r"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        node("Conv", ["r", "dw"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=32),
        node("Relu", ["d"], ["y"]),
    ]
    qtable = tmp_path / "qtable"
    qtable.write_text(f"y {half}\n")  # the depthwise conv and its relu, fused
    feeds, inits = {"a": x}, [("w", w), ("dw", dw)]
    for sub in ("g", "a"):
        (tmp_path / sub).mkdir()
    held = []
    run, grouped = native_run_and_cycles(tmp_path / "g", nodes, feeds, ["y"], "INT8", inits,
                                         qtable=qtable, tweak=held.append)  # fmt: skip
    chip = np.asarray(run.got["y"])
    tpuc = np.asarray(run.expected["y"]).reshape(chip.shape)
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"
    dtype = {"F16": "f16", "BF16": "bf16"}[half]
    assert any(c.endswith(f"-> {dtype}") and c.startswith("!quant") for c in grouped_casts(held[0]))
    _, alone = native_run_and_cycles(tmp_path / "a", nodes, feeds, ["y"], "INT8", inits,
                                     qtable=qtable, all_global=True)  # fmt: skip
    assert grouped < alone
