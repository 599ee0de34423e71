#!/usr/bin/env python3
"""TOP interpreter vs onnxruntime on resnet50 (batch 1, 224x224), same process.

Both run warm with 2 threads, prepared once (an ORT session, a
TopInterpreter); runs alternate between the two and each time is the median. The
model is the onnx package's resnet50 architecture with seeded weights (built
on first use into the tpuc cache). Also times a whole `model_transform.py`
run on it, verification included. The last line is
`ratio=<interpreter/onnxruntime>`.

    python benchmarks/interp_vs_ort.py [--runs 7] [--model resnet50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "regression"))


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved_medians(top_fn, ort_fn, runs: int) -> tuple[float, float]:
    """Median times of both sides, alternating runs so machine noise hits
    both alike; short pauses let the other side's idle worker threads (ORT
    and OpenBLAS spin for a while after a call) go to sleep first."""
    top_fn(), ort_fn()  # warm-up: first-touch allocations, thread pools
    top_times, ort_times = [], []
    for _ in range(runs):
        time.sleep(0.2)
        top_times.append(_timed(top_fn))
        time.sleep(0.2)
        ort_times.append(_timed(ort_fn))
    return statistics.median(top_times), statistics.median(ort_times)


def build_top(onnx_path: Path):
    """ONNX -> TOP after shape-infer and canonicalize, as model_transform does."""
    from tpuc.context import make_context
    from tpuc.frontends.onnx import convert_onnx
    from tpuc.passes.registry import get_all_passes
    from tpuc.weights import WeightStore, attach_weights

    module, weights = convert_onnx(str(onnx_path), "bench")
    store = WeightStore(weights)
    attach_weights(module, store)
    passes = get_all_passes()
    ctx = make_context()
    for name in ("shape-infer", "canonicalize"):
        passes[name]()().apply(ctx, module)
    return module, store


def time_model_transform(zoo_model, workdir: Path) -> float:
    cmd = [
        sys.executable,
        "-m",
        "tpuc.tools.model_transform",
        "--model_name",
        "bench",
        "--model_def",
        str(zoo_model.onnx_path),
        "--test_input",
        str(zoo_model.test_input),
        "--test_result",
        "bench_top_outputs.npz",
        "--mlir",
        "bench.mlir",
    ]
    start = time.perf_counter()
    subprocess.run(cmd, cwd=workdir, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))

    import numpy as np
    import onnxruntime as ort
    from model_zoo import light_model

    from tpuc.interp.top_interpreter import TopInterpreter

    zoo = light_model(args.model)
    inputs = dict(np.load(zoo.test_input))
    module, store = build_top(zoo.onnx_path)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(zoo.onnx_path), options, providers=["CPUExecutionProvider"])

    interpreter = TopInterpreter(module)  # prepared once, like an ORT session
    t_top, t_ort = interleaved_medians(
        lambda: interpreter.run(store, inputs), lambda: session.run(None, inputs), args.runs
    )
    print(f"model={args.model} threads={args.threads} runs={args.runs}")
    print(f"onnxruntime      median {t_ort * 1000:8.1f} ms")
    print(f"TOP interpreter  median {t_top * 1000:8.1f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        wall = time_model_transform(zoo, Path(tmp))
    print(f"model_transform.py wall time (with onnxruntime verification): {wall:.2f} s")
    print(f"ratio={t_top / t_ort:.3f}")


if __name__ == "__main__":
    main()
