"""One calibration run: samples → statistics → thresholds → tune → rules.

The library side of run_calibration.py (also used by tests and benchmarks):
`Calibration.open(mlir)` loads and checks the TOP module once; `run` returns
the table entries in network order; `write_table` writes them atomically.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from tpuc.base.cali_table import CaliEntry, CaliTable, format_table
from tpuc.base.errors import TpucError
from tpuc.workflow.calibration.collect import Warn, collect
from tpuc.workflow.calibration.dataset import Sample, group_batches, list_samples, load_sample
from tpuc.workflow.calibration.int8_error import lossy_tensors
from tpuc.workflow.calibration.rules import apply_rules
from tpuc.workflow.calibration.stats import TensorStats
from tpuc.workflow.calibration.thresholds import METHODS, ZERO_TENSOR_THRESHOLD, threshold
from tpuc.workflow.calibration.tune import tune

Progress = Callable[[Iterable, str], Iterable]


def _no_progress(items: Iterable, what: str) -> Iterable:
    return items


class Calibration:
    """A TOP_F32 module ready to be run over calibration samples."""

    def __init__(self, module, weights, source: str, warn: Warn):
        from tpuc.ir.preprocess import input_specs

        self.module = module
        self.weights = weights
        self.source = source
        self.warn = warn
        self.specs = input_specs(module)
        self.interp = interpreter(module)
        self.timings: dict[str, float] = {}  # seconds per stage of the last run
        self.lossy: dict[str, float] = {}  # tensors INT8 cannot hold (SQNR, dB), last run

    @classmethod
    def open(cls, mlir: str | Path, warn: Warn) -> Calibration:
        from tpuc.base.module_state import ModuleState, state_of
        from tpuc.ir.module_io import load_module

        module, store = load_module(mlir)
        state = state_of(module)
        if state not in (None, ModuleState.TOP_F32):
            raise TpucError(
                f"{mlir}: module is in state {state}; calibration needs the TOP_F32 module "
                "written by model_transform.py"
            )
        return cls(module, store, str(mlir), warn)

    def input_files(self, *sample_lists: Sequence[Sample]) -> list[Path]:
        """Every file this run reads (the module, its weights, the samples):
        none of them may be overwritten by the table."""
        from tpuc.ir.module_io import module_attr

        mlir = Path(self.source)
        files = [mlir]
        weight_file = module_attr(self.module, "weight_file")
        if weight_file:
            files.append(mlir.parent / weight_file)
        files += [Path(p) for samples in sample_lists for s in samples for p in s.all_paths]
        return files

    def samples(self, dataset: str | None, data_list: str | None, input_num: int) -> list[Sample]:
        """The samples to run, batch-1 ones stacked for a batch-N module
        (`--input_num` counts the listed samples, before stacking)."""
        listed = list_samples(
            self.specs, dataset=dataset, data_list=data_list, input_num=input_num, warn=self.warn
        )
        return group_batches(listed, self.specs, self.warn)

    def tune_samples(
        self, samples: Sequence[Sample], tune_num: int, tune_list: str | None
    ) -> list[Sample]:
        """The auto-tune samples: `--tune_list`, else the first `tune_num`."""
        if tune_num == 0:
            return []
        if tune_list is not None:
            listed = list_samples(
                self.specs,
                dataset=None,
                data_list=tune_list,
                input_num=0,
                warn=self.warn,
                flag="--tune_list",
            )
            return group_batches(listed, self.specs, self.warn)[:tune_num]
        return list(samples[:tune_num])

    def run(
        self,
        samples: Sequence[Sample],
        tune_samples: Sequence[Sample],
        method: str,
        bins: int = 2048,
        progress: Progress = _no_progress,
    ) -> dict[str, CaliEntry]:
        """Table entries for every tensor, in network order."""
        if method not in METHODS:
            raise TpucError(f"unknown calibration method '{method}' (known: {', '.join(METHODS)})")
        if not samples:
            raise TpucError("no calibration samples")
        kind = METHODS[method]
        start = time.perf_counter()
        stats = collect(
            self.interp,
            self.weights,
            samples,
            self.load,
            bins=bins,
            histogram=kind.needs_histogram,
            moments=kind.needs_moments,
            progress=progress,
            warn=self.warn,
        )
        thresholds = {name: threshold(method, s) for name, s in stats.items()}
        self.timings = {"statistics": time.perf_counter() - start}
        if tune_samples:
            start = time.perf_counter()
            absmax = {name: s.absmax for name, s in stats.items()}
            tuned = tune(
                self.interp, self.weights, tune_samples, self.load, thresholds, absmax, progress
            )
            thresholds.update(tuned)
            self.timings["auto-tune"] = time.perf_counter() - start
        entries = {name: entry_of(stats[name], thresholds[name]) for name in stats}
        entries = apply_rules(self.interp.steps, entries)
        self.lossy = lossy_tensors(stats, entries, self.interp.steps)
        return entries

    def load(self, sample: Sample):
        """One sample's input tensors by name, preprocessed."""
        return load_sample(sample, self.specs)

    def rebuild(self) -> None:
        """Make the interpreter again after the module's ops changed (a
        technique added a weight)."""
        self.interp = interpreter(self.module)


