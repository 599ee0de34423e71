"""Vendor libraries in a worker process, so that they cannot take tpuc down.

The backend library and the runtime keep process-wide state, print to
stdout, write files into the working directory and kill their process on a
bad call (SIGFPE, abort). `Worker` starts `python -m tpuc.target.vendor.serve KIND`
in a private temporary directory and talks to it over its stdin/stdout with
length-prefixed pickles; the server moves the libraries' own prints away
from that channel into a log. A request that kills the worker raises one
TpucError naming what was being done (`what`, e.g. the op) and how the
process ended, with the library's last printed line.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tpuc.base.errors import TpucError

_LENGTH = struct.Struct("<Q")
# the line of the library's log that says what went wrong (not a stack frame)
_TELLING = re.compile(r"assert|error|fatal|abort|fail|check", re.IGNORECASE)
LOG_NAME = "vendor.log"


def write_frame(stream, value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def read_frame(stream) -> Any:
    """The next message, or EOFError when the other side is gone."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError
    (size,) = _LENGTH.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


def _ending(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


class Worker:
    """A server process of one kind ("backend" or "runtime") over `lib_dir`."""

    def __init__(self, kind: str, lib_dir: Path, label: str):
        self.kind = kind
        self.label = label  # how errors name the component, e.g. "vendor backend"
        self.workdir = tempfile.TemporaryDirectory(prefix=f"tpuc-{kind}-")
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(lib_dir), env.get("LD_LIBRARY_PATH", "")) if p
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tpuc.target.vendor.serve", kind, str(lib_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.workdir.name,
            env=env,
        )

    def call(self, what: str, method: str, *args: Any) -> Any:
        """`method(*args)` in the worker; `what` names the work for errors."""
        if self.process.poll() is not None:
            raise TpucError(f"{self.label} is not running ({_ending(self.process.returncode)})")
        try:
            write_frame(self.process.stdin, (method, args))
            status, value = read_frame(self.process.stdout)
        except (EOFError, BrokenPipeError, OSError):
            raise self._crashed(what) from None
        if status == "error":
            last = self.last_log_line()
            said = f" (it printed: {last})" if last else ""
            raise TpucError(f"{self.label}: {what}: {value}{said}")
        return value

    def _crashed(self, what: str) -> TpucError:
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = None
        last = self.last_log_line()
        said = f"; it last printed: {last}" if last else ""
        return TpucError(f"{self.label} crashed on {what}: the worker {_ending(code)}{said}")

    def last_log_line(self) -> str:
        try:
            lines = (Path(self.workdir.name) / LOG_NAME).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        lines = [line.strip() for line in lines if line.strip()]
        telling = [line for line in lines if _TELLING.search(line) and "0x" not in line[:20]]
        chosen = telling[-1] if telling else (lines[-1] if lines else "")
        return chosen[:240]

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                write_frame(self.process.stdin, ("quit", ()))
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        self.workdir.cleanup()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["LOG_NAME", "Worker", "read_frame", "write_frame"]
