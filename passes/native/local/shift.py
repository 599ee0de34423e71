"""Moving the boundary between two neighbouring native layer groups.

The search prices runs of at most MAX_GROUP_OPS layers at their first
slice counts that fit, `merge.merge_runs` joins them, and `refine` then
gives each kept group its slice counts. Where two kept groups meet, the
op at their boundary may belong to the other: ppocr_det F16's backbone
group (unsliced, 192 ops: its FPN's upsamples and squeeze-excite pools
need whole planes) ended with the head's first ConvTranspose, whose
1.2 MB result it then stored with nothing left to overlap (33k cycles),
while the head's group after it is cut into H slices, which hide their
loads behind compute. TPU-MLIR's head group starts earlier.

`shift_boundaries` moves one op at a time across each boundary between
two groups (of one base group), towards either side, while the vendor's
cycles of the two refined groups fall, at most `MOST` ops a boundary.
"""

from __future__ import annotations

from tpuc.passes.layer_group.search import INVALID, base_groups

MOST = 3
"""Ops a boundary moves at most, each way (every try prices two groups with
their refined slice counts)."""


def _price(planner, run: tuple[int, int], refined: set) -> float:
    """The run's cost as a group at its refined slice counts."""
    first, last = run
    if last <= first:
        return INVALID  # a group keeps two ops or more
    if planner.cost(first, last) == INVALID:
        return INVALID
    if run not in refined:
        planner.refine(first, last)
        refined.add(run)
    return planner.cost(first, last)


def shift_boundaries(planner, runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`runs` (covering planner.ops in order, groups already refined) with each
    boundary between two groups moved while the pair costs less (module
    docstring); the moved groups refined."""
    base = {i: k for k, (a, b) in enumerate(base_groups(planner.ops)) for i in range(a, b + 1)}
    runs = list(runs)
    refined = {(a, b) for a, b in runs if b > a}
    for k in range(len(runs) - 1):
        (a, b), (c, d) = runs[k], runs[k + 1]
        if b == a or d == c or base[a] != base[d]:
            continue
        current = _price(planner, (a, b), refined) + _price(planner, (c, d), refined)
        for step in (-1, 1):
            for _ in range(MOST):
                (a, b), (c, d) = runs[k], runs[k + 1]
                left, right = (a, b + step), (c + step, d)
                tried = _price(planner, left, refined) + _price(planner, right, refined)
                if tried >= current:
                    break
                runs[k], runs[k + 1], current = left, right, tried
    return runs


__all__ = ["shift_boundaries"]
