"""A small INT8 2-D transpose as the identity matmul with R_trans
(passes/native/transpose_mm.py): bit for bit against tpuc's TPU
interpreter in the vendor runtime, and cheaper in vendor cycles than
`backend_api_transpose_global` on the same net (ppocr_rec's
transpose_43/51, [120, 40] -> [40, 120])."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_run_and_cycles, node


def transpose_net(tmp_path, shape, perm, sign: float = 1.0):
    rng = np.random.default_rng(11)
    x = (sign * np.abs(rng.standard_normal(shape))).astype(np.float32)
    if sign == 0:
        x = rng.standard_normal(shape).astype(np.float32)
    nodes = [
        node("Mul", ["a", "k"], ["r"]),
        node("Transpose", ["r"], ["t"], perm=perm),
        node("Mul", ["t", "k"], ["y"]),
    ]
    inits = [("k", np.array(0.75, np.float32))]
    return native_run_and_cycles(tmp_path, nodes, {"a": x}, ["y"], "INT8", inits, all_global=True)


def exact(run) -> None:
    chip = np.asarray(run.got["y"])
    tpuc = np.asarray(run.expected["y"]).reshape(chip.shape)
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} of {chip.size} differ"


@pytest.mark.parametrize("shape", [(1, 120, 40), (1, 40, 120), (2, 1, 33, 70)])
def test_identity_transpose_is_exact_and_cheaper(tmp_path, monkeypatch, shape):
    import tpuc.passes.native.transpose_mm as mm

    perm = list(range(len(shape) - 2)) + [len(shape) - 1, len(shape) - 2]
    if shape[0] == 2:  # two images: not a single matrix, the vendor's transpose
        perm = [1, 0, 3, 2]
    (tmp_path / "mm").mkdir()
    run, cycles = transpose_net(tmp_path / "mm", shape, perm, sign=0)
    exact(run)
    if shape[0] == 2:
        return
    monkeypatch.setattr(mm, "MAX_IDENTITY", 0)  # the vendor's transpose_global
    (tmp_path / "tr").mkdir()
    plain, vendor_cycles = transpose_net(tmp_path / "tr", shape, perm, sign=0)
    exact(plain)
    assert cycles < vendor_cycles / 2, (cycles, vendor_cycles)


def test_unsigned_values_pass_unchanged(tmp_path):
    """A u8 tensor (a ReLU's INT8 result): the identity keeps every value."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 64, 48)).astype(np.float32)
    nodes = [
        node("Relu", ["a"], ["r"]),
        node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
        node("Relu", ["t"], ["y"]),
    ]
    held = []
    run, _ = native_run_and_cycles(tmp_path, nodes, {"a": x}, ["y"], "INT8", all_global=True,
                                   tweak=held.append)  # fmt: skip
    exact(run)
    permutes = [o for o in next(iter(held[0].ops)).body.block.ops if o.name == "tpu.Permute"]
    assert "u8" in str(permutes[0].operands[0].type)


def test_wide_rows_keep_the_vendor_transpose():
    """[64, 1000]: a 1 MB identity costs more than the vendor's transpose
    (48,069 against 35,028 cycles): refused by the size bound."""
    from tpuc.passes.native.transpose_mm import MAX_IDENTITY

    assert 1000 * 1000 > MAX_IDENTITY >= 120 * 120
