#!/usr/bin/env python3
"""tpuc's cycle model against the vendor's on a single-op suite (bm1684x).

Each case is a one-op ONNX model (op class, shape, mode INT8 / F16 / F32),
converted and lowered in process, with the casts at its edges stripped
(`--quant_input --quant_output`) so the bmodel holds the op alone (the
`cast` class keeps them: its cases are the edge conversions). Every op is a
global layer on both sides; the case is then compiled twice:
- tpuc's own target: `compile_bmodel` + `tpuc.target.runtime.profile.estimate`
  (tpuc's cycle model, tpuc/target/chips/timing.py, docs/cost.md);
- the native target: `native_codegen`, the vendor backend library's own
  cycle count for the same layer (its profile's total, 1 cycle = 1 ns).
Prints one row per case (tpuc, vendor, tpuc/target/vendor) and per op class the
median and the largest absolute relative error |tpuc - vendor| / vendor.
`--json FILE` writes the rows (the fit in tpuc/target/chips/timing.py was made
from them).

    PYTHONPATH=$PWD python benchmarks/cycle_fit.py [--classes conv,add]
        [--modes INT8,F16,F32] [--json out.json] [--stored]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

MODES = ("INT8", "F16", "F32")


@dataclass
class Case:
    cls: str  # op class
    name: str
    nodes: list
    inputs: dict  # name -> shape
    inits: dict = field(default_factory=dict)  # name -> array
    strip: bool = True  # strip the edge casts


def _conv(name, c, o, hw, k=3, group=1, cls="conv"):
    w = np.random.default_rng(1).standard_normal((o, c // group, k, k)).astype("f4") * 0.1
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[k, k],
                            pads=[k // 2] * 4, group=group)  # fmt: skip
    return Case(cls, name, [node], {"x": (1, c, hw, hw)}, {"w": w})


def _gemm(name, m, k, n):
    w = np.random.default_rng(2).standard_normal((k, n)).astype("f4") * 0.05
    return Case("matmul", name, [helper.make_node("MatMul", ["x", "w"], ["y"])],
                {"x": (m, k)}, {"w": w})  # fmt: skip


def _binary(cls, op, name, shape):
    node = helper.make_node(op, ["x", "z"], ["y"])
    return Case(cls, name, [node], {"x": shape, "z": shape})


def _unary(cls, op, name, shape, strip=True, **attrs):
    return Case(cls, name, [helper.make_node(op, ["x"], ["y"], **attrs)], {"x": shape},
                strip=strip)  # fmt: skip


def _pool(op, name, c, hw, k):
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[k, k], strides=[k, k])
    return Case("pool", name, [node], {"x": (1, c, hw, hw)})


def _concat(name, c, hw):
    node = helper.make_node("Concat", ["x", "z"], ["y"], axis=1)
    return Case("move", name, [node], {"x": (1, c, hw, hw), "z": (1, c, hw, hw)})


def _slice(name, shape, axis, end):
    ints = {"s": [0], "e": [end], "a": [axis]}
    inits = {k: np.array(v, dtype=np.int64) for k, v in ints.items()}
    node = helper.make_node("Slice", ["x", "s", "e", "a"], ["y"])
    return Case("move", name, [node], {"x": shape}, inits)


def suite() -> list[Case]:
    """Channels that fill (64, 256) and waste (16, 3) the 64 lanes, small and large maps."""
    return [
        _conv("conv c64 56x56", 64, 64, 56),
        _conv("conv c16 56x56", 16, 16, 56),
        _conv("conv c3>32 112x112", 3, 32, 112),
        _conv("conv c256 7x7", 256, 256, 7),
        _conv("conv1x1 c64>256 28x28", 64, 256, 28, k=1),
        _conv("dw c64 56x56", 64, 64, 56, group=64, cls="dwconv"),
        _conv("dw c16 56x56", 16, 16, 56, group=16, cls="dwconv"),
        _conv("dw c256 14x14", 256, 256, 14, group=256, cls="dwconv"),
        _gemm("fc 1x512x1000", 1, 512, 1000),
        _gemm("mm 64x256x256", 64, 256, 256),
        _gemm("mm 256x64x64", 256, 64, 64),
        _binary("add", "Add", "add c64 56x56", (1, 64, 56, 56)),
        _binary("add", "Add", "add c16 56x56", (1, 16, 56, 56)),
        _binary("add", "Add", "add c64 8x8", (1, 64, 8, 8)),
        _binary("mul", "Mul", "mul c64 56x56", (1, 64, 56, 56)),
        _binary("mul", "Mul", "mul c16 28x28", (1, 16, 28, 28)),
        _pool("MaxPool", "maxpool2 c64 56x56", 64, 56, 2),
        _pool("MaxPool", "maxpool2 c16 56x56", 16, 56, 2),
        _pool("AveragePool", "avgpool2 c64 56x56", 64, 56, 2),
        _pool("AveragePool", "avgpool7 c256 7x7", 256, 7, 7),
        _pool("AveragePool", "avgpool7 c64 14x14", 64, 14, 7),
        _unary("act", "Sigmoid", "sigmoid c64 56x56", (1, 64, 56, 56)),
        _unary("act", "Sigmoid", "sigmoid c16 14x14", (1, 16, 14, 14)),
        _unary("act", "Relu", "relu c64 56x56", (1, 64, 56, 56)),
        _unary("softmax", "Softmax", "softmax 1x1000", (1, 1000), axis=-1),
        _unary("softmax", "Softmax", "softmax 64x196", (1, 64, 196), axis=-1),
        _unary("cast", "Relu", "cast+relu c64 56x56", (1, 64, 56, 56), strip=False),
        _unary("cast", "Relu", "cast+relu c16 14x14", (1, 16, 14, 14), strip=False),
        _unary("move", "Transpose", "permute c64 56x56", (1, 64, 56, 56), perm=[0, 2, 3, 1]),
        _unary("move", "Transpose", "permute c16 28x28", (1, 16, 28, 28), perm=[0, 1, 3, 2]),
        _concat("concat 2x c32 56x56", 32, 56),
        _slice("slice w 56>28 c64", (1, 64, 56, 56), 3, 28),
        _slice("slice c 64>32 56x56", (1, 64, 56, 56), 1, 32),
    ]


def _onnx(case: Case, path: Path) -> str:
    import onnx

    infos = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s))
             for n, s in case.inputs.items()]  # fmt: skip
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    inits = [numpy_helper.from_array(a, n) for n, a in case.inits.items()]
    graph = helper.make_graph(case.nodes, "g", infos, out, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, str(path))
    return str(path)


def _table(tmp: Path, module, store, feeds) -> Path:
    """A max calibration table of the module on the feeds (one sample)."""
    from tpuc.workflow.calibration.calibrate import one_sample_table

    return one_sample_table(tmp, module, store, feeds, "cycle_fit")


def lowered(case: Case, mode: str, tmp: Path):
    """The case's module lowered in `mode` (edge casts stripped) and its weights."""
    from tpuc.frontends.onnx.converter import convert_onnx
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.passes.strip_io_quant import plan, strip
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import run_passes, transform_passes

    module, weights = convert_onnx(_onnx(case, tmp / "m.onnx"), "m")
    store = WeightStore(weights)
    attach_weights(module, store)
    run_passes(module, transform_passes())
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype("f4") for n, s in case.inputs.items()}
    table = _table(tmp, module, store, feeds) if mode == "INT8" else None
    lower(module, "bm1684x", mode, cali_table=table)
    if case.strip:
        found = plan(module, True, True)
        if found.stripped():
            strip(module, found)
    return module, store


