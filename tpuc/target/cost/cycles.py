"""Cycles of one task on one engine.

A compute task costs the chip's fixed TIU issue cycles plus its ops divided
by the unit's peak ops per cycle for its element width (rounded up); a DMA
task costs the fixed GDMA latency plus its bytes divided by the bandwidth of
its direction, or, when a strided move's rows are short, a minimum per row
burst, plus a cost per element of a transposing move (less when it stays
within lanes). A conv pays for the lanes and the cube's input-channel step
it leaves empty, a matmul a fixed cost per row of its result; other units
are assumed full; a 16-bit kernel the chip runs in f32 pays for its casts
(`widened`); bank conflicts are not modelled. The figures are
fitted to the vendor's cycles (benchmarks/cycle_fit.py, tpuc/target/chips/timing.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from tpuc.target.chips.timing import Direction, Timing, Unit

ENGINE_TIU, ENGINE_GDMA = "TIU", "GDMA"

OPS_PER_WORK = {Unit.CONV: 2, Unit.MATMUL: 2}  # depthwise MACs count 1 (a window element)
"""Ops one unit of work counts: a MAC is a multiply and an add (the
convention of the published "TOPS" rates); other units count 1 per element."""


@dataclass(frozen=True)
class Task:
    """Work for one hardware unit.

    `work` is MACs for conv and matmul, window elements for pool (MACs for a
    depthwise convolution), elements for arith, LUT, convert and SFU, and
    bytes for DMA. `element_bytes` picks the rate column of a compute unit;
    `direction` is a DMA's source and destination."""

    unit: Unit
    work: int
    element_bytes: int = 1
    direction: Direction | None = None
    channels: int = 0  # what sits on the lanes: conv output channels, norm rows (0: full)
    inner: int = 0  # conv: input channels per group (0: the cube is assumed full)
    runs: int = 0  # DMA: row bursts of a strided move (its contiguous runs; 0: one)
    scattered: int = 0  # DMA: elements a transposing move reads or writes one at a time
    rows: int = 0  # matmul: rows of the result (M), each with a fixed cost
    shuffled: int = 0  # DMA: elements a transpose within each lane reorders
    converted: int = 0  # elements a 16-bit kernel run in f32 converts (in and out)

    @property
    def engine(self) -> str:
        return ENGINE_GDMA if self.unit is Unit.DMA else ENGINE_TIU


def cycles(task: Task, timing: Timing) -> int:
    """Cycles `task` keeps its engine busy on a chip with `timing`."""
    if task.unit is Unit.DMA:
        if task.direction is None:
            raise ValueError("a DMA task needs a direction")
        burst = timing.dma_burst_cycles.get(task.direction, 0)
        stream = max(task.work / timing.dma[task.direction], task.runs * burst)
        scattered = task.scattered * timing.dma_element_cycles
        scattered += task.shuffled * timing.dma_shuffle_cycles
        return timing.gdma_latency_cycles + math.ceil(stream + scattered)
    if task.element_bytes == 2 and task.unit in timing.widened:
        return widened(task, timing)
    ops = task.work * OPS_PER_WORK.get(task.unit, 1) * occupancy(task, timing)
    if task.unit in (Unit.SFU, Unit.NORM):
        ops *= timing.sfu_ops_per_element
    fixed = timing.tiu_issue_cycles + timing.overhead.get(task.unit, 0)
    fixed += task.rows * timing.row_cycles.get(task.element_bytes, 0)
    return fixed + math.ceil(ops / timing.rate(task.unit, task.element_bytes))


def widened(task: Task, timing: Timing) -> int:
    """A 16-bit kernel the chip runs in f32 between two casts through DDR
    (`Timing.widened`): the f32 kernel plus, per cast, a TIU conversion, a
    load and a store; each converted element is read or written once at 2
    and once at 4 bytes, half of it on the load and half on the store path.
    A task that converts nothing (a layer group's local op) is the f32 kernel."""
    wide = cycles(replace(task, element_bytes=4), timing)
    if not task.converted:
        return wide
    per_element = 3 * (
        1 / timing.dma[Direction.DDR_TO_LMEM] + 1 / timing.dma[Direction.LMEM_TO_DDR]
    )
    convert = task.converted / timing.rate(Unit.CONVERT, 4)
    fixed = 2 * (timing.tiu_issue_cycles + 2 * timing.gdma_latency_cycles)
    return wide + fixed + math.ceil(task.converted * per_element + convert)


def _padded(n: int, step: int) -> Fraction:
    return Fraction(-(-n // step) * step, n)


def occupancy(task: Task, timing: Timing) -> Fraction:
    """How much more a task costs than its work says: the channels on lanes
    (a conv's output channels, a softmax's rows) padded to whole lanes, a
    conv's input channels to the cube's step at the width (1: full)."""
    if not task.channels:
        return Fraction(1)
    waste = _padded(task.channels, timing.lanes)
    step = timing.ic_chunk.get(task.element_bytes, 1)
    return waste * (_padded(task.inner, step) if task.inner else 1)
