"""TPU-MLIR's calibration table: the text file run_calibration writes and
model_deploy reads.

One tensor per line, `name threshold min max`, 7 decimals; `#` lines are
comments, except the markers that open the optional blocks TPU-MLIR and
MQBench add after the main one: `#int4_th` (same 4-column lines, INT4
thresholds), `#weight_scale` (`name N s1 .. sN`, per-channel weight scales
from QAT) and `#asym_op` (one op name per line). The writer follows
tpu-mlir 1.30.2 byte for byte except for the tool name in the first line;
the reader is strict so a damaged table fails here, naming the line,
instead of quantizing a layer with a wrong scale.

tpuc adds one block of its own, as comments TPU-MLIR skips: after the main
lines, `# int8_lossy name sqnr_db` for each tensor whose INT8 form loses
most on the calibration data (tpuc/workflow/calibration/int8_error.py), and
`# int8_float layer loss` for each layer the output-cosine growth kept in
float (tpuc/workflow/calibration/float_growth.py; loss: the 1 − cosine the
layer added in INT8), which model_deploy.py keeps in a float mode unless
--disable_auto_mix.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tpuc.base.errors import TpucError

INT4_MARKER = "#int4_th"
WEIGHT_SCALE_MARKER = "#weight_scale"
ASYM_OP_MARKER = "#asym_op"
# Blocks TPU-MLIR knows but tpuc does not use: reading past them as INT8
# thresholds would be wrong, so they are refused by name.
UNSUPPORTED_MARKERS = ("#int4_op", "#tpu-mlir-fp8", "#mqbench-fp8", "#weight_scale_fp8")
COLUMNS_LINE = "# op_name    threshold    min    max"
LOSSY_TAG = "int8_lossy"
LOSSY_HEADER = (
    "# tensors INT8 cannot hold on the calibration data (SQNR in dB); "
    "model_deploy.py keeps them in float unless --disable_auto_mix"
)


FLOAT_TAG = "int8_float"
FLOAT_HEADER = (
    "# layers kept in float for the network's FP32 vs INT8 output cosine (the 1 - cosine "
    "each added in INT8); model_deploy.py keeps them in float unless --disable_auto_mix"
)


@dataclass(frozen=True)
class CaliEntry:
    """One tensor's calibration: symmetric threshold and observed range."""

    threshold: float
    min: float
    max: float


@dataclass
class CaliTable:
    """A parsed table; `entries` keeps network order (the order of the file)."""

    entries: dict[str, CaliEntry] = field(default_factory=dict)
    weight_scales: dict[str, list[float]] = field(default_factory=dict)
    int4_thresholds: dict[str, CaliEntry] = field(default_factory=dict)
    asym_ops: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    lossy: dict[str, float] = field(default_factory=dict)  # tensor -> INT8 SQNR (dB)
    float_layers: dict[str, float] = field(default_factory=dict)  # layer -> loss it added

    def get(self, name: str) -> CaliEntry | None:
        return self.entries.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __len__(self) -> int:
        return len(self.entries)


# --- writing -----------------------------------------------------------------------


def format_table(
    table: CaliTable,
    *,
    mlir: str,
    methods: list[str],
    histogram_bins: int,
    samples: int,
    tune_num: int,
    generated: str | None = None,
    exact: bool = False,
) -> str:
    """The table as tpu-mlir 1.30.2 writes it. `generated` (a time) is only
    written when given, so two runs without it give identical bytes.
    `exact`: thresholds and ranges as the shortest text that reads back
    exactly instead of 7 decimals (a pre-quantized model's own scales: 7
    decimals move a 31-bit requant multiplier by up to ~10^-7 relative)."""
    lines = [f"# mlir version: tpuc {_version()}", f"# mlir: {os.path.basename(mlir)}"]
    if generated is not None:
        lines.append(f"# genetated time: {generated}")  # sic: TPU-MLIR's spelling
    lines += [
        f"# quantization threshold calculation method: {[str(m) for m in methods]}",
        f"# histogram number: {histogram_bins}",
        f"# sample number: {samples}",
        "###",
        f"# tune number: {tune_num}",
        "###",
        COLUMNS_LINE,
    ]
    lines += [_entry_line(name, entry, exact) for name, entry in table.entries.items()]
    if table.lossy:
        lines.append(LOSSY_HEADER)
        lines += [f"# {LOSSY_TAG} {_checked_name(n)} {db:.2f}" for n, db in table.lossy.items()]
    if table.float_layers:
        lines.append(FLOAT_HEADER)
        lines += [f"# {FLOAT_TAG} {_checked_name(n)} {loss:.6f}"
                  for n, loss in table.float_layers.items()]  # fmt: skip
    if table.int4_thresholds:
        lines.append(INT4_MARKER)
        lines += [_entry_line(name, entry) for name, entry in table.int4_thresholds.items()]
    if table.weight_scales:
        lines.append(WEIGHT_SCALE_MARKER)
        lines += [_scale_line(name, scales) for name, scales in table.weight_scales.items()]
    if table.asym_ops:
        lines.append(ASYM_OP_MARKER)
        lines += [_checked_name(name) for name in table.asym_ops]
    return "\n".join(lines) + "\n"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tpuc")
    except PackageNotFoundError:
        return "dev"