def interpreter(module):
    """Calibration's TOP interpreter, on the path the accelerator policy gives
    "calibration": tpuc's kernels unless $TPUC_NATIVE=1. The kernels measured
    faster here: observing every tensor keeps onnxruntime from fusing, and
    within today's memory its statistics pass took 127 s against the
    kernels' 36 s (resnet50, 20 samples, paired, loaded machine). Tables do
    not depend on the path: see tune.pick."""
    from tpuc.interp.accelerator import accelerated
    from tpuc.interp.top_interpreter import TopInterpreter

    return TopInterpreter(module, native=accelerated("calibration"))


def entry_of(stats: TensorStats, threshold_value: float) -> CaliEntry:
    """A table line; tensors with no usable range get TPU-MLIR's ±1e-5."""
    if stats.count == 0 or stats.absmax == 0:
        tiny = ZERO_TENSOR_THRESHOLD
        return CaliEntry(tiny, -tiny, tiny)
    return CaliEntry(float(threshold_value), float(stats.min), float(stats.max))


def write_table(
    path: Path,
    entries: dict[str, CaliEntry],
    *,
    mlir: Path,
    method: str,
    bins: int,
    samples: int,
    tune_num: int,
    generated: str | None,
    protected: Sequence[Path] = (),
    lossy: dict[str, float] | None = None,
    float_layers: dict[str, float] | None = None,
) -> None:
    """The table, written atomically (never over the module it came from)."""
    from tpuc.base.files import OutputSet

    text = format_table(
        CaliTable(entries=entries, lossy=dict(lossy or {}), float_layers=dict(float_layers or {})),
        mlir=mlir.name,
        methods=[method],
        histogram_bins=bins,
        samples=samples,
        tune_num=tune_num,
        generated=generated,
    )
    with OutputSet(protected=(mlir, *protected)) as out:
        out.write_text(path, text)


def one_sample_table(folder: Path, module, store, feeds: dict, generated: str) -> Path:
    """A max calibration table of `module` on one sample (`feeds`), written in
    `folder`: what one-op models built in code (tests, the cycle-fit suite)
    are calibrated with."""
    import numpy as np

    from tpuc.workflow.calibration.dataset import Sample

    sample = folder / "s0.npz"
    np.savez(sample, **feeds)
    cali = Calibration(module, store, str(folder / "m.mlir"), warn=lambda _: None)
    entries = cali.run([Sample((str(sample),))], [], "max")
    table = folder / "cali_table"
    write_table(table, entries, mlir=folder / "m.mlir", method="max", bins=2048, samples=1,
                tune_num=0, generated=generated)  # fmt: skip
    return table
