#!/usr/bin/env python3
"""The estimated latency of each anchor model per mode, next to its roofline bound.

For each model and target it compiles the TOP module in-process (as
benchmarks/bmodel.py does: tpuc.workflow.deploy.lower, tpuc.workflow.pipeline.compile_bmodel),
prices the bmodel with the cycle model (tpuc.target.runtime.estimate, docs/cost.md)
and prints one markdown table:
- est µs / cycles: the estimate at the chip's clock;
- bound: the roofline, max(compute, memory) cycles, where compute = total
  MACs (conv and matmul units) ÷ the chip's peak MACs per cycle at the mode's
  element width, and memory = the least DDR traffic any schedule needs
  (weights + inputs at the DDR->LMEM bandwidth, outputs at LMEM->DDR);
  `limit` names the larger; `est/bound` is how far the estimate is above it;
- DDR MiB: the minimal bytes against the bytes the timeline moves;
- TIU / GDMA: each engine's busy share of the estimate;
- sim ms / ort ms: the device simulator's Program.run against onnxruntime on
  the same input (medians of --repeat runs after a warm-up, --threads each;
  `--no_run` skips them);
- layer groups: the same model compiled with `--disable_layer_group` (every
  op global): its estimate (`global µs`), its DDR traffic, and `neuron_size`
  with and without groups (KiB); `groups` is the number of layer groups and
  their largest slice count (n·h·w).

Model files come from regression/run_deploy.py's work folder layout
(`<work>/<model>/<model>.mlir`, `_cali_table`, `_in_f32.npz`); missing ones
are made with run_deploy's `prepare` (model_transform + run_calibration).

    python benchmarks/roofline.py [--anchors DIR] [--models resnet50,ppocr_rec]
        [--targets bm1684x:INT8,cv183x:BF16] [--work DIR] [--repeat 1] [--threads 2]
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "regression"))


def _bmodel_benchmark():
    """benchmarks/bmodel.py (compile, files, timing helpers), loaded under a
    name that does not shadow anything called `bmodel`."""
    name = "bmodel_benchmark"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "bmodel.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[name]


BENCH = _bmodel_benchmark()

MODELS = ("resnet50", "ppocr_det", "ppocr_cls", "ppocr_rec", "smallcnn", "resblock")
TARGETS = ("bm1684x:INT8", "bm1684x:F16", "bm1684x:BF16", "bm1684x:F32", "cv183x:INT8",
           "cv183x:BF16")  # fmt: skip
MODE_BYTES = {"INT8": 1, "F16": 2, "BF16": 2, "F32": 4}
MiB = 1 << 20


@dataclass
class Row:
    model: str
    target: str
    clock_mhz: int
    cycles: int
    compute: int  # roofline cycles of the MACs
    memory: int  # roofline cycles of the minimal DDR bytes
    macs: int
    min_bytes: int
    moved_bytes: int
    tiu: float
    gdma: float
    sim_s: float
    ort_s: float
    global_cycles: int = 0
    global_bytes: int = 0
    neuron: int = 0
    global_neuron: int = 0
    groups: str = "-"

    @property
    def bound(self) -> int:
        return max(self.compute, self.memory, 1)

    @property
    def limit(self) -> str:
        return "compute" if self.compute >= self.memory else "memory"


def roofline(profile, param, mode: str) -> tuple[int, int, int]:
    """(compute cycles, memory cycles, minimal DDR bytes) of a bmodel."""
    from tpuc.target.chips.timing import Direction, Unit

    timing = profile.timing
    peak_macs = timing.rate(Unit.CONV, MODE_BYTES[mode]) / 2  # 2 ops per MAC
    weights = sum(loc.size for loc in param.coeff_locations)  # without alignment gaps
    loads = weights + sum(d.size for d in param.inputs)
    stores = sum(d.size for d in param.outputs)
    memory = loads / timing.dma[Direction.DDR_TO_LMEM] + stores / timing.dma[Direction.LMEM_TO_DDR]
    return math.ceil(profile.macs / peak_macs), math.ceil(memory), loads + stores


def layer_groups(module) -> str:
    """'<groups> (≤<largest n·h·w>)' of a compiled module."""
    from tpuc.passes.codegen.groups import group_plans

    plans = group_plans(module)
    if not plans:
        return "0"
    return f"{len(plans)} (≤{max(p['nsecs'] * p['hsecs'] * p['wsecs'] for p in plans)})"


def measure(files, target, repeat: int, threads: int, run: bool = True) -> Row:
    import tempfile

    from tpuc.target.bmodel import read_bmodel
    from tpuc.target.runtime import estimate, load_bmodel

    compiled, _, _ = BENCH.compile_target(files, target)
    model = read_bmodel(compiled.bmodel, f"{files.name} {target}")
    profile = estimate(model, f"{files.name} {target}")
    param = model.nets[0].parameters[0]
    compute, memory, min_bytes = roofline(profile, param, target.mode)
    whole, _, _ = BENCH.compile_target(files, target, disable_layer_group=True)
    whole_model = read_bmodel(whole.bmodel, f"{files.name} {target} global")
    whole_profile = estimate(whole_model, f"{files.name} {target} global")
    extra = dict(
        global_cycles=whole_profile.cycles,
        global_bytes=whole_profile.dma_bytes,
        neuron=model.neuron_size,
        global_neuron=whole_model.neuron_size,
        groups=layer_groups(compiled.module),
    )
    if not run:
        return Row(files.name, str(target), profile.timing.clock_mhz, profile.cycles, compute,
                   memory, profile.macs, min_bytes, profile.dma_bytes,
                   profile.busy_share("TIU"), profile.busy_share("GDMA"), math.nan, math.nan,
                   **extra)  # fmt: skip
    inputs = dict(np.load(files.inputs))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{files.name}.bmodel"
        path.write_bytes(compiled.bmodel)
        program = load_bmodel(path, threads=threads)
    feed = BENCH.feed_for([d.name for d in param.inputs], inputs, "bmodel")
    session = BENCH.ort_session(files.onnx, threads)
    ort_feed = BENCH.feed_for([i.name for i in session.get_inputs()], inputs, str(files.onnx))
    sim_s, ort_s = BENCH.interleaved_medians(
        lambda: program.run(feed), lambda: session.run(None, ort_feed), repeat
    )
    return Row(files.name, str(target), profile.timing.clock_mhz, profile.cycles, compute,
               memory, profile.macs, min_bytes, profile.dma_bytes,
               profile.busy_share("TIU"), profile.busy_share("GDMA"), sim_s, ort_s,
               **extra)  # fmt: skip


HEADER = (
    "| model | target | est µs | est cycles | bound cycles | limit | est/bound | GMACs "
    "| min DDR MiB | moved DDR MiB | TIU | GDMA | sim ms | ort ms | sim/ort "
    "| groups | global µs | global DDR MiB | neuron KiB | global neuron KiB |\n"
    "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:"
    "|---:|---:|---:|---:|---:|"
)


def table_line(r: Row) -> str:
    return (
        f"| {r.model} | {r.target} | {r.cycles / r.clock_mhz:,.1f} | {r.cycles:,} | "
        f"{r.bound:,} | {r.limit} | {r.cycles / r.bound:.2f} | {r.macs / 1e9:.3f} | "
        f"{r.min_bytes / MiB:.2f} | {r.moved_bytes / MiB:.2f} | {r.tiu:.0%} | {r.gdma:.0%} | "
        f"{r.sim_s * 1000:.1f} | {r.ort_s * 1000:.2f} | {r.sim_s / max(r.ort_s, 1e-9):.1f} | "
        f"{r.groups} | {r.global_cycles / r.clock_mhz:,.1f} | {r.global_bytes / MiB:.2f} | "
        f"{r.neuron / 1024:,.0f} | {r.global_neuron / 1024:,.0f} |"
    )


def model_files(name: str, work: Path, anchors: Path):
    """run_deploy's files for `name`, prepared when missing."""
    from model_zoo import anchor_model
    from run_deploy import prepare

    try:
        return BENCH.cached_files(name, work, anchors)
    except SystemExit:
        folder = work / name
        folder.mkdir(parents=True, exist_ok=True)
        prepare(anchor_model(name, anchors), folder, True, folder / "log.txt")
        return BENCH.cached_files(name, work, anchors)


def main(argv: list[str] | None = None) -> int:
    from model_zoo import ANCHORS, CACHE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--anchors", type=Path, default=ANCHORS, help="anchor models ($TPUC_ANCHORS)"
    )
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--targets", default=",".join(TARGETS), help="chip:MODE,...")
    parser.add_argument("--work", type=Path, default=CACHE / "deploy")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per side (median)")
    parser.add_argument("--threads", type=int, default=2, help="simulator and onnxruntime")
    parser.add_argument(
        "--no_run", action="store_true", help="estimates only: no simulator/onnxruntime timing"
    )
    args = parser.parse_args(argv)
    targets = [BENCH.Target.parse(t) for t in args.targets.split(",")]
    rows = []
    for name in args.models.split(","):
        files = model_files(name, args.work, args.anchors)
        for target in targets:
            rows.append(measure(files, target, args.repeat, args.threads, not args.no_run))
            print(table_line(rows[-1]), file=sys.stderr, flush=True)
    print(HEADER)
    for row in rows:
        print(table_line(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
