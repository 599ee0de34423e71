#!/usr/bin/env python3
"""run_calibration.py wall time and peak memory against the sample count.

Transforms resnet50 (the anchor model with seeded weights when the anchors
exist, else the onnx package's architecture with seeded weights), makes N
real-image samples (random crops of skimage/sklearn images, ImageNet
normalisation, one npz each) and runs `run_calibration.py --cali_method kl
--tune_num 5` in a fresh process per sample count, reading the process's
own peak RSS. Time should grow linearly with the samples and memory not at
all: the last lines print both ratios between the largest and the smallest
count.

    python benchmarks/calibration.py [--counts 10,20,40] [--model resnet50] [--anchors DIR]
        [--before]

--before also runs each count with the interpreter's onnxruntime path off
(TPUC_NATIVE=0: every TOP op in numpy, as before issue 20), prints both
times and peaks, and how far the two tables' thresholds are apart.

Reference (../shared/anchors/SUMMARY.md, same machine type): tpu-mlir 1.30.2
took 77 s and 1.9 GB for resnet50 with 20 samples, kl, tune 5.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "regression"))

TPU_MLIR = {"resnet50": (77.0, 1900.0), "ppocr_det": (50.6, 1360.0)}
"""tpu-mlir 1.30.2 on 20 samples, kl, tune 5: seconds, MB (ppocr_det: the
calibration column of SUMMARY.md and the peak RSS of its whole run)."""
MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)


def real_images() -> list[np.ndarray]:
    """RGB uint8 images from scikit-image and scikit-learn."""
    from skimage import data
    from sklearn.datasets import load_sample_images

    names = [
        "astronaut",
        "coffee",
        "chelsea",
        "rocket",
        "hubble_deep_field",
        "immunohistochemistry",
    ]
    images = [getattr(data, n)() for n in names]
    images += list(load_sample_images().images)
    return [img for img in images if img.ndim == 3 and img.shape[2] == 3]


def make_samples(folder: Path, count: int, input_name: str, size: int, seed: int = 0) -> None:
    """`count` npz samples: random crops (25-100 % of the side) resized to size x size."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    images = real_images()
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        img = images[i % len(images)]
        h, w = img.shape[:2]
        side = int(min(h, w) * rng.uniform(0.25, 1.0))
        y, x = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
        crop = Image.fromarray(img[y : y + side, x : x + side]).resize((size, size))
        chw = np.asarray(crop, np.float32).transpose(2, 0, 1) / 255.0
        sample = ((chw - MEAN) / STD)[None].astype(np.float32)
        np.savez(folder / f"sample_{i:03d}.npz", **{input_name: sample})


def model_onnx(name: str, anchors: Path) -> Path:
    from model_zoo import anchor_model, light_model

    if (anchors / name / "meta.json").is_file():
        return anchor_model(name, anchors).onnx_path
    return light_model(name).onnx_path