def _entry_line(name: str, entry: CaliEntry, exact: bool = False) -> str:
    problem = _entry_problem(entry)
    if problem:
        raise TpucError(f"calibration table: tensor '{name}': {problem}")
    text = _exact if exact else _fixed7
    values = " ".join(text(v) for v in (entry.threshold, entry.min, entry.max))
    return f"{_checked_name(name)} {values}"


def _scale_line(name: str, scales: list[float]) -> str:
    if not all(math.isfinite(s) for s in scales):
        raise TpucError(f"calibration table: weight '{name}' has a non-finite scale")
    # repr: shortest text that reads back exactly (small QAT scales need more than 7 decimals)
    return " ".join([_checked_name(name), str(len(scales)), *(repr(float(s)) for s in scales)])


def _exact(value: float) -> str:
    return repr(float(value) + 0.0)  # + 0.0: no "-0.0"


def _fixed7(value: float) -> str:
    text = f"{value:.7f}"
    return "0.0000000" if text == "-0.0000000" else text


def _checked_name(name: str) -> str:
    """A name the reader gets back: one non-empty token, not a comment."""
    if not name or name.split() != [name] or name.startswith("#"):
        raise TpucError(
            f"calibration table: tensor name {name!r} cannot be written "
            "(it is empty, contains whitespace or starts with '#')"
        )
    return name


def _entry_problem(entry: CaliEntry) -> str | None:
    """What makes an entry unusable (None if it is fine)."""
    for label, value in (("threshold", entry.threshold), ("min", entry.min), ("max", entry.max)):
        if not math.isfinite(value):
            return f"{label} is not finite"
    if entry.threshold <= 0:
        return "threshold must be positive"
    if entry.min > entry.max:
        return "min is larger than max"
    return None


# --- reading -----------------------------------------------------------------------


def read_table(path: str | os.PathLike[str]) -> CaliTable:
    """Parse the calibration table at `path`; unreadable files are TpucErrors."""
    source = str(path)
    if not Path(path).is_file():
        what = "is a folder, not a file" if Path(path).is_dir() else "no such file"
        raise TpucError(f"calibration table {source}: {what}")
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a BOM is not a name
    except UnicodeDecodeError:
        raise TpucError(f"calibration table {source}: not a text file") from None
    except OSError as exc:
        raise TpucError(f"calibration table {source}: cannot read it ({exc.strerror})") from None
    return parse_table(text, source)


class _Reader:
    """Parsing state: the table so far, the open block, where names were seen."""

    def __init__(self, source: str):
        self.source = source
        self.table = CaliTable()
        self.block = "main"
        self.seen: dict[tuple[str, str], int] = {}  # (block, name) -> line number

    def fail(self, lineno: int, line: str, problem: str) -> TpucError:
        return TpucError(f"{self.source}:{lineno}: {problem}: '{line}'")

    def remember(self, lineno: int, line: str, name: str) -> None:
        """Record `name` in the open block; a second occurrence is an error."""
        first = self.seen.setdefault((self.block, name), lineno)
        if first != lineno:
            where = "" if self.block == "main" else f" in the {_MARKER_OF[self.block]} block"
            raise self.fail(
                lineno, line, f"'{name}' is listed twice{where} (lines {first} and {lineno})"
            )


