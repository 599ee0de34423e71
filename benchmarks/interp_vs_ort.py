#!/usr/bin/env python3
"""TOP interpreter vs onnxruntime on resnet50 (batch 1, 224x224), same process.

Both run warm with 2 threads, prepared once (an ORT session, a
TopInterpreter); runs alternate between the two and each time is the median. The
model is the onnx package's resnet50 architecture with seeded weights (built
on first use into the tpuc cache). Also times a whole `model_transform.py`
run on it, verification included. The last line is
`ratio=<interpreter/onnxruntime>`.

    python benchmarks/interp_vs_ort.py [--runs 7] [--model resnet50[,ppocr_det,...]]
        [--anchors /tmp/anchors] [--before] [--families] [--no-transform]

With --anchors, `--model` names anchor models (their onnx file and
test_input.npz, e.g. resnet50,ppocr_det,ppocr_rec,densenet121) instead
of the zoo's light architecture. Each model is timed twice: a plain run
(outputs only: the ratio) and a run that keeps every tensor (dump_all,
as verification observes them). --before also times the numpy path
(TPUC_NATIVE=0, every op in numpy); --families prints where the time goes
per op family against onnxruntime's profiler (per node type, mapped to TOP
names): for the onnxruntime path from onnxruntime's profile of tpuc's own
sessions, and with --before for the numpy path (each op timed in a run of
its own). The last lines are `ratio[<model>]=...` and `ratio=<first model's>`.
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
    from tpuc.frontends.onnx import convert_onnx
    from tpuc.ir.context import make_context
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.passes.registry import get_all_passes

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


ORT_FAMILIES = {
    "Conv": "Conv",
    "FusedConv": "Conv",
    "Gemm": "MatMul",
    "FusedGemm": "MatMul",
    "MatMul": "MatMul",
    "FusedMatMul": "MatMul",
    "Sum": "Add",
    "BatchNormalization": "Scale",
    "GlobalAveragePool": "AvgPool",
    "AveragePool": "AvgPool",
    "Relu": "Relu",
    "HardSigmoid": "HardSigmoid",
    "HardSwish": "HardSwish",
    "Sigmoid": "Sigmoid",
    "ConvTranspose": "Deconv",
}
"""onnxruntime node types (after its fusions) -> the TOP op family they
mostly become; the rest keep their ONNX name."""


class StepTimer:
    """Per-op wall times of interpreter runs, as an `observe` callback (the
    time since the previous op's observation is this op's)."""

    def __init__(self):
        from collections import defaultdict

        self.totals: dict[str, float] = defaultdict(float)
        self.last = 0.0

    def start(self) -> None:
        self.last = time.perf_counter()

    def __call__(self, step, args, results) -> None:
        now = time.perf_counter()
        self.totals[step.op.name.removeprefix("top.")] += now - self.last
        self.last = now


def top_families(interpreter, store, inputs, runs: int) -> dict[str, float]:
    """Median-free per-family ms: the best run's split, over `runs` runs."""
    best: dict[str, float] | None = None
    for _ in range(runs):
        timer = StepTimer()
        timer.start()
        interpreter.run(store, inputs, observe=timer)
        if best is None or sum(timer.totals.values()) < sum(best.values()):
            best = dict(timer.totals)
    return {k: v * 1000 for k, v in (best or {}).items()}


