#!/usr/bin/env python3
"""Per-op INT8 agreement of a deployed pre-quantized TFLite model with LiteRT.

Run after regression/tflite_int8_mediapipe.py (its work folder holds, per
model, `<name>_int8.tflite`, `in.npz` and the deploy's `_tpu.mlir`). The TPU
interpreter runs the model with every tensor LiteRT also has replaced by
LiteRT's value once computed (teacher forcing), so each op sees the inputs
LiteRT's op saw; its int8 output against LiteRT's, in LSB of the model's
scale, summed per TFLite op type: the share equal and within 1 LSB, and the
largest difference. Whole-model drift is what these add up to.

    python regression/tflite_int8_ops.py WORK_DIR [--models a,b]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np


def op_types(model) -> dict[int, str]:
    """TFLite tensor index -> the builtin name of the op writing it."""
    return {i: op.op for op in model.operators for i in op.outputs}


def measure(d: Path) -> dict[tuple[str, str], list[float]]:
    """(TFLite op, TPU op) -> [equal, within 1 LSB, elements, largest]."""
    from tpuc.frontends.tflite import convert_tflite
    from tpuc.frontends.tflite.model import load_tflite
    from tpuc.frontends.tflite.reference import run_tflite
    from tpuc.interp.tpu_interpreter import TpuInterpreter, from_real
    from tpuc.ir.module_io import load_module

    name = d.name
    path = str(d / f"{name}_int8.tflite")
    _, _, keys, _ = convert_tflite(path, name)
    ref = run_tflite(path, dict(np.load(d / "in.npz")), keys=keys)
    model = load_tflite(path)
    kinds = op_types(model)
    stats: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0, 0.0])

    class Forced(TpuInterpreter):
        def _execute(self, step, env, weights, inputs):
            results = super()._execute(step, env, weights, inputs)
            tensor = step.names[0]
            if step.leaf or tensor not in ref or ref[tensor].shape != results[0].shape:
                return results
            t = model.tensor(keys[tensor][0])
            want = from_real(ref[tensor], self.elements[tensor])
            if t.quantized and t.scales.size == 1:
                got = results[0].astype(np.float64)
                if results[0].dtype.kind == "f" and "quant" not in str(self.elements[tensor]):
                    lsb = np.abs(np.round((got - ref[tensor]) / float(t.scales[0])))
                else:
                    lsb = np.abs(got - want.astype(np.float64))
                row = stats[(kinds.get(t.index, "?"), step.op.name)]
                row[0] += float(np.sum(lsb == 0))
                row[1] += float(np.sum(lsb <= 1))
                row[2] += lsb.size
                row[3] = max(row[3], float(lsb.max(initial=0)))
            return [want.astype(results[0].dtype), *results[1:]]

    module, store = load_module(d / f"{name}_bm1684x_int8_asym_tpu.mlir")
    Forced(module).run(store, dict(np.load(d / f"{name}_in_f32.npz")))
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work")
    parser.add_argument("--models", default="")
    args = parser.parse_args(argv)
    wanted = [m for m in args.models.split(",") if m]
    print("| model | TFLite op (TPU op) | equal | within 1 LSB | largest |")
    print("|---|---|---|---|---|")
    for d in sorted(Path(args.work).iterdir()):
        if not (d / f"{d.name}_bm1684x_int8_asym_tpu.mlir").exists():
            continue
        if wanted and d.name not in wanted:
            continue
        for (kind, tpu_op), (eq, one, n, top) in sorted(measure(d).items()):
            print(f"| {d.name} | {kind} ({tpu_op}) | {eq / n:.4f} | {one / n:.4f} | {top:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