STORED = (
    Path(__file__).resolve().parents[1] / "tpuc" / "target" / "chips" / "bm1684x_cycle_suite.json"
)
"""The vendor's cycles the fit was made from (`--stored` reads them)."""


def stored() -> dict[tuple[str, str], int]:
    rows = json.loads(STORED.read_text())["vendor"]
    return {(r["case"], r["mode"]): r["cycles"] for r in rows}


def measure(case: Case, mode: str, vendor) -> tuple[int, int]:
    """(tpuc's estimate, the vendor's cycles) of the case in `mode`;
    `vendor` a dict: its stored cycles, no native run."""
    from tpuc.target.bmodel import read_bmodel
    from tpuc.target.runtime.profile import estimate
    from tpuc.tools.deploy_native import native_codegen
    from tpuc.workflow.pipeline import compile_bmodel

    with tempfile.TemporaryDirectory() as name:
        module, store = lowered(case, mode, Path(name))
        if isinstance(vendor, dict):
            chip = vendor[case.name, mode]
        else:
            chip = native_codegen(module.clone(), store, "bm1684x", vendor).cycles
        own = compile_bmodel(module, store, "bm1684x", disable_layer_group=True)
    return estimate(read_bmodel(own.bmodel, case.name)).cycles, chip


def error(tpuc: int, vendor: int) -> float:
    return abs(tpuc - vendor) / vendor


def summary(rows: list[dict]) -> list[str]:
    """Per op class: cases, median and largest absolute relative error."""
    lines = [f"{'class':8} {'cases':>5} {'median err':>10} {'max err':>8}"]
    for cls in dict.fromkeys(r["class"] for r in rows):
        errs = [error(r["tpuc"], r["vendor"]) for r in rows if r["class"] == cls]
        lines.append(f"{cls:8} {len(errs):5} {statistics.median(errs):10.0%} {max(errs):8.0%}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", default="", help="comma-separated op classes (default all)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--json", type=Path, help="write the rows to this file")
    parser.add_argument("--stored", action="store_true",
                        help=f"the vendor's cycles from {STORED.name} (no native run)")  # fmt: skip
    args = parser.parse_args(argv)
    from tpuc.base.errors import TpucError
    from tpuc.target.vendor.fetch import locate

    vendor = stored() if args.stored else locate()
    wanted = set(filter(None, args.classes.split(",")))
    rows = []
    print(f"{'case':26} {'mode':4} {'tpuc':>9} {'vendor':>9} {'ratio':>6}")
    for case in suite():
        if wanted and case.cls not in wanted:
            continue
        for mode in args.modes.split(","):
            try:
                own, chip = measure(case, mode, vendor)
            except TpucError as exc:
                print(f"{case.name:26} {mode:4} skipped: {exc}")
                continue
            rows.append({"class": case.cls, "case": case.name, "mode": mode,
                         "tpuc": own, "vendor": chip})  # fmt: skip
            print(f"{case.name:26} {mode:4} {own:9,} {chip:9,} {own / chip:6.2f}", flush=True)
    print("\n".join(summary(rows)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
