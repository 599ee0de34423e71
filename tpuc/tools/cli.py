"""Argument parsing shared by the command-line tools.

Flag values use TPU-MLIR's spellings: shapes as `[[1,3,224,224],[1,10]]`,
lists as `a,b,c`. Parse failures are TpucErrors naming the flag, so every
tool reports them on one line. Nothing heavy is imported here: `--help`
must stay fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tpuc.base.errors import TpucError
from tpuc.base.flag_values import parse_floats, parse_ints, parse_list, parse_shapes


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


def existing_file(path: str, flag: str) -> Path:
    """`path` as a Path; a missing or non-regular file is a TpucError."""
    p = Path(path)
    if not p.exists():
        raise TpucError(f"{flag} {path}: no such file")
    if not p.is_file():
        raise TpucError(f"{flag} {path}: not a regular file")
    return p


__all__ = [
    "Parser",
    "add_command",
    "add_sample_flags",
    "check_sample_flags",
    "existing_file",
    "make_parser",
    "parse_floats",
    "parse_ints",
    "parse_list",
    "parse_shapes",
]
