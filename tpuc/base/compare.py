"""Tensor comparison with TPU-MLIR's verdicts and similarity measures.

Every verification step (model_transform against the source framework,
model_deploy against the TOP results, the bmodel against the TPU
interpreter, `npz_tool.py compare`) judges tensors the same way:

- EQUAL: identical values;
- CLOSE: `allclose(target, ref, rtol, atol=1e-8)` for rtol 1e-5, 1e-4 or
  1e-3 (the tightest that holds is reported; TPU-MLIR also tries 1e-2 but
  does not count it as close);
- otherwise SIMILAR when cosine > tol.cosine and euclidean similarity >
  tol.euclid (both strict), else NOT_SIMILAR;
- NOT_MATCH when the element counts differ (a shape difference with equal
  sizes is only a reshape, as TPU-MLIR does).

Measures, computed in float64 on flattened data:
cosine = a·b / (‖a‖‖b‖) (0 when either is all zero);
euclidean similarity = 1 − ‖a−b‖ / ‖(a+b)/2‖;
SQNR = 10·log10(var(ref) / var(ref − target)) dB, the reference being the
second file (infinite when the noise has no variance).
NaN counts as 0 and ±inf as ±10000 in the measures, like TPU-MLIR.

A tensor holding NaN (in either file) is NOT_SIMILAR, whatever the measures
say: a NaN is a failed computation, so two of them agreeing proves nothing.
(TPU-MLIR's npz_tool calls NaN vs NaN CLOSE: its `np.array_equal` rejects
NaN, then `np.allclose(..., equal_nan=True)` accepts it.) The line shows
the NaN counts, and such rows stay out of the summary's minimum similarity.
Only numeric tensors are compared: strings or complex numbers are an error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from tpuc.base.errors import TpucError

CLOSE_ORDERS = (5, 4, 3)
"""allclose is tried at rtol 10^-order for these orders, tightest first."""


class Verdict(StrEnum):
    EQUAL = "EQUAL"
    CLOSE = "CLOSE"
    SIMILAR = "SIMILAR"
    NOT_SIMILAR = "NOT_SIMILAR"
    NOT_MATCH = "NOT_MATCH"

    @property
    def passed(self) -> bool:
        return self in (Verdict.EQUAL, Verdict.CLOSE, Verdict.SIMILAR)


@dataclass(frozen=True)
class Tolerance:
    """Minimum cosine and euclidean similarity a tensor must exceed."""

    cosine: float = 0.99
    euclid: float = 0.99

    @classmethod
    def parse(cls, text: str, flag: str = "--tolerance") -> Tolerance:
        """`"0.99,0.9"` -> Tolerance(0.99, 0.9); anything else is a TpucError,
        and so is a bound no tensor can reach or fall below (a cosine outside
        [-1, 1], a euclidean similarity above 1: it is 1 − a distance ratio).
        Negative bounds stay allowed: `-1,-10` is how a run asks for no check."""
        parts = [p.strip() for p in str(text).split(",")]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if len(values) != 2 or not all(math.isfinite(v) for v in values):
            raise TpucError(
                f"{flag}: expected two numbers 'cos,euclid' (e.g. 0.99,0.99), got '{text}'"
            )
        cosine, euclid = values
        if not -1.0 <= cosine <= 1.0:
            raise TpucError(f"{flag} {text}: a cosine similarity lies in [-1, 1], got {cosine:g}")
        if euclid > 1.0:
            raise TpucError(f"{flag} {text}: a euclidean similarity is at most 1, got {euclid:g}")
        return cls(cosine, euclid)

    def __str__(self) -> str:
        return f"{self.cosine:g},{self.euclid:g}"


@dataclass(frozen=True)
class Similarity:
    cosine: float
    euclid: float
    sqnr: float


@dataclass(frozen=True)
class TensorResult:
    """The verdict on one tensor and the measures behind it."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    verdict: Verdict
    similarity: Similarity
    close_rtol: float | None = None
    ref_shape: tuple[int, ...] | None = None
    nans: tuple[int, int] | None = None
    """NaN counts (target, reference) when either holds NaN."""

    @property
    def passed(self) -> bool:
        return self.verdict.passed

    def line(self, width: int = 32) -> str:
        """One line: name, verdict, PASSED/FAILED and the measures."""
        status = "PASSED" if self.passed else "FAILED"
        head = f"[{self.name:<{width}}] {self.verdict.value:>12} [{status}]"
        if self.verdict is Verdict.CLOSE:
            return f"{head}  rtol {self.close_rtol:.0e}"
        if self.verdict is Verdict.NOT_MATCH:
            return f"{head}  shape {list(self.shape)} vs {list(self.ref_shape or ())}"
        if self.verdict is Verdict.EQUAL:
            return head
        if self.nans is not None:
            return f"{head}  NaN: {self.nans[0]} in target, {self.nans[1]} in reference"
        s = self.similarity
        return f"{head}  cos {s.cosine:.6f}  euclid {s.euclid:.6f}  sqnr {format_db(s.sqnr)}"


