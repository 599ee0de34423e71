"""Moving the boundary between two neighbouring native groups
(passes/native/local/shift.py): against a planner whose costs are given,
neighbours join when one group costs less, else their boundary moves by
up to MOST ops either way to where the two cost least (a side of one op
a global layer); global layers and base-group borders stay; every group
is refined once before it is priced. (ppocr_det F16 end to end:
docs/layer-group.md, the boundary before the head's first ConvTranspose,
598,894 -> 573,186 vendor cycles, the interpreter's bits.)"""

from __future__ import annotations

from dataclasses import dataclass, field

from tpuc.passes.layer_group.search import INVALID
from tpuc.passes.native.local import shift


@dataclass
class Stub:
    """A planner over `n` ops: `price(first, last)` gives a group's cycles,
    global layers cost 10; `walls` are ops that cannot be local."""

    n: int
    price: object
    walls: tuple[int, ...] = ()
    limit: int = 1000  # longest valid group
    refined: list = field(default_factory=list)

    @property
    def ops(self):
        return list(range(self.n))

    def cost(self, first: int, last: int) -> float:
        if first == last:
            return 10.0
        if any(first <= w <= last for w in self.walls) or last - first >= self.limit:
            return INVALID
        return float(self.price(first, last))

    def refine(self, first: int, last: int) -> None:
        self.refined.append((first, last))


def walls_of(stub: Stub):
    def base_groups(ops):
        runs, start = [], 0
        for w in stub.walls:
            if start < w:
                runs.append((start, w - 1))
            runs.append((w, w))
            start = w + 1
        if start < stub.n:
            runs.append((start, stub.n - 1))
        return runs

    return base_groups


def test_the_boundary_moves_where_the_pair_costs_least(monkeypatch):
    """Ops 0..9, two groups cut after op 6; the cheapest cut is after op 4."""

    def price(first, last):
        return 100 + 5 * (abs(last - 4) if first == 0 else abs(first - 5))

    stub = Stub(10, price, limit=7)
    monkeypatch.setattr(shift, "base_groups", walls_of(stub))
    assert shift.shift_boundaries(stub, [(0, 6), (7, 9)]) == [(0, 4), (5, 9)]
    assert len(stub.refined) == len(set(stub.refined))  # each run refined once


def test_at_most_most_ops_and_a_side_may_go_global(monkeypatch):
    stub = Stub(12, lambda first, last: 100 - 10 * first, limit=8)  # the right one shrinks
    monkeypatch.setattr(shift, "base_groups", walls_of(stub))
    moved = shift.shift_boundaries(stub, [(0, 3), (4, 11)])
    assert moved == [(0, 3 + shift.MOST), (4 + shift.MOST, 11)]
    stub = Stub(6, lambda first, last: 100 - 10 * first, limit=5)  # op 0 alone costs 10
    monkeypatch.setattr(shift, "base_groups", walls_of(stub))
    assert shift.shift_boundaries(stub, [(0, 3), (4, 5)]) == [(0, 0), (1, 5)]


def test_groups_join_when_one_costs_less(monkeypatch):
    """Three groups that cost 100 each or joined (the search's first
    prices said otherwise): one group; a global layer and the base-group
    border it makes stay."""
    stub = Stub(12, lambda first, last: 100, walls=(9,))
    monkeypatch.setattr(shift, "base_groups", walls_of(stub))
    runs = [(0, 2), (3, 5), (6, 8), (9, 9), (10, 11)]
    assert shift.shift_boundaries(stub, runs) == [(0, 8), (9, 9), (10, 11)]
