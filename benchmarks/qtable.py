#!/usr/bin/env python3
"""run_qtable's layer loop: downstream-only re-runs against whole-network re-runs.

Uses the anchor model's deploy work files (regression/run_deploy.py makes
them: `<work>/<model>/<model>.mlir` and its kl calibration table) and the
first --input_num calibration samples. Scores the same candidate layers
(run_qtable's: INT8 layers whose own cosine is below --min_layer_cos; every
--stride-th of them) twice in one process: with the
all-INT8 tensors reused upstream of each change (the tool's way), and with
the whole network re-run per candidate. Prints wall time (and where it
goes), evaluations and ops computed for both, checks that both give
identical losses (bit for bit), and prints the speed-up.

    python benchmarks/qtable.py [--model resnet50] [--input_num 10] [--stride 1]
        [--min_layer_cos 0.99]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "regression"))

from model_zoo import ANCHORS, CACHE  # noqa: E402

STAGES = ("lower", "compare", "run")
"""Where an evaluation's time goes: lowering the candidate and building its
interpreter, matching it op by op with the all-INT8 module, running it."""


def samples(model: str, count: int) -> list[dict[str, np.ndarray]]:
    folder = ANCHORS / model / "cali"
    files = sorted(folder.glob("*.npz"))[:count]
    if not files:
        raise SystemExit(f"no calibration samples in {folder}")
    return [dict(np.load(f)) for f in files]


def main() -> int:
    from tpuc.ir.module_io import load_module
    from tpuc.target.chips import get_chip
    from tpuc.workflow.mixed_precision import MixedPrecisionSearch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--input_num", type=int, default=10)
    parser.add_argument("--stride", type=int, default=1, help="score every N-th candidate")
    parser.add_argument("--chip", default="bm1684x")
    parser.add_argument("--min_layer_cos", type=float, default=0.99)
    parser.add_argument("--work", type=Path, default=CACHE / "deploy")
    args = parser.parse_args()
    work = args.work / args.model
    mlir, table = work / f"{args.model}.mlir", work / f"{args.model}_cali_table"
    if not (mlir.exists() and table.exists()):
        raise SystemExit(f"missing {mlir} or {table}: run regression/run_deploy.py first")
    module, store = load_module(mlir)
    inputs = samples(args.model, args.input_num)
    results = {}
    for downstream in (True, False):
        start = time.perf_counter()
        search = MixedPrecisionSearch(module, store, table, get_chip(args.chip), inputs, downstream)
        setup = time.perf_counter() - start
        layers = search.candidates(args.min_layer_cos)[:: args.stride]
        start = time.perf_counter()
        losses = dict(search.layer_losses(layers, "F32", lambda items, _: items))
        seconds = time.perf_counter() - start
        search.close()
        stats = search.stats
        label = "downstream-only" if downstream else "whole network"
        stages = ", ".join(f"{k} {stats.seconds.get(k, 0.0):.1f} s" for k in STAGES)
        print(f"{label:16} {len(inputs)} samples, {stats.evaluations} evaluations, "
              f"{stats.ops_run} ops run, {stats.ops_reused} reused: layer loop {seconds:.1f} s "
              f"({stages}; + setup {setup:.1f} s)")  # fmt: skip
        results[downstream] = (seconds, losses)
    fast, full = results[True][1], results[False][1]
    worst = max(abs(fast[n] - full[n]) for n in fast)
    same = worst == 0.0  # same lowering, same kernels, same float sums
    print(f"largest loss difference between the two: {worst:.3g} (same: {same})")
    print(f"speed-up of the layer loop: {results[False][0] / results[True][0]:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
