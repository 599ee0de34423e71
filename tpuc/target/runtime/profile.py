"""The estimated run time of a bmodel on its chip, command by command.

The estimate reads the command streams only (it does not depend on data):
each TIU and GDMA command becomes a job of phases (tpuc.target.isa.units), both
streams of a TPU subnet are placed in time by their sync ids
(tpuc.target.cost.timeline), and subnets follow each other. CPU subnets run on
the host: they are counted, not timed. Nothing here imports IR, kernel or
interpreter code, and running a bmodel is unchanged: `estimate(model)` can
be called with or without a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tpuc.base.errors import TpucError
from tpuc.target.bmodel import BModel, SubNet
from tpuc.target.chips import get_chip
from tpuc.target.chips.timing import Timing, Unit
from tpuc.target.cost import ENGINE_GDMA, ENGINE_TIU, Job, Span, Timeline, schedule
from tpuc.target.isa.engine import ENGINE_NAMES
from tpuc.target.isa.records import ENGINES, Command, split_commands
from tpuc.target.isa.units import command_phases


@dataclass(frozen=True)
class CommandTag:
    """Which command a span belongs to."""

    subnet: int
    index: int  # position in its engine's stream (0-based)
    op: str  # the command's name (docs/isa.md), e.g. TIU_CONV
    layer_id: int


@dataclass
class Profile:
    """A bmodel's timeline on its chip, and what it adds up to."""

    chip: str
    timing: Timing
    timeline: Timeline
    cpu_layers: int = 0  # commands of CPU subnets (host time, not estimated)

    @property
    def cycles(self) -> int:
        return self.timeline.cycles

    @property
    def microseconds(self) -> float:
        return self.cycles / self.timing.clock_mhz

    def busy_share(self, engine: str) -> float:
        return self.timeline.busy(engine) / self.cycles if self.cycles else 0.0

    @property
    def dma_bytes(self) -> int:
        return sum(s.task.work for s in self.timeline.spans if s.task.unit is Unit.DMA)

    @property
    def macs(self) -> int:
        units = (Unit.CONV, Unit.MATMUL)
        return sum(s.task.work for s in self.timeline.spans if s.task.unit in units)

    def summary(self) -> str:
        return (
            f"{self.microseconds:,.1f} µs on {self.chip} ({self.cycles:,} cycles at "
            f"{self.timing.clock_mhz} MHz; TIU busy {self.busy_share(ENGINE_TIU):.0%}, "
            f"GDMA busy {self.busy_share(ENGINE_GDMA):.0%})"
        )


def _ordered(subnets: list[SubNet], source: str) -> list[SubNet]:
    by_id = {s.id: s for s in subnets}
    order, current = [], 0 if by_id else None
    while current is not None:
        if current not in by_id or by_id[current] in order:
            raise TpucError(f"{source}: subnet {current} is missing or repeats")
        order.append(by_id[current])
        current = by_id[current].next_ids[0] if by_id[current].next_ids else None
    return order


def _jobs(commands: list[Command], subnet: int, what: str) -> list[Job]:
    jobs = []
    for index, cmd in enumerate(commands):
        code = cmd.header.opcode
        op = ENGINE_NAMES.get(code)
        engine = ENGINES.get(cmd.header.engine, str(cmd.header.engine))
        try:
            phases = command_phases(cmd)
        except ValueError as exc:
            raise TpucError(f"{what} {engine} command {index}: {exc}") from None
        tag = CommandTag(subnet, index, op or "?", cmd.header.layer_id)
        jobs.append(Job(cmd.header.wait_id, phases, tag))
    return jobs


def estimate(model: BModel, source: str = "bmodel") -> Profile:
    """The timeline of the first network of `model` on the bmodel's chip."""
    if not model.nets or not model.nets[0].parameters:
        raise TpucError(f"{source}: the bmodel has no network")
    try:
        chip = get_chip(model.chip)
    except TpucError:
        raise TpucError(f"{source}: bmodel for unknown chip '{model.chip}'") from None
    spans: list[Span] = []
    now, cpu = 0, 0
    for subnet in _ordered(model.nets[0].parameters[0].subnets, source):
        cpu += len(subnet.cpu_params)
        for g, group in enumerate(subnet.cmd_groups):
            what = f"{source}: subnet {subnet.id} group {g}"
            try:
                tiu = split_commands(group.bdc, group.bdc_num, f"{what} TIU")
                gdma = split_commands(group.gdma, group.gdma_num, f"{what} GDMA")
            except ValueError as exc:
                raise TpucError(f"{source}: corrupt command stream: {exc}") from None
            streams = {
                ENGINE_TIU: _jobs(tiu, subnet.id, what),
                ENGINE_GDMA: _jobs(gdma, subnet.id, what),
            }
            timeline = schedule(streams, chip.timing, now, what)
            spans += timeline.spans
            now = timeline.end
    return Profile(chip.name, chip.timing, Timeline(0, now, spans), cpu)


