"""Moving the boundary between two neighbouring native groups
(passes/native/local/shift.py): against a planner whose costs are given,
the boundary moves one op at a time while the two groups cost less, each
way, at most MOST ops; global layers and base-group borders stay; every
group is refined once before it is priced. (ppocr_det F16 end to end:
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
    refined: list = field(default_factory=list)

    @property
    def ops(self):
        return list(range(self.n))

    def cost(self, first: int, last: int) -> float:
        if first == last:
            return 10.0
        if any(first <= w <= last for w in self.walls):
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


def test_the_boundary_moves_while_the_pair_costs_less(monkeypatch):
    """Ops 0..9, two groups cut after op 6; the cheapest cut is after op 4
    (each op moved left saves 5 until there)."""

    def price(first, last):
        return 100 + (last - first) + (5 * (last - 4) if last > 4 else 0)

    stub = Stub(10, price)
    monkeypatch.setattr(shift, "base_groups", walls_of(stub))
    assert shift.shift_boundaries(stub, [(0, 6), (7, 9)]) == [(0, 4), (5, 9)]
    assert len(stub.refined) == len(set(stub.refined))  # each run refined once


def test_at_most_most_ops_and_groups_keep_two_ops(monkeypatch):
    stub = Stub(12, lambda first, last: 100 - 10 * first)  # the right group wants to shrink
    monkeypatch.setattr(shift, "base_groups", walls_of(stub))
    moved = shift.shift_boundaries(stub, [(0, 3), (4, 11)])
    assert moved == [(0, 3 + shift.MOST), (4 + shift.MOST, 11)]
    stub = Stub(6, lambda first, last: 100 - 10 * first)
    monkeypatch.setattr(shift, "base_groups", walls_of(stub))
    assert shift.shift_boundaries(stub, [(0, 3), (4, 5)]) == [(0, 3), (4, 5)]


def test_global_layers_and_base_groups_stay(monkeypatch):
    stub = Stub(10, lambda first, last: 100 - 10 * first, walls=(5,))
    monkeypatch.setattr(shift, "base_groups", walls_of(stub))
    runs = [(0, 2), (3, 4), (5, 5), (6, 9)]
    assert shift.shift_boundaries(stub, runs)[2:] == [(5, 5), (6, 9)]
