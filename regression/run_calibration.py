#!/usr/bin/env python3
"""run_calibration.py on the anchor models with every --cali_method.

For each model: model_transform.py into a fresh folder, then per method two
run_calibration.py runs over the model's 20 real-image samples (the anchors'
cali/ folder). A model passes when every table parses, covers every tensor
of the module, and both runs wrote identical bytes.

    python regression/run_calibration.py [--models resnet50,ppocr_det]
        [--methods kl,max,...] [--tune_num 5] [--anchors DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_zoo import ANCHORS, anchor_model  # noqa: E402

METHODS = ("kl", "max", "percentile9999", "mse", "aciq_gauss", "aciq_laplace")


def transform(model, workdir: Path) -> Path:
    mlir = workdir / f"{model.name}.mlir"
    argv = [sys.executable, "-m", "tpuc.tools.model_transform", "--model_name", model.name,
            "--model_def", str(model.onnx_path), "--mlir", str(mlir)]  # fmt: skip
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return mlir


def module_tensors(mlir: Path) -> list[str]:
    from tpuc.interp.top_interpreter import TopInterpreter
    from tpuc.ir.module_io import load_module
    from tpuc.workflow.calibration.collect import tensor_order

    return tensor_order(TopInterpreter(load_module(mlir)[0]))


def calibrate(mlir: Path, dataset: Path, method: str, tune: int, table: Path) -> float:
    argv = [sys.executable, "-m", "tpuc.tools.run_calibration", str(mlir),
            "--dataset", str(dataset), "--cali_method", method,
            "--tune_num", str(tune), "-o", str(table)]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def check_model(name: str, methods, tune: int, anchors: Path) -> bool:
    from tpuc.base.cali_table import read_table

    model = anchor_model(name, anchors)
    ok = True
    with tempfile.TemporaryDirectory(prefix=f"tpuc_cal_{name}_") as tmp:
        work = Path(tmp)
        mlir = transform(model, work)
        tensors = module_tensors(mlir)
        dataset = anchors / name / "cali"
        for method in methods:
            first, second = work / f"{method}_1", work / f"{method}_2"
            seconds = calibrate(mlir, dataset, method, tune, first)
            calibrate(mlir, dataset, method, tune, second)
            table = read_table(first)
            missing = [t for t in tensors if t not in table]
            same = first.read_bytes() == second.read_bytes()
            passed = not missing and same and len(table) == len(tensors)
            ok &= passed
            thresholds = [e.threshold for e in table.entries.values()]
            below = sum(
                e.threshold < max(abs(e.min), abs(e.max)) * 0.999 for e in table.entries.values()
            )
            print(
                f"{name:10s} {method:15s} {'PASS' if passed else 'FAIL'}  {len(table)}/"
                f"{len(tensors)} tensors, identical reruns: {same}, {seconds:5.1f} s, "
                f"thresholds below abs-max: {below}, median threshold "
                f"{sorted(thresholds)[len(thresholds) // 2]:.4f}"
                + (f", missing {missing[:3]}" if missing else ""),
                flush=True,
            )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet50,ppocr_det")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--tune_num", type=int, default=5)
    parser.add_argument("--anchors", type=Path, default=ANCHORS)
    args = parser.parse_args()
    results = [
        check_model(name, args.methods.split(","), args.tune_num, args.anchors)
        for name in args.models.split(",")
    ]
    print("ALL PASS" if all(results) else "SOME FAILED")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