def ort_families(onnx_path: Path, inputs, threads: int, runs: int) -> dict[str, float]:
    """Per-family ms of onnxruntime's own node profile (mean over `runs`)."""
    from collections import defaultdict

    with tempfile.TemporaryDirectory() as tmp:
        session = ort_session(onnx_path, threads, profile=str(Path(tmp) / "ort"))
        session.run(None, inputs)
        for _ in range(runs):
            session.run(None, inputs)
        kernel_events = node_events([session.end_profiling()])
    totals: dict[str, float] = defaultdict(float)
    for event in kernel_events[-runs * (len(kernel_events) // (runs + 1)) :]:
        family = event["args"].get("op_name", "?")
        totals[ORT_FAMILIES.get(family, family)] += event["dur"] / 1000 / runs
    return totals


def node_events(profiles: list[str]) -> list[dict]:
    """The per-node kernel events of onnxruntime profile files, in order."""
    import json

    events = [e for path in profiles for e in json.loads(Path(path).read_text())]
    return [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]


def native_families(module, store, inputs, runs: int) -> dict[str, float]:
    """Per TOP op family ms of the onnxruntime path: onnxruntime's profile of its
    sessions, node '<TOP tensor>#k' counted for that tensor's op (nodes
    onnxruntime adds, e.g. NCHWc reorders, under their own type); the mean
    over `runs` plain runs after one warm-up."""
    from collections import defaultdict

    from tpuc.interp.top_interpreter import TopInterpreter

    interp = TopInterpreter(module, native=True)
    interp.run(store, inputs)  # partitions into runs
    native = interp._native
    with tempfile.TemporaryDirectory() as tmp:
        native.profile = str(Path(tmp) / "native")
        for run in native.starts.values():
            run.sessions.clear()  # made again, profiling
        for _ in range(runs + 1):
            interp.run(store, inputs)
        kernel = node_events(native.end_profiling())
    family = {s.names[0]: s.op.name.removeprefix("top.") for s in interp.steps if not s.leaf}
    per_node = defaultdict(list)
    for event in kernel:
        per_node[event["name"]].append(event)
    totals: dict[str, float] = defaultdict(float)
    for name, events in per_node.items():
        label = name.removesuffix("_kernel_time").split("#")[0]
        kind = family.get(label) or events[0]["args"].get("op_name", "?")
        totals[kind] += sum(e["dur"] for e in events[1:]) / 1000 / max(1, runs)
    return totals


def print_families(top: dict[str, float], ref: dict[str, float]) -> None:
    print(f"{'family':16s} {'onnxruntime':>12s} {'TOP':>9s} {'ratio':>6s}")
    for family in sorted(set(top) | set(ref), key=lambda f: -top.get(f, 0.0)):
        t, o = top.get(family, 0.0), ref.get(family, 0.0)
        ratio = f"{t / o:6.2f}" if o > 0.01 else "     -"
        print(f"{family:16s} {o:9.2f} ms {t:6.2f} ms {ratio}")


def load_model(args, name: str):
    """(onnx path, inputs): an anchor model's, or the zoo's light one."""
    import numpy as np

    if args.anchors:
        folder = Path(args.anchors) / name
        return folder / f"{name}.onnx", dict(np.load(folder / "test_input.npz")), None
    from model_zoo import light_model

    zoo = light_model(name)
    return zoo.onnx_path, dict(np.load(zoo.test_input)), zoo


def ort_session(onnx_path: Path, threads: int, profile: str | None = None):
    """onnxruntime on the model with `threads` (profiling to `profile`*)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if profile:
        options.enable_profiling = True
        options.profile_file_prefix = profile
    return ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])


def bench_model(args, name: str) -> float:
    """Times one model's interpreter runs against onnxruntime; returns the
    ratio of a plain run (outputs only)."""
    from tpuc.interp.top_interpreter import TopInterpreter

    onnx_path, inputs, zoo = load_model(args, name)
    module, store = build_top(onnx_path)
    session = ort_session(onnx_path, args.threads)
    ort_run = lambda: session.run(None, inputs)  # noqa: E731
    native = TopInterpreter(module, native=True)  # prepared once, like an ORT session
    modes = [
        ("outputs only", native, {}),
        ("every tensor (dump_all)", native, {"dump_all": True}),
    ]
    if args.before:
        modes.append(("numpy path (before)", TopInterpreter(module, native=False), {}))
    print(f"model={name} threads={args.threads} runs={args.runs}")
    ratios = {}
    for label, interp, kwargs in modes:
        t_top, t_ort = interleaved_medians(
            lambda i=interp, k=kwargs: i.run(store, inputs, **k), ort_run, args.runs
        )
        ratios[label] = t_top / t_ort
        print(
            f"  TOP interpreter, {label:24s} median {t_top * 1000:7.1f} ms   "
            f"onnxruntime {t_ort * 1000:6.1f} ms   ratio {t_top / t_ort:5.2f}"
        )
    if args.families:
        reference = ort_families(onnx_path, inputs, args.threads, args.runs)
        print("  per op family, onnxruntime path (onnxruntime's profile of tpuc's sessions):")
        print_families(native_families(module, store, inputs, args.runs), reference)
        if args.before:
            print("  per op family, numpy path (each op timed in a run of its own):")
            numpy_path = TopInterpreter(module, native=False)
            print_families(top_families(numpy_path, store, inputs, args.runs), reference)
    if zoo is not None and not args.no_transform:
        with tempfile.TemporaryDirectory() as tmp:
            wall = time_model_transform(zoo, Path(tmp))
        print(f"model_transform.py wall time (with onnxruntime verification): {wall:.2f} s")
    return ratios["outputs only"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--model", default="resnet50", help="one model or a comma list")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--anchors", help="folder of anchor models (e.g. /tmp/anchors)")
    parser.add_argument("--families", action="store_true", help="also time per op family")
    parser.add_argument("--before", action="store_true", help="also time the numpy path")
    parser.add_argument("--no-transform", action="store_true", help="skip model_transform.py")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    names = [n for n in args.model.split(",") if n]
    ratios = {name: bench_model(args, name) for name in names}
    for name, ratio in ratios.items():
        print(f"ratio[{name}]={ratio:.3f}")
    print(f"ratio={ratios[names[0]]:.3f}")


if __name__ == "__main__":
    main()