def parse_table(text: str, source: str) -> CaliTable:
    """Parse calibration table text; `source` names it in error messages."""
    reader = _Reader(source)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            _comment(reader, lineno, line)
        else:
            _LINE_PARSERS[reader.block](reader, lineno, line)
    return reader.table


def _comment(reader: _Reader, lineno: int, line: str) -> None:
    fields = line.split()
    token = fields[0]
    if len(fields) == 4 and token == "#" and fields[1] == LOSSY_TAG:
        reader.table.lossy[fields[2]] = _float(reader, lineno, line, "SQNR", fields[3])
    elif len(fields) == 4 and token == "#" and fields[1] == FLOAT_TAG:
        reader.table.float_layers[fields[2]] = _float(reader, lineno, line, "loss", fields[3])
    elif token in _BLOCK_OF:
        reader.block = _BLOCK_OF[token]
    elif token in UNSUPPORTED_MARKERS:
        raise reader.fail(lineno, line, f"the {token} block is not supported by tpuc")
    else:
        reader.table.header.append(line)


def _entry(reader: _Reader, lineno: int, line: str) -> CaliEntry:
    fields = line.split()
    if len(fields) != 4:
        raise reader.fail(
            lineno, line, f"expected 4 fields 'name threshold min max', got {len(fields)}"
        )
    values = [
        _float(reader, lineno, line, label, text)
        for label, text in zip(("threshold", "min", "max"), fields[1:], strict=True)
    ]
    entry = CaliEntry(*values)
    problem = _entry_problem(entry)
    if problem:
        raise reader.fail(lineno, line, problem)
    reader.remember(lineno, line, fields[0])
    return entry


def _float(reader: _Reader, lineno: int, line: str, label: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise reader.fail(lineno, line, f"{label} '{text}' is not a number") from None


def _main_line(reader: _Reader, lineno: int, line: str) -> None:
    reader.table.entries[line.split()[0]] = _entry(reader, lineno, line)


def _int4_line(reader: _Reader, lineno: int, line: str) -> None:
    reader.table.int4_thresholds[line.split()[0]] = _entry(reader, lineno, line)


def _weight_scale_line(reader: _Reader, lineno: int, line: str) -> None:
    """`name N s1 .. sN`; MQBench may append `M z1 .. zM` zero points
    (TPU-MLIR ignores them, and so does tpuc)."""
    name, *rest = line.split()
    count = _count(rest[0]) if rest else None
    if not count:
        raise reader.fail(lineno, line, "expected 'name N s1 .. sN' with a count N >= 1")
    scales, tail = rest[1 : 1 + count], rest[1 + count :]
    if len(scales) != count:
        got = len(scales)
        raise reader.fail(lineno, line, f"expected {count} scale(s) after the count, got {got}")
    if tail and len(tail) != 1 + (_count(tail[0]) or -1):
        raise reader.fail(
            lineno, line, f"expected {count} scale(s) after the count, got {len(rest) - 1}"
        )
    values = [_float(reader, lineno, line, "scale", text) for text in scales]
    if not all(math.isfinite(v) for v in values):
        raise reader.fail(lineno, line, "a scale is not finite")
    reader.remember(lineno, line, name)
    reader.table.weight_scales[name] = values


def _count(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _asym_op_line(reader: _Reader, lineno: int, line: str) -> None:
    fields = line.split()
    if len(fields) != 1:
        raise reader.fail(lineno, line, f"expected one op name, got {len(fields)} fields")
    reader.remember(lineno, line, fields[0])
    reader.table.asym_ops.append(fields[0])


_BLOCK_OF = {INT4_MARKER: "int4", WEIGHT_SCALE_MARKER: "weight_scale", ASYM_OP_MARKER: "asym_op"}
_MARKER_OF = {block: marker for marker, block in _BLOCK_OF.items()}
_LINE_PARSERS: dict[str, Callable[[_Reader, int, str], None]] = {
    "main": _main_line,
    "int4": _int4_line,
    "weight_scale": _weight_scale_line,
    "asym_op": _asym_op_line,
}
