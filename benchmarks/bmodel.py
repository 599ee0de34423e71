#!/usr/bin/env python3
"""The bmodel per model and target: size, activation memory, compile time, run time.

For each model and target (default bm1684x INT8 and F16) it compiles the
TOP module with the library (tpuc.workflow.deploy.lower, then tpuc.workflow.pipeline.compile_bmodel:
weight-reorder, subnet-divide, address-assign, codegen; no verification)
and prints:
- the bmodel's size split into coefficients (the coefficient blob),
  commands (the distinct TIU/GDMA streams and CPU-layer parameters in the
  blob; the writer stores identical payloads once) and metadata (the rest:
  64-byte header, flatbuffer, blob alignment padding);
- activation memory: `neuron_size` against the sum of the sizes of every
  activation of the final module (each op result that is not a weight,
  network inputs included; reshape-family results count at their size
  although they share their input's memory) and their ratio (the reuse
  ratio: 1 means no reuse), next to the peak of the bytes live at once
  (the least any allocator could use);
- the compile time (lower + back end), with --cli also the wall time of a
  `model_deploy.py` process without --test_input;
- the device simulator's run time (Program.run) against onnxruntime's
  (session.run) on the same input: medians of --repeat runs each after one
  warm-up, alternating between the two, both with --threads threads.
One table at the end; ratios, no assertions.

The model files come from regression/run_deploy.py's work folder
(`<work>/<model>/<model>.mlir`, `_cali_table`, `_in_f32.npz`) and the ONNX
originals from the anchor set (regression/model_zoo.py).

    python benchmarks/bmodel.py [--models resnet50,ppocr_det,ppocr_rec,ppocr_cls]
        [--targets bm1684x:INT8,bm1684x:F16] [--repeat 3] [--threads 2] [--cli] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "regression"))

MODELS = ("resnet50", "ppocr_det", "ppocr_rec", "ppocr_cls")
TARGETS = ("bm1684x:INT8", "bm1684x:F16")
QUICK_MODEL, QUICK_TARGET = "ppocr_cls", "bm1684x:INT8"
MiB = 1 << 20


# --- what the bmodel is made of ------------------------------------------------------------


@dataclass(frozen=True)
class SizeSplit:
    """A bmodel file's bytes: coeff + commands + metadata == total."""

    total: int
    coeff: int
    commands: int
    header: int
    flatbuffer: int
    padding: int  # alignment gaps between the payloads of the blob

    @property
    def metadata(self) -> int:
        return self.header + self.flatbuffer + self.padding


def command_payloads(model) -> list[bytes]:
    """Every distinct command payload of the bmodel (as the writer stores
    them: the net's cmd_groups repeat its subnets')."""
    seen: dict[bytes, None] = {}
    for net in model.nets:
        for param in net.parameters:
            groups = list(param.cmd_groups) + [g for s in param.subnets for g in s.cmd_groups]
            for group in groups:
                seen.update({group.bdc: None, group.gdma: None})
            for subnet in param.subnets:
                seen.update({p.param: None for p in subnet.cpu_params})
    return [payload for payload in seen if payload]


def size_split(data: bytes, source: str = "bmodel") -> SizeSplit:
    """Split the bytes of a bmodel file (read and checked by tpuc.target.bmodel)."""
    from tpuc.target.bmodel import HEADER_SIZE, read_bmodel

    model = read_bmodel(data, source)
    fb_size, bin_size = struct.unpack_from("<2I", data, 8)  # after magic, header_size
    coeff = sum(len(p.coeff) for net in model.nets for p in net.parameters)
    commands = sum(len(p) for p in command_payloads(model))
    padding = bin_size - coeff - commands
    if padding < 0:
        raise ValueError(
            f"{source}: payloads ({coeff + commands} B) exceed the blob ({bin_size} B)"
        )
    return SizeSplit(len(data), coeff, commands, HEADER_SIZE, fb_size, padding)


def activation_memory(module) -> tuple[int, int]:
    """(neuron_size, sum of every activation's bytes) of a TPU_ADDRESSED
    module (activations in DDR: a layer group's internal tensors have none)."""
    from tpuc.dialects import top
    from tpuc.ir.core import main_function
    from tpuc.ir.module_io import module_attr
    from tpuc.passes.address_assign import address_of, tensor_bytes
    from tpuc.passes.liveness import body_ops

    total = 0
    for op in body_ops(main_function(module).body.block):
        if isinstance(op, top.WeightOp | top.NoneOp):
            continue
        total += sum(tensor_bytes(v) for v in op.results if address_of(v) is not None)
    return int(module_attr(module, "neuron_size", 0)), total


