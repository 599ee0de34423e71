"""The worker side of `tpuc.target.vendor.worker`:
`python -m tpuc.target.vendor.serve KIND LIB_DIR`.

Keeps the message channel (the original stdout) to itself and points file
descriptor 1, where the vendor libraries print, at a log file in the
working directory. Each request names a method of the session object of
KIND; its result or its TpucError message goes back as ("ok", value) or
("error", message). A crash in the library simply ends the process: the
parent sees the channel close and reports it. A parent that dies ends the
worker too, even in the middle of a long vendor call (`watch_parent`).
"""

from __future__ import annotations

import os
import sys
import threading
import time

from tpuc.base.errors import TpucError
from tpuc.target.vendor.worker import LOG_NAME, read_frame, write_frame


def _session(kind: str, lib_dir: str):
    if kind == "backend":
        from tpuc.target.vendor.backend import BackendSession

        return BackendSession(lib_dir)
    if kind == "runtime":
        from tpuc.target.vendor.runtime import RuntimeSession

        return RuntimeSession(lib_dir)
    raise SystemExit(f"unknown worker kind {kind}")


def watch_parent(period: float = 1.0) -> threading.Thread:
    """End this process when its parent is gone. A vendor call can run for
    minutes in C (ctypes lets go of the GIL meanwhile), and the closed
    channel is only seen between calls: without this a killed model_deploy
    left its worker computing for the rest of the model."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period)
        os._exit(1)

    thread = threading.Thread(target=watch, name="tpuc-parent-watch", daemon=True)
    thread.start()
    return thread


def main() -> None:
    kind, lib_dir = sys.argv[1], sys.argv[2]
    watch_parent()
    channel_out = os.fdopen(os.dup(1), "wb")
    channel_in = os.fdopen(os.dup(0), "rb")
    log = os.open(LOG_NAME, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - the process's own stdout
    session = None
    while True:
        try:
            method, args = read_frame(channel_in)
        except EOFError:
            return
        if method == "quit":
            if session is not None:
                session.close()
            write_frame(channel_out, ("ok", None))
            return
        try:
            session = session or _session(kind, lib_dir)
            reply = ("ok", getattr(session, method)(*args))
        except TpucError as exc:
            reply = ("error", str(exc))
        write_frame(channel_out, reply)


if __name__ == "__main__":
    main()
