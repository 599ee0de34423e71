"""TPU-MLIR's spellings of list values: `a,b,c` and `[[1,3,224,224],[1,10]]`.

The tools parse their flags with these, and the library parses the same
spellings when it rebuilds settings from them (e.g. the preprocessing a
model was transformed with). Failures are TpucErrors naming the flag.
"""

from __future__ import annotations

import ast
import math

from tpuc.base.errors import TpucError


def parse_list(text: str | None) -> list[str]:
    """`"a, b,,c"` -> ["a", "b", "c"]; None -> []."""
    if not text:
        return []
    return [item.strip() for item in str(text).split(",") if item.strip()]


def parse_floats(text: str, flag: str) -> list[float]:
    """`"1,2.5"` -> [1.0, 2.5]; nan and inf are refused (Python's float()
    reads them, and a NaN mean or scale turns every input into NaN)."""
    try:
        values = [float(v) for v in parse_list(text)]
    except ValueError:
        values = [math.nan]
    if not all(math.isfinite(v) for v in values):
        raise TpucError(f"{flag}: expected comma-separated finite numbers, got '{text}'")
    return values


def parse_ints(text: str, flag: str, count: int | None = None) -> list[int]:
    try:
        values = [int(v) for v in parse_list(text)]
    except ValueError:
        values = []
    if not values or (count is not None and len(values) != count):
        what = f"{count} comma-separated integers" if count else "comma-separated integers"
        raise TpucError(f"{flag}: expected {what}, got '{text}'")
    return values


def parse_shapes(text: str | None, flag: str = "--input_shapes") -> list[list[int]] | None:
    """`[[1,3,224,224],[1,10]]` (or a single `[1,3,224,224]`) -> list of shapes."""
    if text is None or not str(text).strip():
        return None
    try:
        value = ast.literal_eval(str(text).strip())
    except (ValueError, SyntaxError):
        value = None
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
        value = [value]
    ok = isinstance(value, (list, tuple)) and len(value) > 0
    ok = ok and all(
        isinstance(s, (list, tuple)) and all(isinstance(d, int) and d > 0 for d in s) for s in value
    )
    if not ok:
        raise TpucError(f"{flag}: expected positive dims like [[1,3,224,224],[1,10]], got '{text}'")
    return [list(s) for s in value]
