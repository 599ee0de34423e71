#!/usr/bin/env python3
"""run_calibration wall time and peak RSS: tpuc after, tpuc before, TPU-MLIR 1.30.2.

Paired and interleaved on the same machine in one session (TPU-MLIR, before,
after; then again, `--rounds` times), each run a fresh process timed by
/usr/bin/time, on the same anchor model, the same 20 samples, kl and tune 5.
Prints every run, the medians, the load average, and the ratios the issue
asks for (after / TPU-MLIR: time <= 0.3x, memory <= 0.5x), and whether the
after tables are the same bytes from one round to the next.

    python benchmarks/calibration_vs_tpumlir.py [--models resnet50,ppocr_det]
        [--anchors /tmp/anchors] [--before /work/main] [--rounds 2]
        [--venv ~/.cache/tpumlir-venv] [--work DIR]

"before" is a tpuc checkout (its root goes first on PYTHONPATH), "after" the
one this script is in. Each tool gets a .mlir from its own model_transform
(not timed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ["--input_num", "20", "--tune_num", "5", "--cali_method", "kl"]


def timed(cmd: list[str], env: dict, log: Path, cwd: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one command, by /usr/bin/time."""
    stamp = log.with_suffix(".time")
    with log.open("w") as out:
        subprocess.run(
            ["/usr/bin/time", "-f", "%e %M", "-o", str(stamp), *cmd],
            env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=True,
        )  # fmt: skip
    wall, kb = stamp.read_text().split()[-2:]
    return float(wall), int(kb) / 1024


def tpuc_env(root: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(root)}


def tpumlir_env(venv: Path) -> dict:
    return {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}


def prepare(model: str, anchors: Path, work: Path, venv: Path) -> tuple[Path, Path, Path]:
    """Both tools' TOP .mlir of the anchor model, and its sample folder."""
    folder = anchors / model
    meta = json.loads((folder / "meta.json").read_text())
    onnx = folder / meta["onnx"]
    shape = str(meta["input_shape"]).replace(" ", "")
    ours, theirs = work / model / "tpuc", work / model / "tpumlir"
    ours.mkdir(parents=True), theirs.mkdir(parents=True)
    subprocess.run(
        [sys.executable, "-m", "tpuc.tools.model_transform", "--model_name", model,
         "--model_def", str(onnx), "--mlir", str(ours / f"{model}.mlir")],
        env=tpuc_env(ROOT), check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    subprocess.run(
        ["model_transform", "--model_name", model, "--model_def", str(onnx),
         "--input_shapes", f"[{shape}]", "--mlir", f"{model}.mlir"],
        env=tpumlir_env(venv), cwd=theirs, check=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return ours / f"{model}.mlir", theirs / f"{model}.mlir", folder / "cali"


def one_round(model, mlirs, cali, args, work: Path, r: int) -> dict[str, tuple[float, float]]:
    """TPU-MLIR, tpuc before, tpuc after: one run each."""
    ours, theirs = mlirs
    out = work / model
    runs = {
        "tpu-mlir": (
            ["run_calibration", theirs.name, "--dataset", str(cali), *FLAGS,
             "-o", str(out / f"tpumlir_table_{r}")],
            tpumlir_env(args.venv),
            theirs.parent,  # its .mlir names the weight file relative to the cwd
        ),
        "before": (
            [sys.executable, "-m", "tpuc.tools.run_calibration", str(ours),
             "--dataset", str(cali), *FLAGS, "-o", str(out / f"before_table_{r}")],
            tpuc_env(args.before),
            out,
        ),
        "after": (
            [sys.executable, "-m", "tpuc.tools.run_calibration", str(ours),
             "--dataset", str(cali), *FLAGS, "-o", str(out / f"after_table_{r}")],
            tpuc_env(ROOT),
            out,
        ),
    }  # fmt: skip
    result = {}
    for name, (cmd, env, cwd) in runs.items():
        result[name] = timed(cmd, env, out / f"{name}_{r}.log", cwd)
        wall, peak = result[name]
        load = os.getloadavg()[0]
        print(f"{model} round {r} {name:8s}: {wall:7.1f} s, {peak:6.0f} MB (load {load:.1f})")
    return result


def report(model: str, rounds: list[dict], out: Path) -> None:
    med = {
        name: (
            statistics.median(r[name][0] for r in rounds),
            statistics.median(r[name][1] for r in rounds),
        )
        for name in rounds[0]
    }
    for name, (wall, peak) in med.items():
        print(f"{model} median {name:8s}: {wall:7.1f} s, {peak:6.0f} MB")
    (tt, tm), (bt, bm), (at, am) = med["tpu-mlir"], med["before"], med["after"]
    print(
        f"{model} after/tpu-mlir: time {at / tt:.2f}x (target <= 0.3), memory {am / tm:.2f}x "
        f"(target <= 0.5); before/tpu-mlir: time {bt / tt:.2f}x, memory {bm / tm:.2f}x; "
        f"after/before: time {at / bt:.2f}x, memory {am / bm:.2f}x"
    )
    tables = {(out / f"after_table_{r}").read_bytes() for r in range(len(rounds))}
    print(f"{model} after tables over {len(rounds)} rounds: {len(tables)} distinct")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="resnet50,ppocr_det")
    parser.add_argument("--anchors", type=Path, default=Path("/tmp/anchors"))
    parser.add_argument("--before", type=Path, default=Path("/work/main"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--venv", type=Path, default=Path.home() / ".cache/tpumlir-venv")
    parser.add_argument("--work", type=Path, default=None, help="keep tables and logs here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tpuc_cali_vs_") as tmp:
        work = args.work or Path(tmp)
        print(f"load average at start: {os.getloadavg()}; cpus {os.cpu_count()}")
        for model in args.models.split(","):
            ours, theirs, cali = prepare(model, args.anchors, work, args.venv)
            rounds = [
                one_round(model, (ours, theirs), cali, args, work, r) for r in range(args.rounds)
            ]
            report(model, rounds, work / model)
        print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
