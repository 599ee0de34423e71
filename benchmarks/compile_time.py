#!/usr/bin/env python3
"""Compile time: tpuc's native deploy against TPU-MLIR 1.30.2's, paired runs.

Both compilers deploy the same model and mode for bm1684x with layer groups
on and no verification (no --test_input): tpuc with `--codegen native`,
TPU-MLIR with its own model_deploy from its venv. Each side starts from its
own TOP module, weights and calibration table (TPU-MLIR's transform differs
from tpuc's, so each reads what its own model_transform wrote), copied into
a fresh folder per run so that neither finds outputs of an earlier run
(TPU-MLIR keeps a layer-group cache next to its outputs). The two run
alternately, `--runs` times, the first of each pair alternating too, so a
busy machine slows both alike; prints each pair's seconds (wall clock of
the whole model_deploy process), the medians and tpuc / TPU-MLIR.

    python benchmarks/compile_time.py --tpuc DIR --tpumlir DIR [--model resnet50]
        [--mode INT8] [--runs 5] [--work /tmp/compile_time]
        [--tpumlir-venv ~/.cache/tpumlir-venv] [--tpuc-bin DIR]

Each DIR holds <model>.mlir, its weight file and <model>_cali_table (INT8);
`--tpuc-bin` is where tpuc's model_deploy.py is (default: next to this
Python).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def inputs(folder: Path, model: str) -> list[Path]:
    """The TOP module, the weight file it names and the calibration table."""
    mlir = folder / f"{model}.mlir"
    if not mlir.exists():
        raise SystemExit(f"compile_time: no {mlir}")
    text = mlir.read_text(errors="replace")
    key = 'module.weight_file = "'
    start = text.find(key)
    files = [mlir]
    if start >= 0:
        files.append(folder / text[start + len(key) : text.index('"', start + len(key))])
    table = folder / f"{model}_cali_table"
    if table.exists():
        files.append(table)
    for f in files:
        if not f.exists():
            raise SystemExit(f"compile_time: no {f}")
    return files


def command(side: str, model: str, mode: str, args) -> tuple[list[str], dict]:
    """The model_deploy command of `side` and its environment."""
    argv = ["--mlir", f"{model}.mlir", "--chip", "bm1684x", "--quantize", mode]
    if mode == "INT8":
        argv += ["--calibration_table", f"{model}_cali_table"]
    argv += ["--model", f"{model}.bmodel"]
    env = dict(os.environ)
    if side == "tpuc":
        tool = str(Path(args.tpuc_bin) / "model_deploy.py")
        return [tool, *argv, "--codegen", "native"], env
    venv = Path(args.tpumlir_venv).expanduser()
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    env.pop("PYTHONPATH", None)
    return [str(venv / "bin" / "model_deploy"), *argv], env


def once(side: str, files: list[Path], work: Path, model: str, mode: str, args) -> float:
    """Seconds of one deploy in a fresh copy of the inputs."""
    run_dir = work / side
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    for f in files:
        os.symlink(f.resolve(), run_dir / f.name)
    argv, env = command(side, model, mode, args)
    start = time.perf_counter()
    with open(run_dir / "deploy.log", "w") as log:
        code = subprocess.call(argv, cwd=run_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if code != 0 or not (run_dir / f"{model}.bmodel").exists():
        raise SystemExit(f"compile_time: {side} deploy failed, see {run_dir / 'deploy.log'}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tpuc", type=Path, required=True, help="tpuc's inputs folder")
    parser.add_argument("--tpumlir", type=Path, required=True, help="TPU-MLIR's inputs folder")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--mode", default="INT8")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", type=Path, default=Path("/tmp/compile_time"))
    parser.add_argument("--tpumlir-venv", default="~/.cache/tpumlir-venv")
    parser.add_argument("--tpuc-bin", default=str(Path(sys.executable).parent))
    args = parser.parse_args(argv)
    files = {
        "tpuc": inputs(args.tpuc, args.model),
        "tpumlir": inputs(args.tpumlir, args.model),
    }
    times: dict[str, list[float]] = {"tpuc": [], "tpumlir": []}
    print(f"{'run':>3} {'tpuc s':>8} {'TPU-MLIR s':>10} {'ratio':>6}")
    for i in range(args.runs):
        order = ("tpuc", "tpumlir") if i % 2 == 0 else ("tpumlir", "tpuc")
        for side in order:
            times[side].append(once(side, files[side], args.work, args.model, args.mode, args))
        own, peer = times["tpuc"][-1], times["tpumlir"][-1]
        print(f"{i + 1:3} {own:8.1f} {peer:10.1f} {own / peer:6.2f}", flush=True)
    own, peer = statistics.median(times["tpuc"]), statistics.median(times["tpumlir"])
    ratios = [a / b for a, b in zip(times["tpuc"], times["tpumlir"], strict=True)]
    print(f"median {own:.1f} s (tpuc) {peer:.1f} s (TPU-MLIR): ratio {own / peer:.2f}, "
          f"median paired ratio {statistics.median(ratios):.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