# --- per layer -----------------------------------------------------------------------


@dataclass
class LayerCost:
    layer_id: int
    name: str
    op: str
    start: int
    end: int
    tiu: int = 0  # cycles on each engine
    gdma: int = 0
    macs: int = 0  # conv and matmul units
    elements: int = 0  # other TIU units (window elements for pool and depthwise)
    dma_bytes: int = 0

    @property
    def cycles(self) -> int:
        """From its first phase's start to its last phase's end (in a
        pipelined layer group this spans the whole group)."""
        return self.end - self.start

    @property
    def busy(self) -> int:
        """Engine cycles spent on the layer's own commands."""
        return self.tiu + self.gdma


def layer_costs(profile: Profile, names: Mapping[int, str] | None = None) -> list[LayerCost]:
    """Per layer: from its first phase's start to its last phase's end,
    busy cycles per engine, MACs and DMA bytes (in layer order)."""
    layers: dict[tuple[int, int], LayerCost] = {}
    for span in profile.timeline.spans:
        tag: CommandTag = span.tag
        key = (tag.subnet, tag.layer_id)
        name = (names or {}).get(tag.layer_id, f"layer {tag.layer_id}")
        cost = layers.setdefault(key, LayerCost(tag.layer_id, name, tag.op, span.start, span.end))
        cost.start, cost.end = min(cost.start, span.start), max(cost.end, span.end)
        if span.engine == ENGINE_TIU:
            if cost.tiu == 0 and span.task.unit is not Unit.DMA:
                cost.op = tag.op  # a layer is named by its compute, not its loads
            cost.tiu += span.cycles
        else:
            cost.gdma += span.cycles
        if span.task.unit is Unit.DMA:
            cost.dma_bytes += span.task.work
        elif span.task.unit in (Unit.CONV, Unit.MATMUL):
            cost.macs += span.task.work
        else:
            cost.elements += span.task.work
    return sorted(layers.values(), key=lambda c: (c.start, c.layer_id))


def timeline_rows(profile: Profile, names: Mapping[int, str] | None = None) -> list[dict]:
    """The per-phase timeline as JSON-ready rows."""
    rows = []
    for span in profile.timeline.spans:
        tag: CommandTag = span.tag
        work = "bytes" if span.task.unit is Unit.DMA else "macs" if span.task.unit in (
            Unit.CONV, Unit.MATMUL) else "elements"  # fmt: skip
        rows.append(
            {
                "engine": span.engine,
                "stream": span.stream,
                "command": tag.index,
                "subnet": tag.subnet,
                "layer_id": tag.layer_id,
                "layer": (names or {}).get(tag.layer_id, f"layer {tag.layer_id}"),
                "op": tag.op,
                "phase": span.kind,
                "unit": span.task.unit.value,
                "start": span.start,
                "end": span.end,
                work: span.task.work,
            }
        )
    return rows


def profile_document(profile: Profile, names: Mapping[int, str] | None = None) -> dict:
    """What `model_runner.py --profile` writes: totals, layers, the timeline."""
    return {
        "chip": profile.chip,
        "clock_mhz": profile.timing.clock_mhz,
        "cycles": profile.cycles,
        "microseconds": profile.microseconds,
        "tiu_busy": profile.busy_share(ENGINE_TIU),
        "gdma_busy": profile.busy_share(ENGINE_GDMA),
        "macs": profile.macs,
        "dma_bytes": profile.dma_bytes,
        "cpu_layers": profile.cpu_layers,
        "timing_source": profile.timing.source,
        "layers": [vars(cost) | {"cycles": cost.cycles} for cost in layer_costs(profile, names)],
        "timeline": timeline_rows(profile, names),
    }


def top_layers(profile: Profile, names: Mapping[int, str] | None = None, count: int = 10):
    """The `count` layers whose commands keep the engines busiest, as table
    lines (a grouped layer's span overlaps its neighbours', so busy cycles
    rank the layers; `share` is of the whole estimate)."""
    costs = sorted(layer_costs(profile, names), key=lambda c: (-c.busy, c.start))[:count]
    width = max([5, *(len(c.name) for c in costs)])
    lines = [
        f"{'layer':{width}}  {'op':16} {'busy':>10} {'share':>6} {'TIU':>9} {'GDMA':>9} "
        f"{'MACs':>13} {'elements':>11} {'DMA bytes':>11}"
    ]
    for c in costs:
        share = c.busy / profile.cycles if profile.cycles else 0.0
        lines.append(
            f"{c.name:{width}}  {c.op:16} {c.busy:>10,} {share:>6.1%} {c.tiu:>9,} "
            f"{c.gdma:>9,} {c.macs:>13,} {c.elements:>11,} {c.dma_bytes:>11,}"
        )
    return lines
