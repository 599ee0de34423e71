"""Local-memory hazards between the concurrent TIU and GDMA streams.

Within one CmdGroup each engine runs its stream in order and the two
engines run concurrently, except where a `wait_id` orders them (docs/isa.md
"Synchronisation"). GDMA command g is done before TIU command t starts iff
some TIU command up to t waits for a GDMA command >= g (a longer chain of
waits implies this one in a stream without deadlock), and symmetrically. A
TIU and a GDMA command that are not ordered so and where one writes local
bytes the other reads or writes are a hazard: loading fails with one line
naming both. The unordered GDMA commands of TIU command t form one window
of the GDMA stream that only slides forward with t, so the check is a
sliding window, not all pairs. Touched bytes are, per lane, the
[lowest, highest) byte a record's elements use in that lane.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from tpuc.base.errors import TpucError
from tpuc.target.isa.records import SPACE_LOCAL, Command, TensorRecord, lane_axis
from tpuc.target.runtime.device import Device, extent, in_lane_extent


class Block(NamedTuple):
    """Bytes [low, high) of each lane in [lane, lane_end)."""

    lane: int
    lane_end: int
    low: int
    high: int


class Footprint(NamedTuple):
    reads: list[Block]
    writes: list[Block]


def blocks(record: TensorRecord, device: Device) -> list[Block]:
    """The local bytes a (bounds-checked) record touches, per lane range."""
    if record.absent or record.space != SPACE_LOCAL or 0 in record.shape:
        return []
    size = device.lmem_bytes
    axis = lane_axis(record)
    if axis is None:
        low, high = extent(record)
        lane = low // size
        return [Block(lane, lane + 1, low - lane * size, high - lane * size)]
    low, high = in_lane_extent(record, axis)
    return [
        Block(p.lane, p.lane + p.count, p.offset + low, p.offset + high)
        for p in device.lane_parts(record, "tensor")
    ]


def footprint(command: Command, device: Device) -> Footprint | None:
    """None when the command touches no local memory."""
    reads = [b for r in command.operands for b in blocks(r, device)]
    writes = [b for r in command.results for b in blocks(r, device)]
    return Footprint(reads, writes) if reads or writes else None


def _overlap(ours: list[Block], theirs: list[Block]) -> Block | None:
    for a in ours:
        for b in theirs:
            lane, lane_end = max(a.lane, b.lane), min(a.lane_end, b.lane_end)
            low, high = max(a.low, b.low), min(a.high, b.high)
            if lane < lane_end and low < high:
                return Block(lane, lane_end, low, high)
    return None


def _conflict(a: Footprint, b: Footprint) -> tuple[bool, str, Block] | None:
    """(a writes?, what the other does, the shared block) of a hazard."""
    for writer, other, verb in ((a, b, "reads"), (a, b, "writes"), (b, a, "reads")):
        block = _overlap(writer.writes, other.reads if verb == "reads" else other.writes)
        if block is not None:
            return writer is a, verb, block
    return None


def _prefix_waits(stream: list[Command]) -> list[int]:
    """Per command, the other engine's last command finished before it starts."""
    waits, latest = [], 0
    for cmd in stream:
        latest = max(latest, cmd.header.wait_id)
        waits.append(latest)
    return waits


def check_hazards(
    tiu: list[Command],
    gdma: list[Command],
    device: Device,
    name: Callable[[Command, int], str],
) -> None:
    """One-line TpucError at the first unordered TIU/GDMA pair sharing local
    bytes that one of them writes. `name(command, index)` names a command."""
    tiu_prints = [footprint(c, device) for c in tiu]
    if not any(tiu_prints):
        return
    gdma_prints = [footprint(c, device) for c in gdma]
    tiu_waits, gdma_waits = _prefix_waits(tiu), _prefix_waits(gdma)
    low = high = 0  # the window [low, high) of GDMA commands unordered with t
    for t, cmd in enumerate(tiu):
        while low < len(gdma) and gdma[low].header.cmd_id <= tiu_waits[t]:
            low += 1
        high = max(high, low)
        while high < len(gdma) and gdma_waits[high] < cmd.header.cmd_id:
            high += 1
        if tiu_prints[t] is None:
            continue
        for g in range(low, high):
            if gdma_prints[g] is None:
                continue
            found = _conflict(tiu_prints[t], gdma_prints[g])
            if found is not None:
                _raise(found, (cmd, t), (gdma[g], g), device, name)


def _raise(found, tiu_cmd, gdma_cmd, device: Device, name) -> None:
    tiu_writes, verb, block = found
    writer, other = (tiu_cmd, gdma_cmd) if tiu_writes else (gdma_cmd, tiu_cmd)
    base = block.lane * device.lmem_bytes
    lanes = (
        f"lane {block.lane}"
        if block.lane_end == block.lane + 1
        else (f"lanes {block.lane}..{block.lane_end - 1}")
    )
    raise TpucError(
        f"{name(*writer)} writes local [{base + block.low:#x}, {base + block.high:#x}) "
        f"({lanes}) that {name(*other)} {verb} concurrently: no wait_id orders them"
    )