def peak_live(module) -> int:
    """The most activation bytes live at once (each aligned as address-assign
    aligns it; in-place chains once): no allocator can do with less."""
    from tpuc.ir.core import main_function
    from tpuc.ir.module_io import module_attr
    from tpuc.passes.address_assign import address_of, align_up, tensor_bytes
    from tpuc.passes.liveness import buffers
    from tpuc.target.chips import get_chip

    align = get_chip(str(module_attr(module, "chip"))).neuron_align
    change: dict[int, int] = {}
    for buffer in buffers(main_function(module).body.block):
        if buffer.constant or address_of(buffer.root) is None:  # none: in local memory
            continue
        size = align_up(max(max(tensor_bytes(v) for v in buffer.values), 1), align)
        change[buffer.start] = change.get(buffer.start, 0) + size
        change[buffer.end + 1] = change.get(buffer.end + 1, 0) - size
    live = peak = 0
    for index in sorted(change):
        live += change[index]
        peak = max(peak, live)
    return peak


# --- compiling and running -----------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    chip: str
    mode: str  # INT8, F16, BF16, F32
    asymmetric: bool = False

    @classmethod
    def parse(cls, text: str) -> Target:
        chip, _, mode = text.partition(":")
        mode = mode.upper()
        if not chip or not mode:
            raise SystemExit(f"--targets: '{text}' is not chip:MODE (e.g. bm1684x:INT8)")
        if mode == "INT8_ASYM":
            return cls(chip.lower(), "INT8", True)
        return cls(chip.lower(), mode)

    def __str__(self) -> str:
        return f"{self.chip}:{self.mode}{'_ASYM' if self.asymmetric else ''}"


@dataclass(frozen=True)
class ModelFiles:
    name: str
    mlir: Path  # TOP module from model_transform.py (its weight npz next to it)
    cali_table: Path | None
    onnx: Path
    inputs: Path  # npz keyed by input name


def cached_files(name: str, work: Path, anchors: Path) -> ModelFiles:
    """A model's files in run_deploy.py's work folder and the anchor set."""
    from model_zoo import anchor_model

    folder = work / name
    files = ModelFiles(
        name,
        folder / f"{name}.mlir",
        folder / f"{name}_cali_table",
        anchor_model(name, anchors).onnx_path,
        folder / f"{name}_in_f32.npz",
    )
    missing = [str(p) for p in (files.mlir, files.inputs, files.onnx) if not p.is_file()]
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: run regression/run_deploy.py first")
    return files


def compile_target(files: ModelFiles, target: Target, disable_layer_group: bool = False):
    """(Compiled, lower seconds, back-end seconds) from a freshly loaded module."""
    from tpuc.ir.module_io import load_module
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import compile_bmodel

    module, store = load_module(files.mlir)
    table = files.cali_table if target.mode == "INT8" else None
    start = time.perf_counter()
    lower(module, target.chip, target.mode, target.asymmetric, table, source=str(files.mlir))
    lowered = time.perf_counter()
    compiled = compile_bmodel(module, store, target.chip, disable_layer_group=disable_layer_group)
    return compiled, lowered - start, time.perf_counter() - lowered


def time_cli(files: ModelFiles, target: Target) -> float:
    """Wall time of a model_deploy.py process without --test_input."""
    quantize = ["--quantize", target.mode] + (["--asymmetric"] if target.asymmetric else [])
    table = ["--calibration_table", str(files.cali_table)] if target.mode == "INT8" else []
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, "-m", "tpuc.tools.model_deploy", "--mlir", str(files.mlir),
                "--chip", target.chip, *quantize, *table,
                "--model", str(Path(tmp) / f"{files.name}.bmodel")]  # fmt: skip
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - start


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved_medians(
    first: Callable[[], object], second: Callable[[], object], repeat: int, pause: float = 0.2
) -> tuple[float, float]:
    """Median seconds of both after one warm-up each, alternating runs so
    machine noise hits both alike; a short pause lets the other side's
    spinning worker threads go to sleep first."""
    first(), second()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(max(1, repeat)):
        for fn, found in zip((first, second), times, strict=True):
            time.sleep(pause)
            found.append(_timed(fn))
    return statistics.median(times[0]), statistics.median(times[1])


def ort_session(onnx_path: Path, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])


def feed_for(names: list[str], inputs: Mapping[str, np.ndarray], what: str) -> dict:
    missing = [n for n in names if n not in inputs]
    if missing:
        raise SystemExit(f"{what}: the input npz has no {', '.join(missing)}")
    return {n: inputs[n] for n in names}


# --- one row ---------------------------------------------------------------------------------


@dataclass
class Row:
    model: str
    target: str
    size: SizeSplit
    neuron_size: int
    activations: int
    peak: int
    lower_s: float
    backend_s: float
    sim_s: float
    ort_s: float
    cli_s: float | None = None

    @property
    def reuse(self) -> float:
        return self.neuron_size / self.activations if self.activations else 1.0

    @property
    def compile_s(self) -> float:
        return self.lower_s + self.backend_s

    @property
    def sim_ratio(self) -> float:
        return self.sim_s / self.ort_s if self.ort_s else float("inf")


