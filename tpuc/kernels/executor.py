"""Execution resources the float kernels share while an interpreter runs:
threads for intra-op parallelism, and memory reused across ops and runs
(scratch buffers, recycled outputs, per-op plans).

Two ways to use the cores:

- BLAS threads each GEMM and everything else runs on the calling thread.
  OpenBLAS's threads spin between calls, so this is fastest on an idle
  machine. But it splits each GEMM statically and busy-waits for the slowest
  thread: when another process holds a core, every call stalls until the
  scheduler's next tick (4 ms) and a run gets several times slower.
- Kernel worker threads: BLAS is pinned to one thread and kernels cut their
  work into shards that the caller and the workers claim dynamically (a
  descheduled worker just takes fewer shards), memory-bound steps included.
  Waking a sleeping worker costs tens of microseconds, so on an idle machine
  this is a bit slower.

By default kernels use worker threads, as many as BLAS would have used
(or $TPUC_THREADS):
results must not depend on the machine's load, and the two settings do
not give bit-identical float results (threaded OpenBLAS splits a
matrix-vector product's sums differently from a single-threaded one, e.g.
a classifier's final MatMul), while any number of kernel threads does
(shards only split independent outputs, never a sum, and their shapes
depend on the work alone, never on the thread count: every shard is the
same BLAS call on any machine, and a 1-thread run computes the same shards
in turn). `threads=AUTO`
instead times the runs and keeps whichever setting has been faster lately,
trying the other one now and then (the load of a shared machine changes),
for callers that prefer speed to reproducible float sums.

Kernels call `current()`; outside `Executor.active()` (kernel unit tests, a
single kernel call) that is a sequential executor that leaves BLAS threading
alone and allocates fresh memory, so kernels behave as plain numpy code.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
from threadpoolctl import ThreadpoolController  # pins BLAS while our workers run

from tpuc.kernels.arena import Arena

Array = np.ndarray


# A shard should carry at least this many multiply-adds: below, handing it
# to a worker (tens of microseconds to wake one) costs more than it saves.
MIN_SHARD_WORK = 1 << 20
# At most this many shards per kernel call, whatever the thread count: shard
# shapes depend on the work alone, so results do not depend on the threads.
MAX_SHARDS = 16
# The environment variable that sets the default kernel thread count
# (otherwise BLAS's, i.e. OMP_NUM_THREADS / OPENBLAS_NUM_THREADS).
THREADS_ENV = "TPUC_THREADS"
# Padding buffers up to this size are kept per geometry (see `bordered`).
BORDERED_BYTES = 16 << 20
# With the thread setting chosen automatically, every this many runs use the
# setting that is not the current favourite, to notice a change of load.
PROBE_EVERY = 16
# `Executor(threads=AUTO)`: the thread setting chosen run by run, by speed.
AUTO = -1


class Executor:
    """Threads, scratch buffers, recycled memory and plans of one interpreter.

    `threads`: None uses $TPUC_THREADS kernel threads if set, else as many as
    BLAS has (see the module docstring), AUTO chooses per run, 0 lets BLAS thread the GEMMs, N >= 1
    runs kernels on N threads with BLAS pinned to one.
    """

    def __init__(self, threads: int | None = None, min_shard_work: int = MIN_SHARD_WORK):
        self.requested = threads
        self.threads = 1  # kernel threads of the current run
        self.min_shard_work = min_shard_work
        self._scratch = threading.local()
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._depth = 0
        self._chooser: SettingChooser | None = None
        self.arena: Arena | None = Arena()
        self._memo: dict = {}
        self._home = self  # whose worker pool runs the shards (see `sibling`)

    def sibling(self) -> Executor:
        """An executor on this one's memory and workers (arena, scratch
        buffers, thread pool) with plans of its own: for an interpreter that
        takes turns with this one's op by op (TopInterpreter.stream), so the
        two keep one working set between them, not two. Its plans go with it
        (they name the ops of its module). The two must never run at once."""
        other = Executor(self.requested, self.min_shard_work)
        other.arena, other._scratch, other._home = self.arena, self._scratch, self._home
        return other

    def release(self) -> None:
        """Let go of the memory kept for later runs (recycled buffers and
        scratch, on every thread), e.g. before other work needs it; plans
        stay. The next run allocates again what it uses."""
        if self.arena is not None:
            self.arena.release()
        self._scratch = threading.local()

    @contextmanager
    def active(self) -> Iterator[Executor]:
        """Make this the executor kernels see for one run (re-entrant)."""
        if self._depth:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        setting = self._setting()
        with _blas_pinned(setting) as threads:
            self.threads = threads
            _ACTIVE.stack.append(self)
            self._depth = 1
            start = time.perf_counter()
            try:
                yield self
                if self._chooser is not None:
                    self._chooser.record(setting, time.perf_counter() - start)
            finally:
                self._depth = 0
                _ACTIVE.stack.pop()
                self.threads = 1

    def _setting(self) -> int:
        """This run's `threads` setting (0: BLAS threads the GEMMs)."""
        if self.requested is None:  # BLAS pinned to one thread even then
            return max(1, env_threads() or blas_threads())
        if self.requested != AUTO:
            return self.requested
        if self._chooser is None:
            workers = blas_threads()
            self._chooser = SettingChooser([0, workers] if workers > 1 else [0])
        return self._chooser.next()

    def shards(self, work: int, limit: int) -> int:
        """How many shards to cut `work` multiply-adds into (at most `limit`).
        A function of the work alone, not of the thread count: BLAS may
        block a GEMM differently by its shape, so shards of the same shapes
        on 1, 2 or 16 threads give the same bytes (a thread claims shards
        dynamically: a slow one leaves the rest to others)."""
        by_work = max(1, work // max(1, self.min_shard_work))
        return max(1, min(limit, MAX_SHARDS, by_work))

    def parallel_for(self, count: int, task: Callable[[int], None]) -> None:
        """task(0..count-1), spread over the calling thread and the workers;
        returns once all are done (the first error is re-raised)."""
        if count <= 1 or self.threads == 1:
            for i in range(count):
                task(i)
            return
        claim = itertools.count().__next__  # atomic under the GIL

        def drain() -> None:
            for i in iter(claim, None):
                if i >= count:
                    return
                task(i)

        errors = np.geterr()  # numpy's error state is per thread: hand it on

        def helper() -> None:
            with np.errstate(**errors):
                drain()

        pool = self._workers()
        helpers: list[Future] = [pool.submit(helper) for _ in range(min(count, self.threads) - 1)]
        try:
            drain()
        finally:
            for f in helpers:
                f.exception()  # wait: workers may still write shared buffers
        for f in helpers:
            f.result()

    def memo(self, key, build: Callable[[], object]):
        """build(), computed once per key (e.g. a kernel's plan for an op and
        its input shapes: ops and shapes do not change between runs; plans
        do not depend on the thread count)."""
        value = self._memo.get(key)
        if value is None:
            value = self._memo[key] = build()
        return value

    def empty(self, shape: tuple[int, ...]) -> np.ndarray:
        """A fresh float32 array for a kernel's result (recycled memory)."""
        if self.arena is None:
            return np.empty(shape, np.float32)
        return self.arena.empty(shape)

    def output(self, shape: tuple[int, ...], args: Sequence, safe: Sequence[int] = (0,)) -> Array:
        """The array an elementwise kernel writes its result to: one of the
        operands args[i], i in `safe`, if the interpreter lets it be
        overwritten (see `Arena.output`), else `empty(shape)`."""
        if self.arena is None:
            return np.empty(shape, np.float32)
        return self.arena.output(shape, args, safe)

    def scratch(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """A float32 buffer of `shape`, private to the calling thread, whose
        memory is kept for the next call with the same name (contents are
        undefined; never return it from a kernel)."""
        size = math.prod(shape)
        buffers = self._thread_buffers()
        buf = buffers.get(name)
        if buf is None or buf.size < size:
            buf = np.empty(size, np.float32)
            buffers[name] = buf
        return buf[:size].reshape(shape)

    def bordered(self, key, shape: tuple[int, ...], value: float) -> tuple[np.ndarray, bool]:
        """A padding buffer of `shape` for `key` (the padding geometry) and
        whether its border still holds `value`: the buffer is kept per key and
        shape, so a caller that writes only the interior fills the border
        once. Large buffers are shared scratch instead (border not clean)."""
        size = math.prod(shape)
        if 4 * size > BORDERED_BYTES:
            return self.scratch("bordered", shape), False
        buffers = self._thread_buffers()
        name = ("bordered", key, shape, value)
        buf = buffers.get(name)
        if buf is None:
            buf = buffers[name] = np.full(shape, value, np.float32)
        return buf, True

    def _thread_buffers(self) -> dict:
        buffers = getattr(self._scratch, "buffers", None)
        if buffers is None:
            buffers = self._scratch.buffers = {}
        return buffers

    def _workers(self) -> ThreadPoolExecutor:
        home = self._home
        if home._pool is None or home._pool_size < self.threads - 1:
            if home._pool is not None:
                home._pool.shutdown(wait=False)
            home._pool_size = self.threads - 1
            home._pool = ThreadPoolExecutor(home._pool_size, thread_name_prefix="tpuc-kernel")
        return home._pool


class _Sequential(Executor):
    """The executor outside any interpreter: one thread, fresh memory."""

    def __init__(self):
        super().__init__(threads=0)
        self.arena = None

    def memo(self, key, build: Callable[[], object]):
        return build()

    def bordered(self, key, shape: tuple[int, ...], value: float) -> tuple[np.ndarray, bool]:
        return np.empty(shape, np.float32), False

    def scratch(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        return np.empty(shape, np.float32)


SEQUENTIAL = _Sequential()


class _ActiveExecutor(threading.local):
    """The executors of the current thread's interpreter runs (a stack)."""

    def __init__(self):
        self.stack: list[Executor] = []


_ACTIVE = _ActiveExecutor()


def current() -> Executor:
    """The active executor (worker threads see the one their shard came from
    through the closure, not through this)."""
    stack = _ACTIVE.stack
    return stack[-1] if stack else SEQUENTIAL


_CONTROLLER = None
_CONTROLLER_LOCK = threading.Lock()


class SettingChooser:
    """Picks each run's thread setting among `candidates` (the first is the
    default). A setting's first run warms its plans and memory up and is not
    counted; its score is then the best of its last RECENT times (load only
    slows runs down, so the best time is the least noisy). The best-scoring
    setting runs, except for probes of the runner-up: every PROBE_EVERY-th
    run, and right after a run SLOWER times slower than its setting's best
    (the load changed: that setting's history restarts from this run). A
    probe that only warmed a setting up is followed by a counted one."""

    RECENT = 3
    SLOWER = 1.5

    def __init__(self, candidates: list[int]):
        self.candidates = candidates
        self.runs = dict.fromkeys(candidates, 0)
        self.recent: dict[int, list[float]] = {c: [] for c in candidates}
        self.best: dict[int, float] = {}
        self.count = 0
        self.probe = False

    def next(self) -> int:
        if len(self.candidates) == 1:
            return self.candidates[0]
        self.count += 1
        warmed = [c for c in self.candidates if self.runs[c] == 1]
        if warmed:
            return warmed[0]
        favourite, runner_up = sorted(self.candidates, key=self._score)[:2]
        probe, self.probe = self.probe or self.count % PROBE_EVERY == 0, False
        return runner_up if probe else favourite

    def _score(self, candidate: int) -> tuple[int, float]:
        """Timed settings first, by their best recent time; then the default,
        then the rest in order."""
        recent = self.recent[candidate]
        if recent:
            return (0, min(recent))
        return (1, float(self.candidates.index(candidate)))

    def record(self, candidate: int, seconds: float) -> None:
        self.runs[candidate] += 1
        if self.runs[candidate] == 1:
            return
        if seconds > self.SLOWER * self.best.get(candidate, seconds):
            self.recent[candidate], self.best[candidate] = [], seconds
            self.probe = True
        self.recent[candidate] = [*self.recent[candidate], seconds][-self.RECENT :]
        self.best[candidate] = min(self.best.get(candidate, seconds), seconds)


@contextmanager
def _blas_pinned(threads: int) -> Iterator[int]:
    """For `threads` >= 1 kernel threads, BLAS limited to one thread; yields
    the number of threads kernels may use (1 when BLAS threads the GEMMs or
    cannot be controlled: kernels then run sequentially)."""
    blas = _blas() if threads else None
    if blas is None:
        yield 1
        return
    with blas.limit(limits=1):
        yield threads


def env_threads() -> int:
    """The kernel thread count $TPUC_THREADS asks for (0: unset or invalid,
    which leaves the choice to BLAS's setting)."""
    text = os.environ.get(THREADS_ENV, "").strip()
    if not text.isdigit():
        return 0
    return min(int(text), 256)


def blas_threads() -> int:
    """The thread count BLAS is set to use (0 if it cannot be controlled)."""
    blas = _blas()
    if blas is None:
        return 0
    return max((lib.get_num_threads() or 0 for lib in blas.lib_controllers), default=0)


def _blas():
    blas = _controller().select(user_api="blas")
    return blas if blas.lib_controllers else None


def _controller():
    global _CONTROLLER
    with _CONTROLLER_LOCK:
        if _CONTROLLER is None:
            _CONTROLLER = ThreadpoolController()
        return _CONTROLLER
