"""An INT8 batched matmul with short result rows computed transposed
(passes/native/matmul_swap.py): bit for bit against tpuc's TPU interpreter
in the vendor runtime, and cheaper in vendor cycles than the plain call on
the same net (ppocr_rec's attention-weighted values, [8, 40, 40] x [8, 40,
15])."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node

from tpuc.passes.native.matmul_swap import SHORT_ROW_BYTES


def values_net(tmp_path, left, right, relu: bool, mode: str = "INT8"):
    rng = np.random.default_rng(9)
    feeds = {
        "a": rng.standard_normal(left).astype("f4"),
        "v": rng.standard_normal(right).astype("f4"),
    }
    first = node("Relu", ["a"], ["p"]) if relu else node("Mul", ["a", "k"], ["p"])
    nodes = [first, node("MatMul", ["p", "v"], ["o"]), node("Mul", ["o", "k"], ["y"])]
    inits = [("k", np.array(0.75, np.float32))]
    return native_run_and_cycles(tmp_path, nodes, feeds, ["y"], mode, inits, all_global=True)


def exact(run) -> None:
    chip = np.asarray(run.got["y"])
    tpuc = np.asarray(run.expected["y"]).reshape(chip.shape)
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"


@pytest.mark.parametrize(
    ("left", "right", "relu"),
    [((1, 8, 40, 40), (1, 8, 40, 15), True), ((2, 3, 50, 24), (2, 3, 24, 7), False)],
)
def test_transposed_product_is_exact_and_cheaper(tmp_path, monkeypatch, left, right, relu):
    """A u8 left operand (a ReLU's, as the softmax probabilities) and an i8 one."""
    import tpuc.passes.native.matmul as mm

    (tmp_path / "swap").mkdir()
    run, cycles = values_net(tmp_path / "swap", left, right, relu)
    exact(run)
    monkeypatch.setattr(mm, "swappable", lambda *args: False)  # the plain call
    (tmp_path / "plain").mkdir()
    plain, plain_cycles = values_net(tmp_path / "plain", left, right, relu)
    exact(plain)
    assert cycles < plain_cycles, (cycles, plain_cycles)


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_half_product_is_bit_equal(tmp_path, monkeypatch, mode):
    """Half floats: the same bits as the plain call and as tpuc's interpreter."""
    import tpuc.passes.native.matmul as mm

    shape = ((1, 8, 40, 40), (1, 8, 40, 15), True)
    (tmp_path / "swap").mkdir()
    run, cycles = values_net(tmp_path / "swap", *shape, mode=mode)
    exact(run)
    monkeypatch.setattr(mm, "swappable", lambda *args: False)
    (tmp_path / "plain").mkdir()
    plain, plain_cycles = values_net(tmp_path / "plain", *shape, mode=mode)
    assert np.array_equal(np.asarray(run.got["y"]), np.asarray(plain.got["y"]))
    assert cycles < plain_cycles, (cycles, plain_cycles)


def test_rows_of_an_execution_unit_stay():
    assert 15 < SHORT_ROW_BYTES <= 64
