#!/usr/bin/env python3
"""The anchor models on the native target: deployed with `--codegen native`
(layer groups planned on the vendor's cycles, as model_deploy does by
default; `--disable_layer_group`: every op a global layer), run in the vendor
runtime on the test input and held to the TPU interpreter by model_deploy
itself (INT8 bit for bit, float cosine >= 0.99999, INT8 networks with float
ops by cosine >= 0.999).

Prints one row per model and mode: the verdict model_deploy printed (or its
error), the vendor library's cycles, TPU-MLIR 1.30.2's cycles for its own
bmodel of the same model and mode and the ratio of the two, the layer groups
(count, and how many groups have each n x h x w slicing), the output cosine
against the TPU interpreter ("bit-equal" when the outputs are the same bits,
as even float rows can be), and the wall time. Float runs on the chip model
are slow (minutes per large model); keep them out of CI.

    python regression/native_anchors.py --anchors DIR [--models resnet50,ppocr_cls]
        [--modes INT8,F16,BF16,F32] [--work native_anchors_work] [--disable_layer_group]
        [--disable_auto_mix]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

MODELS = ("smallcnn", "resblock", "ppocr_cls", "squeezenet", "shufflenet", "inception_v1",
          "ppocr_rec", "ppocr_det", "resnet50", "densenet121")  # fmt: skip
CYCLES = re.compile(r"\(([\d,]+) cycles, the vendor library's estimate\)")
GROUPS = re.compile(r"layer groups: (\d+) \(ops [^;]*; slices n x h x w ([^)]*)\)")
# TPU-MLIR 1.30.2's total vendor cycles for its own bm1684x bmodels
# (shared/reference/sophgo-native-backend.md, from shared/anchors/tpumlir_profile.sh);
# smallcnn's and resblock's: tpumlir_profile.sh run here (layer groups on, as TPU-MLIR
# deploys by default), the sum of TCYC in its compiler profile.
TPUMLIR = {
    "resnet50": (609_213, 1_450_846, 1_476_131),
    "ppocr_det": (607_900, 650_337, 649_149),
    "ppocr_rec": (459_163, 448_568, 448_518),
    "ppocr_cls": (53_360, 101_556, 101_943),
    "squeezenet": (109_079, 196_438, 196_454),
    "inception_v1": (1_090_562, 1_330_115, 1_330_067),
    "shufflenet": (335_833, 769_310, 767_487),
    "densenet121": (384_159, 1_816_275, 1_852_695),
    "smallcnn": (16_298, 17_942, 17_942),
    "resblock": (7_042, 9_575, 9_583),
}


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
    worst, equal = 1.0, True
    for name in got.files:
        a, b = got[name].astype(np.float64).ravel(), want[name].astype(np.float64).ravel()
        norm = np.linalg.norm(a) * np.linalg.norm(b)
        worst = min(worst, float(a @ b / norm) if norm else float(np.array_equal(a, b)))
        equal &= np.array_equal(a, b)
    return "bit-equal" if equal else f"{worst:.7f}"


def groups(text: str) -> str:
    """'12: 9x 1x1x1, 3x 1x4x1' from model_deploy's 'layer groups: ...' line."""
    found = GROUPS.search(text)
    if not found:
        return "none" if "layer groups: none" in text else "-"
    secs = Counter(found.group(2).split(", "))
    return f"{found.group(1)}: " + ", ".join(f"{n}x {sec}" for sec, n in secs.most_common())


def versus(model: str, mode: str, cycles: str) -> tuple[str, str]:
    """TPU-MLIR's cycles for the row and ours over theirs."""
    modes = ("INT8", "F16", "BF16")
    theirs = TPUMLIR.get(model, ())[modes.index(mode)] if mode in modes else None
    if theirs is None:
        return "-", "-"
    ratio = f"{int(cycles.replace(',', '')) / theirs:.2f}" if cycles != "-" else "-"
    return f"{theirs:,}", ratio


def deploy(model: str, mode: str, work: Path, flags: list[str]) -> tuple[str, str, str, str]:
    """(verdict, cycles, groups, cosine) of one native deploy with verification."""
    table = ["--calibration_table", f"{model}_cali_table"] if mode == "INT8" else []
    code, text = tool(["model_deploy.py", "--mlir", f"{model}.mlir", "--chip", "bm1684x",
                       "--quantize", mode, *table, "--test_input", f"{model}_in_f32.npz",
                       "--test_reference", f"{model}_top_outputs.npz", "--tolerance", "0,-10",
                       *flags, "--codegen", "native",
                       "--model", f"{model}_{mode}_native.bmodel"],
                      work, f"deploy_{mode}.log")  # fmt: skip
    lines = text.strip().splitlines() or ["error: model_deploy printed nothing"]
    found = CYCLES.search(text)
    cycles = found.group(1) if found else "-"
    prefix = f"{model}_bm1684x_{mode.lower()}" + ("_sym" if mode == "INT8" else "")
    if code:
        ended = lines[-1] if "error" in lines[-1] else f"exit {code} after: {lines[-1]}"
        return ended[:160], cycles, groups(text), cosine(work, prefix)
    verdict = next((ln for ln in lines if "bmodel matches" in ln), lines[-1])
    verdict = verdict.split("bmodel matches the TPU interpreter ")[-1]
    return verdict, cycles, groups(text), cosine(work, prefix)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", required=True, type=Path)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", default="INT8,F16,BF16,F32")
    parser.add_argument("--work", type=Path, default=Path("native_anchors_work"))
    parser.add_argument(
        "--disable_layer_group", action="store_true", help="every op a global layer"
    )
    parser.add_argument(
        "--disable_auto_mix",
        action="store_true",
        help="INT8 without the layers auto-mix keeps in F16 (then held bit for bit, as TPU-MLIR "
        "quantizes)",
    )
    args = parser.parse_args(argv)
    flags = [
        f"--{name}" for name in ("disable_layer_group", "disable_auto_mix") if vars(args)[name]
    ]
    failures = 0
    print("| model | mode | result | vendor cycles | TPU-MLIR | ratio | groups: slices n x h x w "
          "| cosine vs TPU interpreter | s |")  # fmt: skip
    print("|---|---|---|---:|---:|---:|---|---:|---:|")
    for model in args.models.split(","):
        work = args.work.resolve() / model
        work.mkdir(parents=True, exist_ok=True)
        error = prepare(model, args.anchors.resolve(), work)
        for mode in args.modes.split(","):
            start = time.perf_counter()
            verdict, cycles, grouped, cos = (
                (error, "-", "-", "-") if error else deploy(model, mode, work, flags)
            )
            failures += not verdict.startswith(("(bit for bit", "(cosine"))
            theirs, ratio = versus(model, mode, cycles)
            print(f"| {model} | {mode} | {verdict} | {cycles} | {theirs} | {ratio} | {grouped} "
                  f"| {cos} | {time.perf_counter() - start:.0f} |", flush=True)  # fmt: skip
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
