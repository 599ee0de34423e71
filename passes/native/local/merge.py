"""Merging neighbouring native layer groups after the search.

The search (`passes/layer_group/search.py`) tries runs of at most
MAX_GROUP_OPS layers to bound planning time, so a network whose local ops
all fit local memory at once (ppocr_cls: 120 ops, a few KiB per lane each)
is cut into runs of 24 or fewer, and every cut stores and reloads the
activations between them and waits for the next group's first weights
with nothing to overlap (TPU-MLIR plans ppocr_cls INT8 as one group).
`merge_runs` then joins two neighbouring runs of one base group whenever
the vendor prices the joined group below the two apart, the best saving
first, until no join saves: a few more priced candidates per group
instead of a search over runs of any length.
"""

from __future__ import annotations

from tpuc.passes.layer_group.search import INVALID, base_groups


def merge_runs(planner, runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`runs` (covering planner.ops in order) with neighbours joined while the
    planner's cost of the joined run is below the sum of theirs."""
    base = {i: k for k, (a, b) in enumerate(base_groups(planner.ops)) for i in range(a, b + 1)}
    runs = list(runs)
    while True:
        best, where = 0.0, None
        for k in range(len(runs) - 1):
            (a, b), (c, d) = runs[k], runs[k + 1]
            if base[a] != base[d]:
                continue
            joined = planner.cost(a, d)
            if joined == INVALID:
                continue
            saving = planner.cost(a, b) + planner.cost(c, d) - joined
            if saving > best:
                best, where = saving, k
        if where is None:
            return runs
        runs[where : where + 2] = [(runs[where][0], runs[where + 1][1])]


__all__ = ["merge_runs"]