def format_db(value: float) -> str:
    return "inf" if value == math.inf else ("-inf" if value == -math.inf else f"{value:.2f} dB")


IDENTICAL = Similarity(1.0, 1.0, math.inf)


def _clean(x: np.ndarray) -> np.ndarray:
    """Flat float64 copy with NaN -> 0 and ±inf -> ±1e4 (TPU-MLIR's rule);
    the NaN/inf pass is skipped when everything is finite (the usual case)."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    if np.isfinite(flat).all():
        return flat
    return np.nan_to_num(flat, nan=0.0, posinf=1e4, neginf=-1e4)


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    return similarity(a, b).cosine


def euclidean_similarity(a: np.ndarray, b: np.ndarray) -> float:
    return similarity(a, b).euclid


def sqnr_db(target: np.ndarray, ref: np.ndarray) -> float:
    """Signal (ref) to noise (ref − target) ratio of the mean-free energies."""
    return similarity(target, ref).sqnr


def similarity(target: np.ndarray, ref: np.ndarray) -> Similarity:
    """All three measures, each array cleaned once."""
    t, r = _clean(target), _clean(ref)
    return _measures(t, r, r - t)


def _measures(t: np.ndarray, r: np.ndarray, noise: np.ndarray) -> Similarity:
    """cosine, euclidean similarity and SQNR of clean flat float64 arrays
    from four dot products and two sums (a few passes over the data, instead
    of one temporary array per formula)."""
    tt, rr, tr = _dot(t, t), _dot(r, r), _dot(t, r)
    nn = _dot(noise, noise)
    n = max(t.size, 1)
    noise_energy = max(nn - float(noise.sum()) ** 2 / n, 0.0)
    signal_energy = max(rr - float(r.sum()) ** 2 / n, 0.0)
    return Similarity(
        _cosine(tt, rr, tr), _euclid(tt, rr, tr, nn), _sqnr(signal_energy, noise_energy)
    )


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """A dot product whose sum order does not depend on the thread count:
    OpenBLAS splits a long ddot across threads, so its last bits (and a
    growth or search decision taken on them) changed with OPENBLAS_NUM_THREADS."""
    return float(np.einsum("i,i->", a, b))


def _cosine(tt: float, rr: float, tr: float) -> float:
    norm = math.sqrt(tt) * math.sqrt(rr)
    if norm == 0.0:
        return 1.0 if tt == 0.0 and rr == 0.0 else 0.0
    return tr / norm


def _euclid(tt: float, rr: float, tr: float, nn: float) -> float:
    """1 − ‖t − r‖ / ‖(t + r)/2‖ from the dot products."""
    middle = math.sqrt(max(tt + 2.0 * tr + rr, 0.0)) / 2.0
    if middle == 0.0:
        return 1.0 if nn == 0.0 else -math.inf
    return 1.0 - math.sqrt(nn) / middle


def _sqnr(signal_energy: float, noise_energy: float) -> float:
    if noise_energy == 0.0:
        return math.inf
    if signal_energy == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal_energy / noise_energy)


def close_rtol(a: np.ndarray, b: np.ndarray) -> float | None:
    """The tightest rtol of CLOSE_ORDERS at which `np.allclose(a, b, rtol,
    atol=1e-8, equal_nan=True)` holds, or None."""
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        for order in CLOSE_ORDERS:
            if np.allclose(a, b, rtol=10.0**-order, atol=1e-8, equal_nan=True):
                return 10.0**-order
        return None
    return _close_rtol_finite(np.asarray(b, np.float64) - a, np.asarray(b, np.float64))


def _close_rtol_finite(noise: np.ndarray, ref: np.ndarray) -> float | None:
    """`close_rtol` for finite data, given ref − target: one pass for the
    difference's magnitude and one for the reference's."""
    diff = np.abs(noise)
    scale = np.abs(ref)
    bound = np.empty_like(scale)
    for order in CLOSE_ORDERS:
        rtol = 10.0**-order
        np.multiply(scale, rtol, out=bound)
        bound += 1e-8  # the same sum, in the same order, as np.isclose
        if np.all(diff <= bound):
            return rtol
    return None


def compare_tensors(
    name: str, target: np.ndarray, ref: np.ndarray, tolerance: Tolerance = Tolerance()
) -> TensorResult:
    """Judge `target` against `ref` (reshaped to ref's shape when sizes agree)."""
    target, ref = np.asarray(target), np.asarray(ref)
    for array in (target, ref):
        if array.dtype.kind not in "biuf":
            raise TpucError(
                f"tensor '{name}' holds {array.dtype} values; only real numbers can be compared"
            )
    info = {"name": name, "shape": tuple(target.shape), "dtype": str(target.dtype)}
    if target.size != ref.size:
        nan = Similarity(math.nan, math.nan, math.nan)
        return TensorResult(**info, verdict=Verdict.NOT_MATCH, similarity=nan, ref_shape=ref.shape)
    a = np.asarray(target, np.float64).ravel()
    b = np.asarray(ref, np.float64).ravel()
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return _judge_nonfinite(info, a, b, tolerance)
    noise = b - a
    if not noise.any():
        return TensorResult(**info, verdict=Verdict.EQUAL, similarity=IDENTICAL)
    measures = _measures(a, b, noise)
    rtol = _close_rtol_finite(noise, b)
    return _verdict(info, measures, rtol, tolerance)


def _judge_nonfinite(info: dict, a: np.ndarray, b: np.ndarray, tol: Tolerance) -> TensorResult:
    """NaN/inf data: any NaN fails; else exact equality and allclose on the
    raw values, the measures on cleaned copies."""
    nans = (int(np.isnan(a).sum()), int(np.isnan(b).sum()))
    if any(nans):
        measures = similarity(a, b)
        return TensorResult(**info, verdict=Verdict.NOT_SIMILAR, similarity=measures, nans=nans)
    if np.array_equal(a, b):
        return TensorResult(**info, verdict=Verdict.EQUAL, similarity=IDENTICAL)
    return _verdict(info, similarity(a, b), close_rtol(a, b), tol)


def _verdict(
    info: dict, measures: Similarity, rtol: float | None, tolerance: Tolerance
) -> TensorResult:
    if rtol is not None:
        return TensorResult(**info, verdict=Verdict.CLOSE, similarity=measures, close_rtol=rtol)
    similar = measures.cosine > tolerance.cosine and measures.euclid > tolerance.euclid
    verdict = Verdict.SIMILAR if similar else Verdict.NOT_SIMILAR
    return TensorResult(**info, verdict=verdict, similarity=measures)


@dataclass
class CompareResult:
    """Per-tensor rows (in comparison order) and the overall outcome."""

    rows: list[TensorResult]
    tolerance: Tolerance
    only_target: list[str] = field(default_factory=list)
    only_ref: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rows)

    @property
    def failures(self) -> list[TensorResult]:
        return [r for r in self.rows if not r.passed]

    def row(self, name: str) -> TensorResult | None:
        return next((r for r in self.rows if r.name == name), None)

    def count(self, verdict: Verdict) -> int:
        return sum(r.verdict is verdict for r in self.rows)

    @property
    def min_similarity(self) -> tuple[float, float, float]:
        """(cos, euclid, sqnr) minima over SIMILAR/NOT_SIMILAR rows, as TPU-MLIR
        reports them; (1.0, 1.0, inf) when no row needed the measures."""
        judged = [r.similarity for r in self.rows if r.verdict in _MEASURED and r.nans is None]
        return (
            min((s.cosine for s in judged), default=1.0),
            min((s.euclid for s in judged), default=1.0),
            min((s.sqnr for s in judged), default=math.inf),
        )

    def summary_lines(self) -> list[str]:
        passed = sum(r.passed for r in self.rows)
        cos, euclid, sqnr = self.min_similarity
        return [
            f"{len(self.rows)} compared",
            f"{passed} passed",
            f"  {self.count(Verdict.EQUAL)} equal, {self.count(Verdict.CLOSE)} close, "
            f"{self.count(Verdict.SIMILAR)} similar",
            f"{len(self.rows) - passed} failed",
            f"  {self.count(Verdict.NOT_SIMILAR)} not similar, "
            f"{self.count(Verdict.NOT_MATCH)} shape mismatch",
            f"min_similiarity = ({_num(cos)}, {_num(euclid)}, {_num(sqnr)})",
        ]

    def table(self, names: Iterable[str] | None = None) -> list[str]:
        """A table of cosine / euclid / SQNR for `names` (default: all rows)."""
        chosen = self.rows if names is None else [r for n in names if (r := self.row(n))]
        width = max([len("tensor")] + [len(r.name) for r in chosen])
        lines = [f"{'tensor':<{width}}  {'cosine':>9}  {'euclid':>9}  {'SQNR dB':>8}  verdict"]
        for r in chosen:
            s = r.similarity
            sqnr = "inf" if s.sqnr == math.inf else f"{s.sqnr:.2f}"
            measures = f"{s.cosine:>9.6f}  {s.euclid:>9.6f}  {sqnr:>8}"
            lines.append(f"{r.name:<{width}}  {measures}  {r.verdict.value}")
        return lines


_MEASURED = (Verdict.SIMILAR, Verdict.NOT_SIMILAR)


def _num(value: float) -> str:
    return repr(float(value))


def compare_arrays(
    target: Mapping[str, np.ndarray],
    ref: Mapping[str, np.ndarray],
    tolerance: Tolerance = Tolerance(),
    excepts: Iterable[str] = (),
    order: Sequence[str] | None = None,
) -> CompareResult:
    """Compare the tensors present in both mappings (minus `excepts`), in
    `order` when given (names not in it follow in target order)."""
    skip = set(excepts)
    names = list(order or [])
    seen = set(names)
    names += [n for n in target if n not in seen]
    common = [n for n in names if n in target and n in ref and n not in skip]
    rows = [compare_tensors(n, target[n], ref[n], tolerance) for n in common]
    return CompareResult(
        rows,
        tolerance,
        only_target=[n for n in target if n not in ref and n not in skip],
        only_ref=[n for n in ref if n not in target and n not in skip],
    )
