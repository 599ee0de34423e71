"""The worker side of `tpuc.target.vendor.worker`:
`python -m tpuc.target.vendor.serve KIND LIB_DIR`.

Keeps the message channel (the original stdout) to itself and points file
descriptor 1, where the vendor libraries print, at a log file in the
working directory. Each request names a method of the session object of
KIND; its result or its TpucError message goes back as ("ok", value) or
("error", message). A crash in the library simply ends the process: the
parent sees the channel close and reports it.
"""

from __future__ import annotations

import os
import sys

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


def main() -> None:
    kind, lib_dir = sys.argv[1], sys.argv[2]
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
