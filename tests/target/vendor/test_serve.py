"""The vendor worker ends with its parent, even while it is busy in C."""

from __future__ import annotations

import os
import subprocess
import sys
import time

# The "worker": a process that watches its parent, then blocks in a call that
# lets go of the GIL (time.sleep, as a ctypes call into the vendor library does).
_GRANDCHILD = (
    "import time; from tpuc.target.vendor.serve import watch_parent;"
    "watch_parent(0.1); time.sleep(60)"
)
# Its "parent": starts it, says its pid, then waits to be killed.
_CHILD = (
    "import subprocess, sys, time;"
    f"p = subprocess.Popen([sys.executable, '-c', {_GRANDCHILD!r}]);"
    "print(p.pid, flush=True); time.sleep(60)"
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose: it no longer runs
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ")[1][0] != "Z"


def test_busy_worker_ends_when_its_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, text=True)
    worker = int(parent.stdout.readline())
    time.sleep(1.0)  # the worker is importing tpuc and then sleeping
    assert _alive(worker)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _alive(worker)
    if alive:
        os.kill(worker, 9)
    assert not alive, "the worker outlived its parent"
