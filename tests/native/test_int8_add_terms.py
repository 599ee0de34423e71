"""bm1684x's INT8 Add/Sub contract, one rshift per input: each input's term
round((q·M) >> r) half up on its own, summed (Sub: the rounded subtrahend
negated), fused relu, saturation to the output type. Every pair of stored
int8 values goes through the vendor runtime's one bcbinary call and the TPU
interpreter with multipliers and shifts set by hand (u8 scales up to 255,
shifts from 0 to 9: rounding ties, negative terms, sums past 16 bits,
saturation, relu); both must equal the integer formula computed here."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_vs_interp, node

STEP = 0.05  # the inputs are q·STEP, calibrated to a scale of STEP: q exact
Q = np.arange(-127, 128)
QA, QB = np.meshgrid(Q, Q, indexing="ij")  # every pair of stored values
SHAPE = [1, 255, 15, 17]  # 65,025 pairs, channels past the 64 lanes


def term(q: np.ndarray, m: int, r: int) -> np.ndarray:
    """(q·M + 2^(r−1)) >> r: the chip's half-up rounding of one term."""
    x = q.astype(np.int64) * m
    return (x + (1 << (r - 1))) >> r if r else x


def formula(kind: str, qa, qb, factors, relu: bool, low: int, high: int) -> np.ndarray:
    (ma, ra), (mb, rb) = factors
    total = term(qa, ma, ra) + (term(qb, mb, rb) if kind == "Add" else -term(qb, mb, rb))
    if relu:
        total = np.maximum(total, 0)
    return np.clip(total, low, high)


def with_factors(factors, relu: bool, seen: dict, unsigned: bool = False):
    """A native_vs_interp tweak: the Add/Sub gets these (M, r) per input;
    `seen["scale"]` is its output's scale (i8; `unsigned`: u8 inputs)."""

    def tweak(module) -> None:
        from tpuc.dialects import tpu
        from tpuc.ir.core import element_of, main_function
        from tpuc.ir.qparams import QuantParams

        for op in main_function(module).body.block.ops:
            if isinstance(op, (tpu.AddOp, tpu.SubOp)):
                op.set_value("multiplier", [m for m, _ in factors])
                op.set_value("rshift", [r for _, r in factors])
                op.set_value("round_mode", "HalfUp")
                op.set_value("do_relu", relu)
                out = QuantParams.of(element_of(op.results[0]))
                ins = [QuantParams.of(element_of(v)) for v in op.operands]
                assert all((q.qmin == 0) == unsigned for q in ins)
                assert out.zero_point == 0 and (out.qmin, out.qmax) == (
                    -128 * (not unsigned),
                    127 + 128 * unsigned,
                )
                seen["scale"] = out.scale

    return tweak


CASES = {
    # name: (op, ((M_a, r_a), (M_b, r_b)), relu)
    "resnet50_r15": ("Add", ((197, 7), (206, 7)), False),  # the residual Add of the issue
    "ties": ("Add", ((128, 8), (192, 9)), False),  # q/2 and 3q/8: every half
    "wide_no_shift": ("Add", ((255, 0), (255, 0)), False),  # |Σ| up to 64,770: past 16 bits
    "mixed_shifts": ("Add", ((255, 1), (3, 2)), True),
    "sub_ties": ("Sub", ((160, 6), (200, 9)), False),  # the subtrahend rounds before its sign
    "sub_relu": ("Sub", ((255, 2), (255, 0)), True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_int8_add_sub_terms_bit_exact(tmp_path, name):
    kind, factors, relu = CASES[name]
    a = (QA.reshape(SHAPE) * STEP).astype(np.float32)
    b = (QB.reshape(SHAPE) * STEP).astype(np.float32)
    nodes = [node(kind, ["a", "b"], ["y"])]
    seen: dict = {}
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": a, "b": b}, {"y": SHAPE}, "INT8",
        tweak=with_factors(factors, relu, seen),
    )  # fmt: skip
    assert f"tpu.{kind}" in kinds
    want = formula(kind, QA, QB, factors, relu, -128, 127).reshape(SHAPE)
    chip = np.rint(np.asarray(got["y"], np.float64).reshape(SHAPE) / seen["scale"])
    tpuc = np.rint(np.asarray(expected["y"], np.float64).reshape(SHAPE) / seen["scale"])
    assert np.array_equal(tpuc, want), f"tpuc: {np.count_nonzero(tpuc != want)} differ"
    assert np.array_equal(chip, want), f"chip: {np.count_nonzero(chip != want)} differ"


@pytest.mark.parametrize("factors", [((255, 0), (255, 0)), ((200, 3), (129, 9))],
                         ids=["wide", "shifted"])  # fmt: skip
def test_unsigned_inputs_bit_exact(tmp_path, factors):
    """u8 inputs (ReLU outputs, up to 255) times u8 scales: terms up to
    65,025, past a signed 16-bit intermediate; the vendor runtime equals
    the TPU interpreter (whose integer formula the tests above pin)."""
    a = (QA.reshape(SHAPE) * STEP).astype(np.float32)
    b = (QB.reshape(SHAPE) * STEP).astype(np.float32)
    nodes = [node("Relu", ["a"], ["ra"]), node("Relu", ["b"], ["rb"]),
             node("Add", ["ra", "rb"], ["y"])]  # fmt: skip
    seen: dict = {}
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, {"a": a, "b": b}, {"y": SHAPE}, "INT8",
        tweak=with_factors(factors, False, seen, unsigned=True),
    )  # fmt: skip
    assert "tpu.Add" in kinds
    chip = np.asarray(got["y"], np.float32).reshape(SHAPE)
    tpuc = np.asarray(expected["y"], np.float32).reshape(SHAPE)
    assert np.array_equal(chip, tpuc), f"{np.count_nonzero(chip != tpuc)} differ"
    assert np.count_nonzero(tpuc == tpuc.max()) > 1000  # many sums saturate
