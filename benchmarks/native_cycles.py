#!/usr/bin/env python3
"""Native bmodel latency: tpuc's against TPU-MLIR 1.30.2's, on the chip's own cycle model.

For each anchor model and mode, both compilers build a bm1684x bmodel with
every op a global layer (`--disable_layer_group` on both sides; tpuc with
`--codegen native`), and the vendor backend library's profile of each
(`TCYC`, 1 cycle = 1 ns) is read: tpuc's from `<prefix>_compiler_profile.txt`,
TPU-MLIR's from the `compiler_profile_0.txt` its model_deploy writes (what
shared/anchors/tpumlir_profile.sh reads, here with --disable_layer_group).
Prints one row per model and mode with the ratio tpuc / TPU-MLIR.

TPU-MLIR runs from its own venv (shared/anchors/setup_tpumlir.sh builds it;
`--tpumlir-venv`), on its own transform and its own calibration (20 samples);
tpuc on its own. Calibration differences move INT8 cycles only where a
threshold changes an op's form, which none of the anchors' do.

    python benchmarks/native_cycles.py --anchors DIR [--models resnet50,ppocr_cls]
        [--modes INT8,F16,BF16] [--work DIR] [--tpumlir-venv ~/.cache/tpumlir-venv]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

MODELS = ("smallcnn", "resblock", "ppocr_cls", "squeezenet", "shufflenet", "inception_v1",
          "ppocr_rec", "ppocr_det", "resnet50", "densenet121")  # fmt: skip
TOTAL = re.compile(r"TCYC\s*:\s*(\d+)")


def run(argv: list[str], cwd: Path, env: dict | None = None, log: str = "log.txt") -> bool:
    with open(cwd / log, "w") as out:
        code = subprocess.call(argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
    return code == 0


def cycles(profile: Path) -> int | None:
    if not profile.exists():
        return None
    found = TOTAL.findall(profile.read_text(errors="replace"))
    return sum(int(x) for x in found) if found else None


def prepare(tool_env: dict | None, prefix: str, model: str, anchors: Path, work: Path) -> bool:
    """model_transform + run_calibration (either compiler's own, by `prefix`)."""
    meta = json.loads((anchors / model / "meta.json").read_text())
    shape = str(meta["input_shape"]).replace(" ", "")
    mlir = work / f"{model}.mlir"
    if not mlir.exists():
        argv = [f"model_transform{prefix}", "--model_name", model, "--model_def",
                str(anchors / model / f"{model}.onnx"), "--input_shapes", f"[{shape}]",
                "--mlir", str(mlir)]  # fmt: skip
        if not run(argv, work, tool_env, "transform.log"):
            return False
    table = work / f"{model}_cali_table"
    if not table.exists():
        argv = [f"run_calibration{prefix}", str(mlir), "--dataset", str(anchors / model / "cali"),
                "--input_num", "20", "-o", str(table)]  # fmt: skip
        return run(argv, work, tool_env, "cali.log")
    return True


def tpuc_cycles(model: str, mode: str, anchors: Path, work: Path) -> int | None:
    work.mkdir(parents=True, exist_ok=True)
    if not prepare(None, ".py", model, anchors, work):
        return None
    argv = ["model_deploy.py", "--mlir", f"{model}.mlir", "--chip", "bm1684x", "--quantize", mode,
            "--calibration_table", f"{model}_cali_table", "--disable_layer_group",
            "--codegen", "native", "--model", f"{model}_{mode}.bmodel"]  # fmt: skip
    if not run(argv, work, None, f"deploy_{mode}.log"):
        return None
    prefix = f"{model}_bm1684x_{mode.lower()}" + ("_sym" if mode == "INT8" else "")
    return cycles(work / f"{prefix}_compiler_profile.txt")


def tpumlir_cycles(model: str, mode: str, anchors: Path, work: Path, venv: Path) -> int | None:
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PATH=f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    if not prepare(env, "", model, anchors, work):
        return None
    for old in work.glob("compiler_profile_*.txt"):
        old.unlink()
    argv = ["model_deploy", "--mlir", f"{model}.mlir", "--quantize", mode, "--chip", "bm1684x",
            "--disable_layer_group", "--model", f"{model}_{mode}.bmodel"]  # fmt: skip
    if mode == "INT8":
        argv += ["--calibration_table", f"{model}_cali_table"]
    if not run(argv, work, env, f"deploy_{mode}.log"):
        return None
    total = [cycles(p) for p in sorted(work.glob("compiler_profile_*.txt"))]
    kept = work / f"profile-{mode}.txt"
    text = "".join(
        p.read_text(errors="replace") for p in sorted(work.glob("compiler_profile_*.txt"))
    )
    kept.write_text(text)
    return sum(c for c in total if c) or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--anchors", required=True, type=Path, help="make_anchor_models.py --out DIR"
    )
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", default="INT8,F16,BF16")
    parser.add_argument("--work", type=Path, default=Path("native_cycles_work"))
    parser.add_argument("--tpumlir-venv", type=Path,
                        default=Path.home() / ".cache" / "tpumlir-venv")  # fmt: skip
    args = parser.parse_args(argv)
    if not (args.tpumlir_venv / "bin" / "model_deploy").exists():
        print(f"no TPU-MLIR venv at {args.tpumlir_venv} (shared/anchors/setup_tpumlir.sh)")
        return 1
    print(f"{'model':14} {'mode':5} {'tpuc cycles':>12} {'TPU-MLIR':>12} {'ratio':>6}")
    ratios = []
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            ours = tpuc_cycles(
                model, mode, args.anchors.resolve(), args.work.resolve() / "tpuc" / model
            )
            where = args.work.resolve() / "tpumlir" / model
            theirs = tpumlir_cycles(model, mode, args.anchors.resolve(), where, args.tpumlir_venv)
            ratio = f"{ours / theirs:6.2f}" if ours and theirs else "     -"
            if ours and theirs:
                ratios.append(ours / theirs)
            print(f"{model:14} {mode:5} {ours or 'failed':>12} {theirs or 'failed':>12} {ratio}",
                  flush=True)  # fmt: skip
    if ratios:
        import math

        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geometric mean ratio over {len(ratios)} model/mode pairs: {geo:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