def measure(
    files: ModelFiles, target: Target, repeat: int = 3, threads: int = 2, cli: bool = False
) -> Row:
    """Compile `files` for `target`, then time the bmodel against onnxruntime."""
    from tpuc.target.runtime import load_bmodel

    compiled, lower_s, backend_s = compile_target(files, target)
    neuron_size, activations = activation_memory(compiled.module)
    inputs = dict(np.load(files.inputs))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{files.name}.bmodel"
        path.write_bytes(compiled.bmodel)
        program = load_bmodel(path, threads=threads)
    bmodel_feed = feed_for([d.name for d in program.param.inputs], inputs, "bmodel")
    session = ort_session(files.onnx, threads)
    ort_feed = feed_for([i.name for i in session.get_inputs()], inputs, str(files.onnx))
    sim_s, ort_s = interleaved_medians(
        lambda: program.run(bmodel_feed), lambda: session.run(None, ort_feed), repeat
    )
    return Row(
        files.name,
        str(target),
        size_split(compiled.bmodel, f"{files.name} {target}"),
        neuron_size,
        activations,
        peak_live(compiled.module),
        lower_s,
        backend_s,
        sim_s,
        ort_s,
        time_cli(files, target) if cli else None,
    )


# --- printing --------------------------------------------------------------------------------


def _mib(n: int) -> str:
    return f"{n / MiB:.2f}"


HEADER = (
    f"{'model':10} {'target':14} {'bmodel MiB':>10} {'coeff MiB':>9} {'cmds KiB':>9} "
    f"{'meta KiB':>8} {'neuron MiB':>10} {'peak MiB':>8} {'acts MiB':>8} {'reuse':>6} "
    f"{'compile s':>9} {'sim ms':>9} {'ort ms':>8} {'sim/ort':>8}"
)


def table_line(row: Row) -> str:
    s = row.size
    line = (
        f"{row.model:10} {row.target:14} {_mib(s.total):>10} {_mib(s.coeff):>9} "
        f"{s.commands / 1024:>9.1f} {s.metadata / 1024:>8.1f} {_mib(row.neuron_size):>10} "
        f"{_mib(row.peak):>8} {_mib(row.activations):>8} {row.reuse:>6.3f} {row.compile_s:>9.2f} "
        f"{row.sim_s * 1000:>9.1f} {row.ort_s * 1000:>8.2f} {row.sim_ratio:>8.1f}"
    )
    return line + (f" {row.cli_s:>8.2f}" if row.cli_s is not None else "")


def print_table(rows: list[Row]) -> None:
    cli = any(r.cli_s is not None for r in rows)
    print(HEADER + (f" {'CLI s':>8}" if cli else ""))
    for row in rows:
        print(table_line(row))


def progress_line(row: Row) -> str:
    s = row.size
    return (
        f"{row.model} {row.target}: bmodel {s.total:,} B = coeff {s.coeff:,} + commands "
        f"{s.commands:,} + metadata {s.metadata:,} (header {s.header}, flatbuffer "
        f"{s.flatbuffer:,}, padding {s.padding:,}); neuron {row.neuron_size:,} B (peak live "
        f"{row.peak:,} B) of {row.activations:,} B activations (reuse {row.reuse:.3f}); compile "
        f"{row.compile_s:.2f} s (lower {row.lower_s:.2f} + back end {row.backend_s:.2f})"
        + (f", model_deploy.py {row.cli_s:.2f} s" if row.cli_s is not None else "")
        + f"; run: simulator {row.sim_s * 1000:.1f} ms, onnxruntime {row.ort_s * 1000:.2f} ms "
        f"(x{row.sim_ratio:.1f})"
    )


def main(argv: list[str] | None = None) -> int:
    from model_zoo import ANCHORS, CACHE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--targets", default=",".join(TARGETS), help="chip:MODE,...")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per side (median)")
    parser.add_argument("--threads", type=int, default=2, help="simulator and onnxruntime")
    parser.add_argument("--cli", action="store_true", help="also time model_deploy.py")
    parser.add_argument("--quick", action="store_true", help=f"smoke test: {QUICK_MODEL} INT8")
    parser.add_argument("--work", type=Path, default=CACHE / "deploy")
    parser.add_argument("--anchors", type=Path, default=ANCHORS)
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.targets, args.repeat = QUICK_MODEL, QUICK_TARGET, 1
    targets = [Target.parse(t) for t in args.targets.split(",")]
    rows = []
    for name in args.models.split(","):
        files = cached_files(name, args.work, args.anchors)
        for target in targets:
            rows.append(measure(files, target, args.repeat, args.threads, args.cli))
            print(progress_line(rows[-1]), flush=True)
    print(f"\nrepeat={args.repeat} threads={args.threads}")
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
