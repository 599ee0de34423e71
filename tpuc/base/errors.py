"""User-facing failures: one line, no traceback, non-zero exit.

Library code raises `TpucError` (or a subclass) with a message that names
the file, op or tensor at fault and what to do; `run_cli` turns it into a
single `error: ...` line on stderr and exit status 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


class TpucError(Exception):
    """Bad input or an unsupported model: the message is shown as is."""


class UnsupportedOpsError(TpucError):
    """Every unsupported op of a model, reported at once."""

    def __init__(self, source: str, ops: dict[str, list[str]]):
        self.ops = ops
        listed = "; ".join(
            f"{kind} ({', '.join(names[:3])}{', …' if len(names) > 3 else ''})"
            for kind, names in sorted(ops.items())
        )
        super().__init__(f"{source}: {len(ops)} unsupported op type(s): {listed}")


def run_cli(main: Callable[[], int | None]) -> None:
    """Run a tool's main; bad input ends with one line and exit status 1."""
    try:
        code = main()
    except TpucError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code or 0)
