"""model_deploy's progress output: one flushed line per step and the wall
time of each step, printed at the end."""

from __future__ import annotations

import time

PROG = "model_deploy.py"


def say(message: str) -> None:
    """One progress line, flushed so it shows before a long step runs."""
    print(f"[{PROG}] {message}", flush=True)


class Stages:
    """Wall time of each step, printed at the end."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._start = time.perf_counter()
        self._last = self._start

    def done(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = self.timings.get(stage, 0.0) + now - self._last
        self._last = now

    def add(self, timings: dict[str, float]) -> None:
        """Stages timed elsewhere, up to now."""
        for stage, seconds in timings.items():
            self.timings[stage] = self.timings.get(stage, 0.0) + seconds
        self._last = time.perf_counter()

    def line(self) -> str:
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in self.timings.items())
        return f"{time.perf_counter() - self._start:.2f} s: {parts}"
