"""tpuc.base.compare against hand-computed similarities and TPU-MLIR's verdict rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tpuc.base.compare import (
    Tolerance,
    Verdict,
    compare_arrays,
    compare_tensors,
    cosine_similarity,
    euclidean_similarity,
    sqnr_db,
)
from tpuc.base.errors import TpucError

TARGET = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
REF = np.array([1.0, 2.0, 3.0, 5.0], dtype=np.float32)


def test_cosine_by_hand():
    # (1 + 4 + 9 + 20) / (sqrt(30) * sqrt(39))
    assert cosine_similarity(TARGET, REF) == pytest.approx(34 / math.sqrt(30 * 39), abs=1e-12)


def test_euclid_by_hand():
    # |a - b| = 1, |(a + b) / 2| = sqrt(1 + 4 + 9 + 4.5^2)
    assert euclidean_similarity(TARGET, REF) == pytest.approx(1 - 1 / math.sqrt(34.25), abs=1e-12)


def test_sqnr_by_hand():
    # ref - mean: [-1.75, -0.75, 0.25, 2.25] -> 8.75; noise [0,0,0,1] - 0.25 -> 0.75
    assert sqnr_db(TARGET, REF) == pytest.approx(10 * math.log10(8.75 / 0.75), abs=1e-9)


def test_sqnr_uses_reference_as_signal():
    assert sqnr_db(REF, TARGET) != pytest.approx(sqnr_db(TARGET, REF))
    assert sqnr_db(REF, REF) == math.inf


def test_zero_vectors():
    zero = np.zeros(3)
    assert cosine_similarity(zero, np.ones(3)) == 0.0
    assert euclidean_similarity(np.array([1.0, -1.0]), np.array([-1.0, 1.0])) == -math.inf


def test_equal():
    result = compare_tensors("t", REF, REF.copy())
    assert result.verdict is Verdict.EQUAL and result.passed


def test_close_reports_tightest_rtol():
    ref = np.linspace(1, 2, 50)
    result = compare_tensors("t", ref * (1 + 5e-5), ref)
    assert result.verdict is Verdict.CLOSE
    assert result.close_rtol == pytest.approx(1e-4)
    assert compare_tensors("t", ref * (1 + 5e-6), ref).close_rtol == pytest.approx(1e-5)


def test_rtol_1e2_is_not_close():
    ref = np.linspace(1, 2, 50)
    result = compare_tensors("t", ref * (1 + 5e-3), ref)  # allclose only at rtol 1e-2
    assert result.verdict is Verdict.SIMILAR  # judged by cos/euclid instead


def test_tolerance_edges_are_strict():
    a, b = np.array([3.0, 4.0]), np.array([4.0, 3.0])
    # cos = 24/25 = 0.96; euclid = 1 - sqrt(2) / (3.5 sqrt(2)) = 1 - 1/3.5
    result = compare_tensors("t", a, b, Tolerance(0.959, 0.5))
    assert result.verdict is Verdict.SIMILAR
    assert result.similarity.cosine == pytest.approx(0.96, abs=1e-15)
    assert result.similarity.euclid == pytest.approx(1 - 1 / 3.5, abs=1e-15)
    assert compare_tensors("t", a, b, Tolerance(0.96, 0.5)).verdict is Verdict.NOT_SIMILAR
    assert compare_tensors("t", a, b, Tolerance(0.959, 0.72)).verdict is Verdict.NOT_SIMILAR


def test_reshape_when_sizes_agree_and_not_match_otherwise():
    flat = np.arange(6, dtype=np.float32)
    assert compare_tensors("t", flat, flat.reshape(2, 3)).verdict is Verdict.EQUAL
    result = compare_tensors("t", flat, np.arange(4.0))
    assert result.verdict is Verdict.NOT_MATCH and not result.passed


def test_dtypes_are_compared_as_float64():
    ints = np.array([1, 2, 3], dtype=np.int8)
    assert compare_tensors("t", ints, ints.astype(np.float32)).verdict is Verdict.EQUAL


def test_compare_arrays_common_names_excepts_and_order():
    target = {"a": TARGET, "b": REF, "c": REF, "only_t": REF}
    ref = {"c": REF, "b": REF, "a": REF, "only_r": REF}
    result = compare_arrays(target, ref, Tolerance(0.999, 0.999), excepts=["c"], order=["b", "a"])
    assert [r.name for r in result.rows] == ["b", "a"]
    assert result.only_target == ["only_t"] and result.only_ref == ["only_r"]
    assert not result.passed
    assert result.failures[0].name == "a"


def test_summary_spelling_and_minimum():
    result = compare_arrays({"a": TARGET}, {"a": REF}, Tolerance(0.5, 0.5))
    last = result.summary_lines()[-1]
    cos = 34 / math.sqrt(30 * 39)
    assert last.startswith("min_similiarity = (")
    assert result.min_similarity[0] == pytest.approx(cos)
    empty = compare_arrays({}, {}, Tolerance())
    assert empty.summary_lines()[-1] == "min_similiarity = (1.0, 1.0, inf)"


def test_table_lists_requested_rows():
    result = compare_arrays({"a": TARGET, "b": REF}, {"a": REF, "b": REF}, Tolerance(0.5, 0.5))
    table = result.table(["b"])
    assert len(table) == 2 and table[1].split()[0] == "b"


@pytest.mark.parametrize("text", ["0.9", "a,b", "0.9,0.9,0.9", "nan,1", "", "0.9,inf"])
def test_bad_tolerance(text):
    with pytest.raises(TpucError, match="--tolerance"):
        Tolerance.parse(text)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("1.5,0.9", "a cosine similarity lies in [-1, 1], got 1.5"),
        ("-1.01,0", "a cosine similarity lies in [-1, 1], got -1.01"),
        ("0.99,1.2", "a euclidean similarity is at most 1, got 1.2"),
    ],
)
def test_impossible_tolerance(text, needle):
    """A bound no similarity can reach would fail every tensor (or, below -1,
    pass every one) without saying why."""
    with pytest.raises(TpucError, match="--tolerance") as info:
        Tolerance.parse(text)
    assert needle in str(info.value)


@pytest.mark.parametrize("text", ["1,1", "-1,-10", "0,0", " 0.99 , 0.9 "])
def test_tolerance_edges_accepted(text):
    """1 (only EQUAL/CLOSE pass) and negative bounds (no check) are meaningful."""
    Tolerance.parse(text)


def test_close_rtol_agrees_with_allclose():
    from tpuc.base.compare import CLOSE_ORDERS, close_rtol

    rng = np.random.default_rng(7)
    for trial in range(300):
        b = rng.standard_normal(50) * 10.0 ** rng.integers(-9, 3)
        a = b * (1 + rng.standard_normal(50) * 10.0 ** -rng.uniform(2, 8))
        if trial % 7 == 0:
            a[3], b[3] = np.nan, np.nan
        expected = next(
            (10.0**-o for o in CLOSE_ORDERS if np.allclose(a, b, 10.0**-o, 1e-8, equal_nan=True)),
            None,
        )
        assert close_rtol(a, b) == expected


@pytest.mark.parametrize(
    "target, ref, nans",
    [
        ([np.nan, 1.0], [np.nan, 1.0], (1, 1)),
        ([np.nan, np.nan], [np.nan, np.nan], (2, 2)),
        ([0.0, 1.0], [np.nan, 1.0], (0, 1)),
    ],
)
def test_nan_is_never_equal(target, ref, nans):
    from tpuc.base.compare import Verdict, compare_tensors

    result = compare_tensors("t", np.array(target), np.array(ref))
    assert (result.verdict, result.nans, result.passed) == (Verdict.NOT_SIMILAR, nans, False)


def test_inf_against_the_same_inf_is_equal():
    from tpuc.base.compare import Verdict, compare_tensors

    a = np.array([np.inf, -np.inf, 1.0])
    assert compare_tensors("t", a, a.copy()).verdict is Verdict.EQUAL


def test_strings_are_not_compared():
    from tpuc.base.compare import compare_tensors

    with pytest.raises(TpucError) as info:
        compare_tensors("t", np.array(["a"]), np.array(["a"]))
    assert str(info.value) == "tensor 't' holds <U1 values; only real numbers can be compared"


def test_similarity_bits_do_not_depend_on_blas_threads():
    """The growth and the searches decide on these numbers: 1, 2 and 4
    BLAS threads must give the same bits (a threaded ddot did not)."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np; from tpuc.base.compare import similarity;"
        "g = np.random.default_rng(0); a = g.standard_normal(3_000_001);"
        "b = a + 0.01 * g.standard_normal(a.size); s = similarity(b, a);"
        "print(repr(s.cosine), repr(s.euclid), repr(s.sqnr))"
    )
    seen = set()
    for threads in ("1", "2", "4"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        seen.add(out.stdout)
    assert len(seen) == 1, seen
