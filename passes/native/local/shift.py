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

`shift_boundaries` joins two neighbouring groups (of one base group) when
the joined group, refined, costs less than the two refined (merge_runs
compared them at the search's slice counts and first prefetch budget:
squeezenet F16's stem came out a 4-op group in H slices beside a
35-op one, 156,040 cycles against main's 147,855 with the input cast a
global layer and the rest one group), else moves their
boundary by up to `MOST` ops either way to where the two (refined; a side
left with one op a global layer) cost least.
"""

from __future__ import annotations

from tpuc.passes.layer_group.search import INVALID, base_groups

MOST = 3
"""Ops a boundary moves at most, each way (every try prices two groups with
their refined slice counts)."""


def _price(planner, run: tuple[int, int], refined: set) -> float:
    """The run's cost: one op a global layer, more a group at its refined
    slice counts."""
    first, last = run
    if last < first:
        return INVALID
    if planner.cost(first, last) == INVALID or last == first:
        return planner.cost(first, last)
    if run not in refined:
        planner.refine(first, last)
        refined.add(run)
    return planner.cost(first, last)


def shift_boundaries(planner, runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`runs` (covering planner.ops in order, groups already refined) with
    neighbouring groups joined, or their boundary moved, while that costs
    less (module docstring); every changed group refined."""
    base = {i: k for k, (a, b) in enumerate(base_groups(planner.ops)) for i in range(a, b + 1)}
    runs = list(runs)
    refined = {(a, b) for a, b in runs if b > a}
    k = 0
    while k < len(runs) - 1:
        (a, b), (c, d) = runs[k], runs[k + 1]
        if b > a and d > c and base[a] == base[d]:
            pair = _price(planner, (a, b), refined) + _price(planner, (c, d), refined)
            if _price(planner, (a, d), refined) < pair:
                runs[k : k + 2] = [(a, d)]
                continue  # the joined group's boundary with the next one
            _move(planner, runs, k, pair, refined)
        k += 1
    return runs


def _move(planner, runs: list[tuple[int, int]], k: int, pair: float, refined: set) -> None:
    """Move the boundary after runs[k] by up to MOST ops either way, where
    the two (a side of one op: a global layer) cost least."""
    (a, b), (c, d) = runs[k], runs[k + 1]
    for step in (*range(-MOST, 0), *range(1, MOST + 1)):
        left, right = (a, b + step), (c + step, d)
        tried = _price(planner, left, refined) + _price(planner, right, refined)
        if tried < pair:
            runs[k], runs[k + 1], pair = left, right, tried


__all__ = ["shift_boundaries"]
