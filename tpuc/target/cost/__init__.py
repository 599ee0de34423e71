"""tpuc's cycle model: how long commands take on a chip, and when they run.

`cycles` prices one task (a unit class, its work and element width, or a
DMA's bytes and direction) with the chip's `tpuc.target.chips.timing` figures;
`timeline` places the tasks of two command streams (TIU, GDMA) in time as
their sync ids allow. No IR and no instruction-set knowledge lives here:
an instruction set maps its commands onto `Task`s (tpuc/target/isa/units.py), so
a new instruction set reuses the model unchanged.
"""

from tpuc.target.cost.cycles import ENGINE_GDMA, ENGINE_TIU, Task, cycles
from tpuc.target.cost.timeline import Job, Phase, Span, Timeline, schedule

__all__ = [
    "ENGINE_GDMA",
    "ENGINE_TIU",
    "Job",
    "Phase",
    "Span",
    "Task",
    "Timeline",
    "cycles",
    "schedule",
]
