#!/usr/bin/env python3
"""The anchor models on the native target: deployed with `--codegen native`
(every op a global layer), run in the vendor runtime on the test input and
held to the TPU interpreter by model_deploy itself (INT8 bit for bit, float
cosine >= 0.99999, INT8 networks with float ops by cosine >= 0.999).

Prints one row per model and mode: the verdict model_deploy printed (or its
error), the vendor library's cycles, the output cosine against the TPU
interpreter, and the wall time. Float runs on the chip model are slow
(minutes per large model); keep them out of CI.

    python regression/native_anchors.py --anchors DIR [--models resnet50,ppocr_cls]
        [--modes INT8,F16,BF16,F32] [--work native_anchors_work]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

MODELS = ("smallcnn", "resblock", "ppocr_cls", "squeezenet", "shufflenet", "inception_v1",
          "ppocr_rec", "ppocr_det", "resnet50", "densenet121")  # fmt: skip
CYCLES = re.compile(r"\(([\d,]+) cycles, the vendor library's estimate\)")


def tool(argv: list[str], cwd: Path, log: str) -> tuple[int, str]:
    with open(cwd / log, "w") as out:
        code = subprocess.call(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    return code, (cwd / log).read_text(errors="replace")


def prepare(model: str, anchors: Path, work: Path) -> str | None:
    """model_transform (with the test input) and run_calibration; an error or None."""
    meta = json.loads((anchors / model / "meta.json").read_text())
    shape = str(meta["input_shape"]).replace(" ", "")
    if not (work / f"{model}.mlir").exists():
        code, text = tool(["model_transform.py", "--model_name", model, "--model_def",
                           str(anchors / model / f"{model}.onnx"), "--input_shapes", f"[{shape}]",
                           "--test_input", str(anchors / model / "test_input.npz"),
                           "--test_result", f"{model}_top_outputs.npz", "--mlir", f"{model}.mlir"],
                          work, "transform.log")  # fmt: skip
        if code:
            return "transform: " + text.strip().splitlines()[-1]
    if not (work / f"{model}_cali_table").exists():
        code, text = tool(["run_calibration.py", f"{model}.mlir", "--dataset",
                           str(anchors / model / "cali"), "--input_num", "20",
                           "-o", f"{model}_cali_table"], work, "cali.log")  # fmt: skip
        if code:
            return "calibration: " + text.strip().splitlines()[-1]
    return None


def cosine(work: Path, prefix: str) -> str:
    try:
        got, want = (
            np.load(work / f"{prefix}_model_outputs.npz"),
            np.load(work / f"{prefix}_tpu_outputs.npz"),
        )
    except OSError:
        return "-"
    worst = 1.0
    for name in got.files:
        a, b = got[name].astype(np.float64).ravel(), want[name].astype(np.float64).ravel()
        norm = np.linalg.norm(a) * np.linalg.norm(b)
        worst = min(worst, float(a @ b / norm) if norm else float(np.array_equal(a, b)))
    return f"{worst:.7f}"


def deploy(model: str, mode: str, work: Path) -> tuple[str, str, str]:
    """(verdict, cycles, cosine) of one native deploy with verification."""
    code, text = tool(["model_deploy.py", "--mlir", f"{model}.mlir", "--chip", "bm1684x",
                       "--quantize", mode, "--calibration_table", f"{model}_cali_table",
                       "--test_input", f"{model}_in_f32.npz",
                       "--test_reference", f"{model}_top_outputs.npz", "--tolerance", "0,-10",
                       "--disable_layer_group", "--codegen", "native",
                       "--model", f"{model}_{mode}_native.bmodel"],
                      work, f"deploy_{mode}.log")  # fmt: skip
    lines = text.strip().splitlines()
    found = CYCLES.search(text)
    cycles = found.group(1) if found else "-"
    prefix = f"{model}_bm1684x_{mode.lower()}" + ("_sym" if mode == "INT8" else "")
    if code:
        return lines[-1][:160], cycles, cosine(work, prefix)
    verdict = next((ln for ln in lines if "bmodel matches" in ln), lines[-1])
    return verdict.split("bmodel matches the TPU interpreter ")[-1], cycles, cosine(work, prefix)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", required=True, type=Path)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", default="INT8,F16,BF16,F32")
    parser.add_argument("--work", type=Path, default=Path("native_anchors_work"))
    args = parser.parse_args(argv)
    failures = 0
    print("| model | mode | result | vendor cycles | cosine vs TPU interpreter | s |")
    print("|---|---|---|---:|---:|---:|")
    for model in args.models.split(","):
        work = args.work.resolve() / model
        work.mkdir(parents=True, exist_ok=True)
        error = prepare(model, args.anchors.resolve(), work)
        for mode in args.modes.split(","):
            start = time.perf_counter()
            verdict, cycles, cos = (error, "-", "-") if error else deploy(model, mode, work)
            failures += verdict.startswith(("error", "transform", "calibration"))
            print(f"| {model} | {mode} | {verdict} | {cycles} | {cos} | "
                  f"{time.perf_counter() - start:.0f} |", flush=True)  # fmt: skip
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
