"""tpuc-vendor: fetch and check the vendor libraries the native target needs.

Subcommands:
  fetch   download tpu-mlir from PyPI (or take --wheel), check its sha256 and
          unpack the backend, chip model, runtime and headers into the cache
  check   is the cache there and whole? (--verify: every file's sha256 too)
  path    the cache folder, whether or not it exists
Problems are one `error:` line on stderr and exit status 1.
"""

from __future__ import annotations

from pathlib import Path

from tpuc.base.errors import run_cli
from tpuc.target.vendor.fetch import VENDOR_VERSION, cache_dir, fetch, locate
from tpuc.tools.cli import add_command, make_parser

PROG = "tpuc-vendor"


def build_parser():
    parser = make_parser(
        PROG,
        f"Fetch and check SOPHGO's vendor libraries (tpu-mlir {VENDOR_VERSION}) for the "
        "native target.",
    )
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)
    get = add_command(
        sub,
        "fetch",
        "download, check and unpack the vendor libraries into the cache",
        f"Download tpu-mlir=={VENDOR_VERSION} from PyPI with pip (no dependencies, ~312 MB, "
        "once), check its sha256 and unpack only the BM1684X backend, chip model, runtime "
        "and headers into the cache. Does nothing when the cache is already valid.",
    )
    get.add_argument("--wheel", help="use this local tpu-mlir wheel instead of downloading")
    check = add_command(sub, "check", "check that the cache is present and whole")
    check.add_argument(
        "--verify", action="store_true", help="also check the sha256 of every file (slower)"
    )
    add_command(sub, "path", "print the cache folder")
    return parser


def run(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "fetch":
        fetch(Path(args.wheel) if args.wheel else None)  # it says what it did, and where
    elif args.command == "check":
        paths = locate(verify=args.verify)
        how = "verified" if args.verify else "sizes checked"
        print(f"tpu-mlir {VENDOR_VERSION} at {paths.root} ({how})")
    else:
        print(cache_dir())
    return 0


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
