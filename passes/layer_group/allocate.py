"""Local-memory allocation of a group's buffers (layer-group.md §8).

Each buffer has a per-lane size (rounded up to the EU row) and a lifetime:
the set of timesteps it is alive in. Two buffers alive in a common
timestep may not overlap. Buffers are placed first-fit (lowest address) in
order of lifetime × size, largest first (ties: earliest timestep, then the
order given). A buffer also avoids, where it can, the banks of the buffers
it conflicts with: operands and result of one TIU op, and tensors a GDMA
transfer moves while a TIU op reads or writes the others; when no
conflict-free place exists a conflicting one is taken (and counted).
`place` retries without bank preferences when they fragment the lane, and
as a last resort puts the buffers side by side.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from tpuc.passes.layer_group.layout import LocalLayout, align_up


@dataclass(frozen=True)
class Buffer:
    key: Hashable
    size: int  # per-lane bytes, already rounded up
    live: frozenset[int]


@dataclass(frozen=True)
class Allocation:
    addresses: dict[Hashable, int]
    bank_conflicts: int  # buffers placed in a bank of a conflicting buffer
    used: int  # highest byte in use + 1


def _candidates(busy: Sequence[tuple[int, int]], layout: LocalLayout, banks: bool) -> list[int]:
    found = {0, *(align_up(end, layout.eu_bytes) for _, end in busy)}
    if banks:
        found.update(b * layout.bank_bytes for b in range(layout.banks))
    return sorted(found)


def _place(
    buffer: Buffer,
    busy: Sequence[tuple[int, int]],
    avoid: int,
    layout: LocalLayout,
) -> int | None:
    """The lowest address that fits `buffer` among `busy` ranges, outside
    the `avoid` banks, a bit mask (None when there is none)."""
    for start in _candidates(busy, layout, bool(avoid)):
        end = start + buffer.size
        if end > layout.lmem_bytes:
            return None
        if any(start < b_end and b_start < end for b_start, b_end in busy):
            continue
        if avoid & layout.banks_of(start, buffer.size):
            continue
        return start
    return None


def allocate(
    buffers: Sequence[Buffer],
    conflicts: Mapping[Hashable, set[Hashable]],
    layout: LocalLayout,
) -> Allocation | None:
    """Addresses for every buffer, or None when they do not fit a lane."""
    order = sorted(
        range(len(buffers)),
        key=lambda i: (-len(buffers[i].live) * buffers[i].size, min(buffers[i].live, default=0), i),
    )
    placed: dict[Hashable, int] = {}
    spans: list[tuple[int, int, frozenset[int]]] = []
    by_key = {b.key: b for b in buffers}
    bank_conflicts = 0
    for i in order:
        buffer = buffers[i]
        busy = [(a, e) for a, e, live in spans if not live.isdisjoint(buffer.live)]
        avoid = 0
        for other in conflicts.get(buffer.key, ()):
            if other in placed:
                avoid |= layout.banks_of(placed[other], by_key[other].size)
        address = _place(buffer, busy, avoid, layout) if avoid else None
        if address is None:
            address = _place(buffer, busy, 0, layout)
            if address is None:
                return None
            if avoid & layout.banks_of(address, buffer.size):
                bank_conflicts += 1
        placed[buffer.key] = address
        spans.append((address, address + buffer.size, buffer.live))
    used = max((placed[b.key] + b.size for b in buffers), default=0)
    return Allocation(placed, bank_conflicts, used)


def side_by_side(
    buffers: Sequence[Buffer],
    conflicts: Mapping[Hashable, set[Hashable]],
    layout: LocalLayout,
) -> Allocation | None:
    """Every buffer after the previous one, ignoring lifetimes: the plan of
    last resort when the buffers fit a lane together but first-fit (with
    its bank preferences) fragmented the lane."""
    placed: dict[Hashable, int] = {}
    offset = 0
    for buffer in buffers:
        placed[buffer.key] = offset
        offset += buffer.size
    if offset > layout.lmem_bytes:
        return None
    sizes = {b.key: b.size for b in buffers}
    clashes = sum(
        1
        for b in buffers
        if any(
            layout.banks_of(placed[b.key], b.size) & layout.banks_of(placed[o], sizes[o])
            for o in conflicts.get(b.key, ())
            if o in placed
        )
    )
    return Allocation(placed, clashes // 2, offset)


def place(
    buffers: Sequence[Buffer],
    conflicts: Mapping[Hashable, set[Hashable]],
    layout: LocalLayout,
) -> Allocation | None:
    """First-fit with bank preferences; when those fragment the lane, plain
    first-fit; then side by side; None when none fits."""
    return (
        allocate(buffers, conflicts, layout)
        or allocate(buffers, {}, layout)
        or side_by_side(buffers, conflicts, layout)
    )


__all__ = ["Allocation", "Buffer", "allocate", "place", "side_by_side"]
