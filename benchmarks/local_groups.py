#!/usr/bin/env python3
"""Native layer groups against the same ops as global layers, in the
vendor's own cycles (bm1684x; 1 cycle = 1 ns).

Each case is a small chain (ONNX, converted and lowered in process like
cycle_fit.py's, edge casts stripped, layer-group off so every tensor has a
DDR address); its groupable ops become one group whose slicing the
planner's price query picks (`cheapest_plan` over N x H cuts), and the
vendor library prices the group's commands and the same ops' global calls
(`GroupPricer`, issuing off; the price equals the cycles the commands add
when emitted, tests/native/test_local_groups.py). Prints one row per case
and mode: group cycles, its cut, global cycles, group/global.

    PYTHONPATH=$PWD python benchmarks/local_groups.py [--modes INT8,F16]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from onnx import helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cycle_fit import Case, lowered  # noqa: E402


def _conv(name, src, dst, c_in, c_out, k=3, stride=1, relu=True, seed=0):
    w = np.random.default_rng(seed).standard_normal((c_out, c_in, k, k)).astype("f4") * 0.1
    out = f"{dst}_c" if relu else dst
    conv = helper.make_node("Conv", [src, f"w{name}"], [out], kernel_shape=[k, k],
                            pads=[k // 2] * 4, strides=[stride] * 2)  # fmt: skip
    nodes = [conv] + ([helper.make_node("Relu", [f"{dst}_c"], [dst])] if relu else [])
    return nodes, {f"w{name}": w}


def _block(name: str, c: int, hw: int, residual: bool) -> Case:
    """conv3x3+relu, conv3x3 (+relu) and, with `residual`, + the input."""
    n1, w1 = _conv("1", "x", "a", c, c, seed=1)
    n2, w2 = _conv("2", "a", "b" if residual else "y", c, c, relu=not residual, seed=2)
    nodes = n1 + n2 + ([helper.make_node("Add", ["b", "z"], ["y"])] if residual else [])
    inputs = {"x": (1, c, hw, hw)} | ({"z": (1, c, hw, hw)} if residual else {})
    return Case("group", name, nodes, inputs, w1 | w2)


def _pools(name: str, c: int, hw: int) -> Case:
    n1, w1 = _conv("1", "x", "a", 16, c, seed=3)
    pool = helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2])
    n2, w2 = _conv("2", "p", "y", c, c, seed=4)
    return Case("group", name, [*n1, pool, *n2], {"x": (1, 16, hw, hw)}, w1 | w2)


def suite() -> list[Case]:
    return [
        _block("conv-conv c16 40x40", 16, 40, False),
        _block("conv-conv c64 56x56", 64, 56, False),
        _block("conv-conv-add c64 28x28", 64, 28, True),
        _block("conv-conv-add c32 56x56", 32, 56, True),
        _pools("conv-pool-conv c32 64x64", 32, 64),
    ]


CUTS = ((1, 1), (1, 2), (1, 4), (1, 7), (1, 8), (1, 14), (1, 16))


def measure(case: Case, mode: str, vendor, pricer) -> tuple[int, tuple[int, int], int]:
    from tpuc.dialects import tpu
    from tpuc.ir.weights import WeightStore
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import build_calls
    from tpuc.passes.native.local.emit import cheapest_plan, global_commands
    from tpuc.workflow.pipeline import finalize

    with tempfile.TemporaryDirectory() as tmp:
        module, store = lowered(case, mode, Path(tmp))
        finalize(module, WeightStore(store), "bm1684x", 2, True)
    groupable = (tpu.Conv2DOp, tpu.AddOp, tpu.Pool2DOp)
    ops = [op for op in next(iter(module.ops)).body.block.ops if isinstance(op, groupable)]
    ctx = NativeContext(module)
    calls = dict(build_calls(module, ctx))
    plan, cycles = cheapest_plan(ops, ctx, pricer, CUTS)
    alone = pricer.price([c for op in ops for c in global_commands(op, calls[op])])
    return cycles, (plan.nsecs, plan.hsecs), alone


def main(argv: list[str] | None = None) -> int:
    from tpuc.passes.native.local.emit import GroupPricer
    from tpuc.target.vendor.fetch import locate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="INT8,F16")
    args = parser.parse_args(argv)
    vendor = locate()
    print(f"{'case':28} {'mode':5} {'group':>9} {'cut NxH':>8} {'global':>9} {'ratio':>6}")
    with GroupPricer(vendor) as pricer:
        for case in suite():
            for mode in args.modes.split(","):
                group, cut, alone = measure(case, mode, vendor, pricer)
                print(f"{case.name:28} {mode:5} {group:9,} {cut[0]:>4}x{cut[1]:<3} "
                      f"{alone:9,} {group / alone:6.2f}")  # fmt: skip
        print(f"vendor library calls: {pricer.asked} (the rest from the cache)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
