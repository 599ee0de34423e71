"""Choosing the groups (layer-group.md §5).

Layers are the ops of func @main in graph order, without its leaves
(inputs, weights, none). An op that cannot be local is a global layer and
cuts the sequence into base groups; a group is a contiguous run inside a
base group, and a run of one op is a global layer.
- opt=1 (greedy, TPU-MLIR's simple_layer_group): from the tail of a base
  group, the longest valid run ending there becomes a group; repeat on
  what is left before it.
- opt=2 (default): the cheapest partition of each base group into runs,
  by the cycle model. TPU-MLIR writes it as an interval DP over cut points
  (cost[i][j] = min(group(i..j), min_k cost[i][k] + cost[k+1][j])); its
  minimum is the minimum over all partitions into contiguous runs, which
  the prefix form best[j] = min_i best[i-1] + cost(i..j) computes with the
  same memoised run costs. Ties keep the longer last run. Runs are at most
  MAX_GROUP_OPS layers; above 99 layers, cut points fall on clusters of
  layers/50 layers (TPU-MLIR's max_cluster_size), and the greedy result
  replaces the DP's when it is cheaper.
Run costs are memoised per (first, last) layer; once a run's weights alone
overflow a lane, longer runs from the same start are not tried.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import Block, Operation

from tpuc.dialects import top
from tpuc.ir.core import body_ops
from tpuc.passes.layer_group.cost import global_cycles
from tpuc.passes.layer_group.group import GroupInvalid, GroupPlan, plan_group
from tpuc.passes.layer_group.layout import LocalLayout
from tpuc.passes.layer_group.rules import why_global
from tpuc.target.chips.timing import Timing

LEAVES = (top.InputOp, top.WeightOp, top.NoneOp)
INVALID = float("inf")
MAX_GROUP_OPS = 24
"""Longest run the search tries: bounds planning time (O(n · MAX²) op
visits instead of O(n³)); TPU-MLIR bounds it by clustering layers instead."""


def layers(block: Block) -> list[Operation]:
    return [op for op in body_ops(block) if not isinstance(op, LEAVES)]


def base_groups(ops: Sequence[Operation]) -> list[tuple[int, int]]:
    """Maximal runs [first, last] of ops that can be local (global ops are
    runs of their own)."""
    runs: list[tuple[int, int]] = []
    start = None
    for i, op in enumerate(ops):
        if why_global(op) is None:
            start = i if start is None else start
            continue
        if start is not None:
            runs.append((start, i - 1))
            start = None
        runs.append((i, i))
    if start is not None:
        runs.append((start, len(ops) - 1))
    return runs


@dataclass
class Planner:
    """Memoised run costs over one op sequence."""

    ops: Sequence[Operation]
    layout: LocalLayout
    timing: Timing
    max_ops: int = MAX_GROUP_OPS
    plans: dict[tuple[int, int], GroupPlan | str] = field(default_factory=dict)
    too_heavy: dict[int, int] = field(default_factory=dict)  # first -> last that overflowed

    def plan(self, first: int, last: int) -> GroupPlan | str:
        """The plan of ops[first..last], or why they are not one group."""
        key = (first, last)
        if key not in self.plans:
            heavy = self.too_heavy.get(first)
            if heavy is not None and last > heavy:
                self.plans[key] = "its weights do not fit"
                return self.plans[key]
            try:
                self.plans[key] = plan_group(self.ops[first : last + 1], self.layout, self.timing)
            except GroupInvalid as exc:
                self.plans[key] = str(exc)
                if "weights need" in str(exc):
                    self.too_heavy[first] = min(last, self.too_heavy.get(first, last))
        return self.plans[key]

    def cost(self, first: int, last: int) -> float:
        if first == last:
            return global_cycles(self.ops[first], self.timing)
        found = self.plan(first, last)
        return found.cycles if isinstance(found, GroupPlan) else INVALID


def greedy(planner: Planner, first: int, last: int) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    end = last
    while end >= first:
        start = max(first, end - planner.max_ops + 1)
        while start < end and planner.cost(start, end) == INVALID:
            start += 1
        runs.append((start, end))
        end = start - 1
    return runs[::-1]


def dynamic(planner: Planner, first: int, last: int, cluster: int = 1) -> list[tuple[int, int]]:
    """The cheapest runs covering first..last whose cut points fall on
    multiples of `cluster` layers from `first`."""
    starts = list(range(first, last + 1, cluster))
    ends = [s - 1 for s in starts[1:]] + [last]
    best: list[float] = [0.0]  # best[k + 1]: cheapest partition of first..ends[k]
    cut: list[int] = []
    for k, j in enumerate(ends):
        choice, value = k, INVALID
        for m in range(k + 1):
            i = starts[m]
            if j - i + 1 > planner.max_ops and m < k:
                continue
            total = best[m] + planner.cost(i, j)
            if total < value:
                choice, value = m, total
        best.append(value)
        cut.append(choice)
    runs = []
    k = len(ends) - 1
    while k >= 0:
        m = cut[k]
        runs.append((starts[m], ends[k]))
        k = m - 1
    return runs[::-1]


def cluster_size(layers: int) -> int:
    """TPU-MLIR's max_cluster_size: one layer per cluster up to 99 layers,
    then max(layers / 50, 1)."""
    return 1 if layers <= 99 else max(layers // 50, 1)


def search(planner: Planner, opt: int) -> list[tuple[int, int]]:
    """Runs [first, last] covering every layer, in order."""
    cluster = cluster_size(len(planner.ops))
    runs: list[tuple[int, int]] = []
    for first, last in base_groups(planner.ops):
        if first == last:
            runs.append((first, last))
        elif opt == 1:
            runs.extend(greedy(planner, first, last))
        else:  # clustered DP may miss what greedy finds: keep the cheaper
            found = dynamic(planner, first, last, cluster)
            if cluster > 1:
                other = greedy(planner, first, last)
                if _total(planner, other) < _total(planner, found):
                    found = other
            runs.extend(found)
    return runs


def _total(planner: Planner, runs: list[tuple[int, int]]) -> float:
    return sum(planner.cost(a, b) for a, b in runs)


__all__ = ["Planner", "base_groups", "dynamic", "greedy", "layers", "search"]
