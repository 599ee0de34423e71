"""When commands run: a timeline of the TIU and GDMA engines.

Each engine runs its own command stream in order; a command whose
`wait` names the other stream's n-th command (1-based, 0: none) starts only
after that command has finished — the sync ids of docs/isa.md. A command
(`Job`) is a sequence of phases, each on the engine of its task: a GDMA
move is one phase; a TIU command of a global layer is its load (GDMA), its
compute (TIU) and its store (GDMA), in that order. Commands are placed in
the order the simulator runs them (all ready TIU commands, then all ready
GDMA commands, repeated); each phase starts when its predecessor has ended
and its engine is free, and an engine never goes back to an earlier gap.
So two independent commands on different engines overlap (the total is the
longer one), a waiting one follows (the total is the sum).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tpuc.base.errors import TpucError
from tpuc.target.chips.timing import Timing
from tpuc.target.cost.cycles import ENGINE_GDMA, ENGINE_TIU, Task, cycles

STREAMS = (ENGINE_TIU, ENGINE_GDMA)


@dataclass(frozen=True)
class Phase:
    task: Task
    kind: str  # "load", "compute", "store", "move"


@dataclass(frozen=True)
class Job:
    """One command: its phases and what it waits for."""

    wait: int  # position (1-based) in the other stream that must have finished; 0: none
    phases: tuple[Phase, ...]
    tag: object = None  # the caller's description of the command (copied to its spans)


@dataclass(frozen=True)
class Span:
    """One phase placed in time (cycles, end exclusive)."""

    stream: str  # the stream that issued the command
    engine: str  # the engine that ran this phase
    kind: str
    task: Task
    start: int
    end: int
    tag: object = None

    @property
    def cycles(self) -> int:
        return self.end - self.start


@dataclass
class Timeline:
    start: int
    end: int
    spans: list[Span] = field(default_factory=list)

    @property
    def cycles(self) -> int:
        return self.end - self.start

    def busy(self, engine: str) -> int:
        """Cycles `engine` spends working (its spans never overlap)."""
        return sum(s.cycles for s in self.spans if s.engine == engine)


class _Engines:
    """Per engine: when it is next free; per stream: when each job ended."""

    def __init__(self, start: int):
        self.start = start
        self.free = dict.fromkeys(STREAMS, start)
        self.ended: dict[str, list[int]] = {s: [] for s in STREAMS}

    def ready(self, stream: str, other: str, job: Job) -> int:
        """Earliest start: the stream's previous job and the awaited job are done."""
        previous = self.ended[stream][-1] if self.ended[stream] else self.start
        awaited = self.ended[other][job.wait - 1] if job.wait else self.start
        return max(previous, awaited)

    def place(self, stream: str, other: str, job: Job, timing: Timing) -> list[Span]:
        spans, time = [], self.ready(stream, other, job)
        for phase in job.phases:
            engine = phase.task.engine
            begin = max(time, self.free[engine])
            time = self.free[engine] = begin + cycles(phase.task, timing)
            spans.append(Span(stream, engine, phase.kind, phase.task, begin, time, job.tag))
        self.ended[stream].append(time)
        return spans


def schedule(
    streams: Mapping[str, Sequence[Job]], timing: Timing, start: int = 0, what: str = "commands"
) -> Timeline:
    """Place both streams' jobs in time from cycle `start`; a one-line
    TpucError naming `what` when their waits can never be met."""
    engines = _Engines(start)
    queues = {s: list(streams.get(s, ())) for s in STREAMS}
    spans: list[Span] = []
    while any(len(engines.ended[s]) < len(queues[s]) for s in STREAMS):
        progressed = False
        for stream, other in ((ENGINE_TIU, ENGINE_GDMA), (ENGINE_GDMA, ENGINE_TIU)):
            queue, ended = queues[stream], engines.ended
            while len(ended[stream]) < len(queue):
                job = queue[len(ended[stream])]
                if job.wait > len(ended[other]):
                    break
                spans += engines.place(stream, other, job, timing)
                progressed = True
        if not progressed:
            raise TpucError(f"{what}: the TIU and GDMA streams wait for each other (deadlock)")
    end = max([start, *(s.end for s in spans)])
    return Timeline(start, end, spans)
