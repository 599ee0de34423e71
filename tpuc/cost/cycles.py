"""Cycles of one task on one engine.

A compute task costs the chip's fixed TIU issue cycles plus its ops divided
by the unit's peak ops per cycle for its element width (rounded up); a DMA
task costs the fixed GDMA latency plus its bytes divided by the bandwidth of
its direction. Throughput only: lane occupancy, IC parallelism and bank
conflicts are not modelled (a task is assumed to use the unit fully).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tpuc.chips.timing import Direction, Timing, Unit

ENGINE_TIU, ENGINE_GDMA = "TIU", "GDMA"

OPS_PER_WORK = {Unit.CONV: 2, Unit.MATMUL: 2}
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

    @property
    def engine(self) -> str:
        return ENGINE_GDMA if self.unit is Unit.DMA else ENGINE_TIU


def cycles(task: Task, timing: Timing) -> int:
    """Cycles `task` keeps its engine busy on a chip with `timing`."""
    if task.unit is Unit.DMA:
        if task.direction is None:
            raise ValueError("a DMA task needs a direction")
        return timing.gdma_latency_cycles + math.ceil(task.work / timing.dma[task.direction])
    ops = task.work * OPS_PER_WORK.get(task.unit, 1)
    if task.unit is Unit.SFU:
        ops *= timing.sfu_ops_per_element
    return timing.tiu_issue_cycles + math.ceil(ops / timing.rate(task.unit, task.element_bytes))
