#!/usr/bin/env python3
"""Where PP-OCRv4 rec loses its text in INT8 (issue 26; docs/tools.md,
"Below the acceptance bar"): the share of int8_techniques.py's 27 skimage
lines whose greedy CTC text equals FP32's, for one calibration table.

    python regression/rec_int8_loss.py MLIR TABLE int8 [--qtable Q] [--asymmetric]
    python regression/rec_int8_loss.py MLIR TABLE fake [--bits N]

`int8`: the TPU interpreter after INT8 lowering (a qtable moves layers to
float: a diagnosis, e.g. a whole block in F16). `fake`: the float run with
every layer output rounded to an N-bit grid at the table's threshold
(weights float; the members of an elementwise chain that lowering turns
into one lookup table are not rounded, as in INT8): what the thresholds
and the grid lose, apart from the integer lowering. MLIR is the TOP module
int8_techniques.py writes (OUT/ppocr_rec/ppocr_rec.mlir).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from regression.int8_techniques import ctc_text, rec_inputs  # noqa: E402

OUTPUT = "softmax_11.tmp_0"


def int8_run(module, store, args):
    from tpuc.interp.tpu_interpreter import TpuInterpreter
    from tpuc.ir.weights import WeightStore, attach_weights, weights_of
    from tpuc.workflow.deploy import lower

    lowered = module.clone()
    attach_weights(lowered, WeightStore(store))
    lower(lowered, "bm1684x", "INT8", args.asymmetric, cali_table=args.table, qtable=args.qtable)
    interp, weights = TpuInterpreter(lowered), weights_of(lowered)
    return lambda x: interp.real_values(interp.run(weights, x))[OUTPUT]


def chain_members(module) -> set[str]:
    """Outputs read only by other elementwise ops: inside one lookup table."""
    from tpuc.dialects import top

    chain = (top.AddConstOp, top.MulConstOp, top.MulOp, top.AddOp)
    inside = set()
    for op in module.walk():
        readers = [use.operation for r in op.results for use in r.uses]
        if isinstance(op, chain) and readers and all(isinstance(r, chain) for r in readers):
            inside.add(op.names[0])
    return inside


def on_grid(value: np.ndarray, entry, bits: int) -> np.ndarray:
    """`value` on the symmetric `bits`-bit grid of `entry`'s threshold
    (unsigned when the entry never goes below 0), clipped to it."""
    signed = entry.min < 0
    step = entry.threshold / (2 ** (bits - signed) - 1)
    low = -entry.threshold if signed else 0.0
    return np.clip(np.round(value / step) * step, low, entry.threshold)


def fake_run(module, store, args):
    from tpuc.base.cali_table import read_table
    from tpuc.interp.top_interpreter import TopInterpreter

    entries, inside = read_table(args.table).entries, chain_members(module)
    interp = TopInterpreter(module, native=False)

    def rounded(step, _args, results) -> None:  # rounds in place: dump_all donates nothing
        for name, value in zip(step.names, results, strict=True):
            entry = entries.get(name)
            if entry is not None and name not in inside and name != OUTPUT:
                value[...] = on_grid(value, entry, args.bits)

    return lambda x: interp.run(store, x, dump_all=True, observe=rounded)[OUTPUT]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mlir", type=Path)
    parser.add_argument("table", type=Path)
    parser.add_argument("mode", choices=("int8", "fake"))
    parser.add_argument("--qtable", type=Path)
    parser.add_argument("--asymmetric", action="store_true")
    parser.add_argument("--bits", type=int, default=8)
    args = parser.parse_args()
    from tpuc.interp.top_interpreter import TopInterpreter
    from tpuc.ir.module_io import load_module

    module, store = load_module(args.mlir)
    reference = TopInterpreter(module, native=False)
    run = (int8_run if args.mode == "int8" else fake_run)(module, store, args)
    same, cos = [], []
    for x in rec_inputs()[1]:
        a, b = reference.run(store, x)[OUTPUT], run(x)
        same.append(ctc_text(a) == ctc_text(b))
        cos.append(float(a.ravel() @ b.ravel() / np.linalg.norm(a) / np.linalg.norm(b)))
    marks = "".join("1" if s else "0" for s in same)
    print(
        f"text {np.mean(same):.3f} {marks} cosine smallest {min(cos):.4f} mean {np.mean(cos):.4f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
