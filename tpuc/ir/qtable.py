"""TPU-MLIR's quantize table (qtable): one `layer_name MODE` per line.

model_deploy.py --quantize_table and run_qtable.py share this format;
`#` starts a comment. Every problem is reported with its line, and layers
the module does not have are listed together.
"""

from __future__ import annotations

import os

from xdsl.dialects.builtin import ModuleOp

from tpuc.base.errors import TpucError
from tpuc.target.chips import MODES

MAX_LISTED = 5


def parse_qtable(text: str, source: str) -> dict[str, str]:
    """layer name -> mode, from the table's text."""
    table: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2:
            raise TpucError(f"{source}:{number}: expected 'layer_name MODE', got '{raw.strip()}'")
        name, mode = fields[0], fields[1].upper()
        if mode not in MODES:
            raise TpucError(
                f"{source}:{number}: unknown mode '{fields[1]}' for {name} "
                f"(known: {', '.join(MODES)})"
            )
        if name in table and table[name] != mode:
            raise TpucError(f"{source}:{number}: {name} is listed twice with different modes")
        table[name] = mode
    return table


def format_qtable(modes: dict[str, str], header: list[str] | None = None) -> str:
    """The qtable text for `modes` (header lines are written as comments)."""
    lines = [f"# {h}" for h in header or []]
    if header:
        lines.append("###")
    lines.append("# op_name   quantize_mode")
    lines.extend(f"{name} {mode}" for name, mode in modes.items())
    return "\n".join(lines) + "\n"


def read_qtable(path: str | os.PathLike[str], module: ModuleOp | None = None) -> dict[str, str]:
    """The table at `path`; with `module`, every layer must be one of its ops."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise TpucError(f"cannot read quantize table {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise TpucError(f"{path}: not a text quantize table") from exc
    table = parse_qtable(text, str(path))
    if module is not None:
        _check_layers(table, module, str(path))
    return table


def _check_layers(table: dict[str, str], module: ModuleOp, source: str) -> None:
    from tpuc.dialects import top
    from tpuc.dialects.base import TensorOp

    known = {
        name
        for op in module.walk()
        if isinstance(op, TensorOp) and not isinstance(op, top.WeightOp | top.InputOp)
        for name in op.names
    }
    missing = [name for name in table if name not in known]
    if missing:
        listed = ", ".join(missing[:MAX_LISTED]) + (", …" if len(missing) > MAX_LISTED else "")
        raise TpucError(
            f"{source}: {len(missing)} layer(s) not in the module ({listed}); "
            "is the table from another model?"
        )
