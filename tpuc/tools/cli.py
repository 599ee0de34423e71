"""Argument parsing shared by the command-line tools.

Flag values use TPU-MLIR's spellings: shapes as `[[1,3,224,224],[1,10]]`,
lists as `a,b,c`. Parse failures are TpucErrors naming the flag, so every
tool reports them on one line. Nothing heavy is imported here: `--help`
must stay fast.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from tpuc.errors import TpucError


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (exit status 1 like other failures)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(1, f"error: {self.prog}: {message} (see --help)\n")


def _formatter(prog: str) -> argparse.HelpFormatter:
    """Fixed width, so --help reads the same everywhere (and as docs/tools.md)."""
    return argparse.HelpFormatter(prog, width=100, max_help_position=34)


def make_parser(prog: str, description: str, epilog: str | None = None) -> Parser:
    return Parser(prog=prog, description=description, epilog=epilog, formatter_class=_formatter)


def add_command(subparsers, name: str, summary: str, description: str | None = None) -> Parser:
    """A subcommand parser with the tools' formatting."""
    return subparsers.add_parser(
        name, help=summary, description=description or summary, formatter_class=_formatter
    )


def add_sample_flags(parser: argparse.ArgumentParser, input_num: int) -> None:
    """--dataset / --data_list / --input_num, as every tool that runs samples has them."""
    parser.add_argument("--dataset", help="folder of samples: images, .npy or .npz")
    parser.add_argument(
        "--data_list", help="file listing one sample per line (comma-separated for several inputs)"
    )
    parser.add_argument(
        "--input_num",
        type=int,
        default=input_num,
        help=f"number of samples to use (0 = all; default {input_num})",
    )


def check_sample_flags(args) -> None:
    """Exactly one sample source, and a usable sample count."""
    if (args.dataset is None) == (args.data_list is None):
        raise TpucError("give exactly one of --dataset DIR and --data_list FILE")
    if args.input_num < 0:
        raise TpucError(f"--input_num {args.input_num}: must be 0 (all) or positive")


def parse_list(text: str | None) -> list[str]:
    """`"a, b,,c"` -> ["a", "b", "c"]; None -> []."""
    if not text:
        return []
    return [item.strip() for item in str(text).split(",") if item.strip()]


def parse_floats(text: str, flag: str) -> list[float]:
    try:
        return [float(v) for v in parse_list(text)]
    except ValueError:
        raise TpucError(f"{flag}: expected comma-separated numbers, got '{text}'") from None


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


def existing_file(path: str, flag: str) -> Path:
    """`path` as a Path; a missing or non-regular file is a TpucError."""
    p = Path(path)
    if not p.exists():
        raise TpucError(f"{flag} {path}: no such file")
    if not p.is_file():
        raise TpucError(f"{flag} {path}: not a regular file")
    return p
