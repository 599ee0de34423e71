#!/usr/bin/env python3
"""Run model_transform.py on the regression models and print a table.

For each model: `model_transform.py --debug` in a fresh directory (so the
onnxruntime tensors are kept), then the cosine of every TOP tensor that
onnxruntime also has, the worst one named. A model passes when every
compared tensor, intermediate ones included, reaches `--min_cos`.

    python regression/run_transform.py [--models a,b] [--anchors DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_zoo import ANCHORS, ZooModel, all_models  # noqa: E402

MIN_COS = 0.99999


@dataclass
class Row:
    model: str
    seconds: float
    compared: int = 0
    min_cos: float = float("nan")
    worst: str = ""
    outputs_cos: float = float("nan")
    error: str = ""

    def passed(self, min_cos: float) -> bool:
        return not self.error and self.compared > 0 and self.min_cos >= min_cos


def transform_argv(model: ZooModel, workdir: Path) -> list[str]:
    argv = [sys.executable, "-m", "tpuc.tools.model_transform", "--model_name", model.name,
            "--model_def", str(model.onnx_path), "--test_input", str(model.test_input),
            "--test_result", str(workdir / f"{model.name}_top_outputs.npz"),
            "--mlir", str(workdir / f"{model.name}.mlir"),
            "--tolerance", "0.99,0.9", "--debug"]  # fmt: skip
    if model.input_shapes:
        argv += ["--input_shapes", str(model.input_shapes).replace(" ", "")]
    return argv


def output_names(mlir: Path) -> list[str]:
    """Tensor names of the module's results, read from its text."""
    from tpuc.ir.module_io import load_module

    module, _ = load_module(mlir)
    from xdsl.dialects.func import ReturnOp

    names = []
    for op in module.walk():
        if isinstance(op, ReturnOp):
            for value in op.arguments:
                owner = value.owner
                index = getattr(value, "index", 0)
                names.append(owner.names[index] if hasattr(owner, "names") else "")
            break
    return names


def measure(model: ZooModel, workdir: Path) -> Row:
    """Transform one model and compare every common tensor by cosine."""
    from tpuc.base.compare import cosine_similarity

    start = time.perf_counter()
    proc = subprocess.run(transform_argv(model, workdir), capture_output=True, text=True)
    row = Row(model.name, time.perf_counter() - start)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        row.error = lines[-1] if lines else f"exit {proc.returncode}"
        return row
    with (
        np.load(workdir / f"{model.name}_top_outputs.npz") as top,
        np.load(workdir / f"{model.name}_ref_outputs.npz") as ref,
    ):
        cosines = {}
        for name in ref.files:
            if name in top.files and top[name].size == ref[name].size:
                cosines[name] = cosine_similarity(top[name], ref[name])
    finals = [n for n in output_names(workdir / f"{model.name}.mlir") if n in cosines]
    row.compared = len(cosines)
    if cosines:
        row.worst = min(cosines, key=cosines.get)
        row.min_cos = cosines[row.worst]
    if finals:
        row.outputs_cos = min(cosines[n] for n in finals)
    return row


def print_table(rows: list[Row], min_cos: float) -> None:
    print(f"\n{'model':<15}{'time s':>8}{'tensors':>9}{'outputs cos':>16}{'min cos':>14}  "
          f"{'worst tensor':<34}result")  # fmt: skip
    for r in rows:
        verdict = "PASS" if r.passed(min_cos) else "FAIL"
        if r.error:
            print(f"{r.model:<15}{r.seconds:>8.1f}  {verdict}: {r.error}")
            continue
        print(f"{r.model:<15}{r.seconds:>8.1f}{r.compared:>9}{r.outputs_cos:>16.9f}"
              f"{r.min_cos:>14.9f}  {r.worst[:33]:<34}{verdict}")  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS of a model_transform run: {peak:.0f} MB; pass = every tensor cos >= {min_cos}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--models", help="comma-separated subset (default: all)")
    parser.add_argument("--anchors", type=Path, default=ANCHORS,
                        help="output folder of shared/anchors/make_anchor_models.py")  # fmt: skip
    parser.add_argument("--keep", type=Path, help="keep each model's files under this folder")
    parser.add_argument("--min_cos", type=float, default=MIN_COS)
    args = parser.parse_args()
    zoo = all_models(args.anchors)
    names = args.models.split(",") if args.models else list(zoo)
    unknown = [n for n in names if n not in zoo]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(zoo)}")
    rows = []
    for name in names:
        try:
            model = zoo[name]()
        except (OSError, subprocess.CalledProcessError, KeyError) as exc:
            rows.append(Row(name, 0.0, error=f"cannot build the model: {exc}"))
            continue
        with tempfile.TemporaryDirectory() as tmp:
            workdir = args.keep / name if args.keep else Path(tmp)
            workdir.mkdir(parents=True, exist_ok=True)
            rows.append(measure(model, workdir))
        print(f"{name}: done in {rows[-1].seconds:.1f} s", flush=True)
    print_table(rows, args.min_cos)
    return 0 if all(r.passed(args.min_cos) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