def transform(onnx_path: Path, workdir: Path, name: str) -> Path:
    mlir = workdir / f"{name}.mlir"
    subprocess.run(
        [sys.executable, "-m", "tpuc.tools.model_transform", "--model_name", name,
         "--model_def", str(onnx_path), "--mlir", str(mlir)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return mlir


CHILD = """
import json, resource, sys, time
from tpuc.tools.run_calibration import run
start = time.perf_counter()
run(sys.argv[1:])
print(json.dumps({"seconds": time.perf_counter() - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def calibrate(
    mlir: Path, dataset: Path, count: int, table: Path, tune: int, native: bool = True
) -> dict:
    """One run_calibration in a fresh process: its wall time and peak RSS."""
    argv = [str(mlir), "--dataset", str(dataset), "--input_num", str(count),
            "--cali_method", "kl", "--tune_num", str(tune), "-o", str(table)]  # fmt: skip
    env = {**os.environ, "TPUC_NATIVE": "1" if native else "0"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *argv], check=True, capture_output=True, text=True, env=env
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def table_distance(a: Path, b: Path) -> str:
    """How far two tables' thresholds are apart (identical bytes, or the
    largest relative difference and how many tensors differ)."""
    if a.read_bytes() == b.read_bytes():
        return "tables byte-identical"
    from tpuc.base.cali_table import read_table

    ta, tb = read_table(a).entries, read_table(b).entries
    rel = [
        abs(ta[n].threshold - tb[n].threshold) / max(abs(ta[n].threshold), 1e-30)
        for n in ta
        if n in tb
    ]
    differ = sum(r > 0 for r in rel)
    return (
        f"thresholds differ on {differ} of {len(rel)} tensors, "
        f"max relative {max(rel, default=0.0):.2e}, median {sorted(rel)[len(rel) // 2]:.1e}"
    )


def before_after(args, mlir: Path, work: Path, count: int) -> None:
    """The same calibration with the numpy path and the native one."""
    runs = {}
    for native in (False, True):
        table = work / f"t{count}_{'native' if native else 'numpy'}"
        start = time.perf_counter()
        result = calibrate(mlir, work / "samples", count, table, args.tune_num, native)
        runs[native] = (time.perf_counter() - start, result["peak_mb"], table)
        label = "onnxruntime path (after) " if native else "numpy path (before)"
        wall, peak, _ = runs[native]
        print(
            f"{args.model}: {count:3d} samples, kl + tune {args.tune_num}, {label}: "
            f"wall {wall:6.1f} s, peak RSS {peak:.0f} MB",
            flush=True,
        )
    (t0, m0, a), (t1, m1, b) = runs[False], runs[True]
    distance = table_distance(a, b)
    print(f"  after/before: time {t1 / t0:.2f}x, peak memory {m1 / m0:.2f}x; {distance}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="10,20,40")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--tune_num", type=int, default=5)
    parser.add_argument("--anchors", type=Path, default=Path("/work/cache/anchors"))
    parser.add_argument(
        "--before", action="store_true", help="also run with TPUC_NATIVE=0 and compare"
    )
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    with tempfile.TemporaryDirectory(prefix="tpuc_cali_bench_") as tmp:
        work = Path(tmp)
        mlir = transform(model_onnx(args.model, args.anchors), work, args.model)
        from tpuc.ir.module_io import load_module
        from tpuc.ir.preprocess import input_specs

        spec = input_specs(load_module(mlir)[0])[0]
        make_samples(work / "samples", max(counts), spec.name, spec.shape[-1])
        if args.before:
            for count in counts:
                before_after(args, mlir, work, count)
            return
        rows = []
        for count in counts:
            start = time.perf_counter()
            result = calibrate(mlir, work / "samples", count, work / f"t{count}", args.tune_num)
            wall = time.perf_counter() - start
            rows.append((count, wall, result["peak_mb"]))
            per = wall / count
            print(
                f"{args.model}: {count:3d} samples, kl + tune {args.tune_num}: wall {wall:6.1f} s "
                f"({per:.2f} s/sample), peak RSS {result['peak_mb']:.0f} MB",
                flush=True,
            )
    (n0, t0, m0), (n1, t1, m1) = rows[0], rows[-1]
    marginal = (t1 - t0) / (n1 - n0)
    print(f"time ratio {n1}/{n0} samples = {t1 / t0:.2f} (linear: at most {n1 / n0:.2f})")
    print(
        f"per extra sample {marginal:.3f} s; fixed part (load, tune, table) "
        f"{t0 - marginal * n0:.1f} s"
    )
    for n, t, _ in rows[1:-1]:  # linearity: middle points against the line through the ends
        print(f"  {n} samples: {t:.1f} s measured, {t0 + marginal * (n - n0):.1f} s on the line")
    print(f"memory ratio {n1}/{n0} samples = {m1 / m0:.2f} (flat: 1.00)")
    if args.model in TPU_MLIR:
        ref_s, ref_mb = TPU_MLIR[args.model]
        mine = next((r for r in rows if r[0] == 20), None)
        if mine:
            print(
                f"vs tpu-mlir 1.30.2 at 20 samples: time {mine[1] / ref_s:.3f}x "
                f"({mine[1]:.1f} s vs {ref_s:.0f} s), memory {mine[2] / ref_mb:.3f}x "
                f"({mine[2]:.0f} MB vs {ref_mb:.0f} MB)"
            )


if __name__ == "__main__":
    main()
