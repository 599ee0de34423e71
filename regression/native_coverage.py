#!/usr/bin/env python3
"""The TOP interpreter's onnxruntime path against its numpy path, over every
model codegen_coverage.py uses: ONNX's single-node backend cases, the
whole models the onnx package ships (the nine light networks with seeded
weights) and the demo model.

Each case is converted and transformed as model_transform does, then run
twice with every tensor kept (`dump_all`): natively (runs of ops as
onnxruntime sessions) and with `native=False` (every op in numpy). Every
float tensor must agree: cosine >= --min_cos and, elementwise,
|native - numpy| <= atol + rtol * |numpy| with atol scaled by the
tensor's largest magnitude (NaN where the other side has NaN). Also
fails on a run onnxruntime would not load. Prints how many ops ran
natively, per op, and exits 1 on any mismatch.

    python regression/native_coverage.py [--sample N] [--seed S] [--only SUBSTRING] [-v]
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
from collections import Counter
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codegen_coverage import (  # noqa: E402
    Timeout,
    _alarm,
    demo_case,
    first_line,
    node_cases,
    shipped_cases,
)

RTOL = 1e-4
ATOL = 1e-5  # times the tensor's largest magnitude
MIN_COS = 0.99999


def transformed(case, work: Path):
    """(module, store) of the case as model_transform makes it, or the reason not."""
    from tpuc.frontends.onnx import convert_onnx
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.workflow.pipeline import transform

    path = work / f"{case.name.replace(':', '_')}.onnx"
    path.write_bytes(case.model.SerializeToString())
    shapes = [list(np.shape(v)) for v in case.inputs.values()]
    module, weights = convert_onnx(str(path), case.name, shapes or None)
    store = WeightStore(weights)
    attach_weights(module, store)
    transform(module)
    return module, store


def differences(native: dict, numpy_path: dict, min_cos: float) -> list[str]:
    """The tensors on which the two runs disagree, described."""
    found = []
    for name, want in numpy_path.items():
        got = native.get(name)
        want = np.asarray(want)
        if got is None or np.shape(got) != want.shape:
            found.append(f"{name}: shape {np.shape(got)} vs {want.shape}")
            continue
        a, b = np.asarray(got, np.float64).ravel(), want.astype(np.float64).ravel()
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            found.append(f"{name}: NaN in different places")
            continue
        a = np.nan_to_num(a, posinf=3e38, neginf=-3e38)
        b = np.nan_to_num(b, posinf=3e38, neginf=-3e38)
        scale = float(np.abs(b).max()) if b.size else 0.0
        bad = np.abs(a - b) > ATOL * max(scale, 1.0) + RTOL * np.abs(b)
        with np.errstate(all="ignore"):  # huge values: the elementwise check decides
            norm = float(np.linalg.norm(a) * np.linalg.norm(b))
            cos = float(a @ b / norm) if 0 < norm < np.inf else 1.0
        if bad.any() or cos < min_cos:
            k = int(np.argmax(np.abs(a - b)))
            found.append(
                f"{name}: cos {cos:.7f}, {int(bad.sum())} elements off, e.g. {a[k]} vs {b[k]}"
            )
    return found


def run_case(case, work: Path, min_cos: float, native_ops: Counter, skipped: Counter) -> list[str]:
    from tpuc.interp.top_interpreter import TopInterpreter

    try:
        module, store = transformed(case, work)
        want = TopInterpreter(module, native=False).run(store, case.inputs, dump_all=True)
    except Timeout:
        raise
    except Exception as exc:  # the frontend, transform or a numpy kernel rejects it
        skipped[first_line(exc)] += 1
        return []
    interp = TopInterpreter(module, native=True)
    try:
        got = interp.run(store, case.inputs, dump_all=True)
    except Timeout:
        raise
    except Exception as exc:
        return [f"native run failed: {first_line(exc)}"]
    problems = [f"onnxruntime would not load: {f}" for f in interp._native.failures]
    native_ops.update(interp.steps[i].op.name for i in interp._native.covered)
    return problems + differences(got, want, min_cos)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=0, help="a seeded sample of N cases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="cases whose name contains this")
    parser.add_argument("--min_cos", type=float, default=MIN_COS)
    parser.add_argument("--timeout", type=int, default=120, help="seconds per case")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    cases = node_cases(args.seed) + shipped_cases(args.seed) + [demo_case(args.seed)]
    cases = [c for c in cases if args.only in c.name]
    if args.sample:
        cases = random.Random(args.seed).sample(cases, min(args.sample, len(cases)))
    native_ops: Counter = Counter()
    skipped: Counter = Counter()
    failed: dict[str, list[str]] = {}
    signal.signal(signal.SIGALRM, _alarm)
    with TemporaryDirectory(prefix="tpuc_native_") as tmp:
        for case in cases:
            signal.alarm(args.timeout)
            try:
                problems = run_case(case, Path(tmp), args.min_cos, native_ops, skipped)
            except Timeout:
                problems = [f"timed out after {args.timeout} s"]
            finally:
                signal.alarm(0)
            if problems:
                failed[case.name] = problems
            elif args.verbose:
                print(f"ok   {case.name}")
    for name, problems in sorted(failed.items()):
        print(f"FAIL {name}")
        for problem in problems[:5]:
            print(f"     {problem}")
    ran = len(cases) - sum(skipped.values())
    print(f"{len(cases)} cases: {ran} ran, {sum(skipped.values())} rejected before running")
    print("ops run natively: " + ", ".join(f"{k} {v}" for k, v in native_ops.most_common()))
    print(f"{len(failed)} cases where the onnxruntime path differs or fails")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
