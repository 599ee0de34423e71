#!/usr/bin/env python3
"""FP32 vs INT8 output cosine of anchor models with and without each
run_calibration.py technique (--we, --bc, --adaround, --sq, --search
search_threshold), on held-out samples.

Per model: model_transform.py into a fresh folder; the first --cal_num of
the anchor's real-image samples calibrate, the next --test_num (never seen
by calibration) and the anchor's test input measure. Each variant runs
run_calibration.py as a user would and measures what it wrote (the table,
and the changed module when a technique changed the weights): lowered to
INT8 for --chip by model_deploy.py's passes, run by the TPU interpreter,
compared with the float outputs of the original module. The table prints
the mean and the smallest output cosine per variant.

    python regression/calibration_techniques.py [--models smallcnn,resblock]
        [--variants plain,we,bc,...] [--cal_num 10] [--test_num 6]
        [--anchors DIR] [--chip bm1684x]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_zoo import ANCHORS, anchor_model  # noqa: E402

MODELS = ("smallcnn", "resblock", "ppocr_cls", "squeezenet")
VARIANTS = {
    "plain": [],
    "we": ["--we"],
    "bc": ["--bc"],
    "adaround": ["--adaround"],
    "sq": ["--sq"],
    "we+bc": ["--we", "--bc"],
    "bc+adaround": ["--bc", "--adaround"],
    "search_threshold": ["--search", "search_threshold"],
    "bc+search_threshold": ["--bc", "--search", "search_threshold"],
}


def transform(model, work: Path) -> Path:
    from tpuc.tools import model_transform

    mlir = work / f"{model.name}.mlir"
    argv = ["--model_name", model.name, "--model_def", str(model.onnx_path),
            "--mlir", str(mlir)]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        assert model_transform.run(argv) == 0
    return mlir


def calibrate(mlir: Path, samples: Path, flags: list[str], work: Path, tag: str) -> Path:
    """run_calibration.py with `flags`; the module to deploy (the changed one
    when a technique wrote it) and its table."""
    from tpuc.tools import run_calibration

    table = work / f"{tag}_cali_table"
    out_mlir = work / f"{tag}.mlir"
    argv = [str(mlir), "--data_list", str(samples), "-o", str(table), *flags]
    if any(f in flags for f in ("--we", "--bc", "--adaround", "--sq")):
        argv += ["--output_mlir", str(out_mlir)]
    log = io.StringIO()
    with contextlib.redirect_stdout(log):
        assert run_calibration.run(argv) == 0
    (work / f"{tag}.log").write_text(log.getvalue())
    return (out_mlir if out_mlir.exists() else mlir), table


def held_out_cosines(original: Path, deployed: Path, table: Path, inputs, chip: str) -> list[float]:
    """Output cosine per held-out input: INT8 `deployed` vs FP32 `original`."""
    from tpuc.base.cali_table import read_table
    from tpuc.interp.top_interpreter import TopInterpreter
    from tpuc.ir.module_io import load_module
    from tpuc.workflow.calibration.similarity import Similarity

    module, store = load_module(original)
    meter = Similarity.of_float(module, TopInterpreter(module, native=False), store, inputs, chip)
    try:
        module, store = load_module(deployed)
        return meter.cosines(module, store, read_table(table).entries)
    finally:
        meter.close()


def model_rows(name: str, variants, args) -> list[tuple[str, str, float, float, float]]:
    model = anchor_model(name, args.anchors)
    files = sorted((args.anchors / name / "cali").glob("*.npz"))
    cal, test = files[: args.cal_num], files[args.cal_num : args.cal_num + args.test_num]
    rows = []
    with tempfile.TemporaryDirectory(prefix=f"tpuc_tech_{name}_") as tmp:
        work = Path(tmp)
        mlir = transform(model, work)
        listing = work / "cal.txt"
        listing.write_text("".join(f"{p}\n" for p in cal))
        inputs = [dict(np.load(p)) for p in [*test, model.test_input]]
        for variant in variants:
            start = time.perf_counter()
            deployed, table = calibrate(mlir, listing, VARIANTS[variant], work, variant)
            seconds = time.perf_counter() - start
            cos = held_out_cosines(mlir, deployed, table, inputs, args.chip)
            rows.append((name, variant, float(np.mean(cos)), float(np.min(cos)), seconds))
            print(f"{name:12s} {variant:20s} mean {rows[-1][2]:.6f}  min {rows[-1][3]:.6f}  "
                  f"({seconds:.1f} s)", flush=True)  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--cal_num", type=int, default=10)
    parser.add_argument("--test_num", type=int, default=6)
    parser.add_argument("--anchors", type=Path, default=ANCHORS)
    parser.add_argument("--chip", default="bm1684x")
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    rows = []
    for name in args.models.split(","):
        rows += model_rows(name, variants, args)
    print(f"\nFP32 vs INT8 output cosine, {args.chip}, TPU interpreter; calibrated on "
          f"{args.cal_num} samples, measured on {args.test_num} held-out + the test "
          "input")  # fmt: skip
    print(f"{'model':12s} {'variant':20s} {'mean cos':>10s} {'min cos':>10s} "
          f"{'vs plain':>10s} {'seconds':>8s}")  # fmt: skip
    plain = {r[0]: r[2] for r in rows if r[1] == "plain"}
    for name, variant, mean, low, seconds in rows:
        delta = f"{mean - plain[name]:+.6f}" if name in plain else ""
        print(f"{name:12s} {variant:20s} {mean:10.6f} {low:10.6f} {delta:>10s} {seconds:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
