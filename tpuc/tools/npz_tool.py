"""npz_tool.py: inspect, compare and edit the .npz tensor files of a compile.

Subcommands (TPU-MLIR's names):
  dump      name, shape, dtype, min/max/mean of each tensor (values with -v
            or when keys are named)
  compare   judge a target file against a reference, tensor by tensor
  get_shape shape of one tensor (or of all)
  rename    copy a file with one tensor renamed
  extract   copy a file keeping only some tensors
  to_dat    raw little-endian bytes of the tensors, one after the other
  quant_input  the inputs as a bmodel built with --quant_input takes them
            (tpuc's own subcommand: TPU-MLIR's model_runner does it in memory)
No subcommand ever rewrites its input file.
"""

from __future__ import annotations

import sys

from tpuc.base.errors import TpucError, run_cli
from tpuc.tools.cli import add_command, make_parser, parse_list

PROG = "npz_tool.py"


def build_parser():
    parser = make_parser(PROG, "Inspect, compare and edit .npz tensor files.")
    sub = parser.add_subparsers(dest="command", metavar="command", required=True)

    dump = add_command(sub, "dump", "show the tensors of an npz file")
    dump.add_argument("npz", help="the .npz file")
    dump.add_argument("keys", nargs="*", help="only these tensors (their values are printed)")
    dump.add_argument("-v", "--verbose", action="count", default=0, help="print values too")

    cmp = add_command(
        sub,
        "compare",
        "compare a target npz against a reference npz",
        "Compare the tensors present in both files. Per tensor: EQUAL, CLOSE "
        "(allclose at rtol 1e-5/1e-4/1e-3), SIMILAR (cosine and euclidean similarity above "
        "--tolerance) or NOT_SIMILAR; NOT_MATCH when sizes differ. Exit status 1 on failure.",
    )
    cmp.add_argument("target", help="the npz under test")
    cmp.add_argument("reference", help="the reference npz")
    cmp.add_argument(
        "--tolerance", default="0.99,0.99", help="minimum cosine,euclid similarity (0.99,0.99)"
    )
    cmp.add_argument("--excepts", default="", help="comma-separated tensor names to skip")
    cmp.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="-v: one line per tensor; -vv: also shapes and, for failures, the largest error",
    )

    shape = add_command(sub, "get_shape", "print the shape of a tensor")
    shape.add_argument("npz", help="the .npz file")
    shape.add_argument("key", nargs="?", help="tensor name (default: every tensor)")

    rename = add_command(sub, "rename", "write a copy with one tensor renamed")
    rename.add_argument("npz", help="the .npz file (left unchanged)")
    rename.add_argument("old", help="current tensor name")
    rename.add_argument("new", help="new tensor name")
    rename.add_argument("-o", "--output", required=True, help="the new .npz file")

    extract = add_command(sub, "extract", "write a copy with only some tensors")
    extract.add_argument("npz", help="the .npz file (left unchanged)")
    extract.add_argument("keys", help="comma-separated tensor names to keep")
    extract.add_argument("-o", "--output", required=True, help="the new .npz file")

    to_dat = add_command(sub, "to_dat", "write the tensors' raw bytes to a .dat file")
    to_dat.add_argument("npz", help="the .npz file")
    to_dat.add_argument("-o", "--output", required=True, help="the .dat file")

    quant = add_command(
        sub,
        "quant_input",
        "write the inputs as a bmodel stores them (int8/uint8 for --quant_input)",
        "Each tensor named after a bmodel input is written as that input stores it: for an "
        "int8/uint8 input (model_deploy.py --quant_input) round(x * (1/S)) + Z, clamped, with "
        "the chip's rounding (half away from zero), S and Z from the bmodel (its input scale "
        "holds 1/S, as in TPU-MLIR); f16/bf16 inputs rounded; other tensors copied. "
        "model_runner.py does the same to a float input by itself.",
    )
    quant.add_argument("npz", help="the real-valued input .npz (left unchanged)")
    quant.add_argument("model", help="the .bmodel (tpuc's own or native)")
    quant.add_argument("-o", "--output", required=True, help="the new .npz file")
    return parser


# --- subcommands ----------------------------------------------------------------


def _pick(data, keys, source):
    missing = [k for k in keys if k not in data]
    if missing:
        raise TpucError(f"{source}: no tensor named {', '.join(repr(k) for k in missing)}")
    return {k: data[k] for k in keys}


def _stats(array) -> str:
    import numpy as np

    if array.size == 0 or not (
        np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.bool_)
    ):
        return ""
    values = array.astype(np.float64)
    return f"  min {values.min():.6g}  max {values.max():.6g}  mean {values.mean():.6g}"


def cmd_dump(args) -> int:
    import numpy as np

    from tpuc.base.files import load_npz

    data = load_npz(args.npz)
    chosen = _pick(data, args.keys, args.npz) if args.keys else data
    show_values = bool(args.keys) or args.verbose > 0
    options = {"threshold": sys.maxsize} if args.verbose > 1 else {}
    for name, array in chosen.items():
        print(f"{name}  {list(array.shape)}  {array.dtype}{_stats(array)}")
        if show_values:
            print(np.array2string(array, **options))
    if not args.keys:
        print(f"{len(data)} tensor(s) in {args.npz}")
    return 0


def cmd_compare(args) -> int:
    from tpuc.base.compare import Tolerance, compare_arrays
    from tpuc.base.files import load_npz

    tolerance = Tolerance.parse(args.tolerance)
    target, ref = load_npz(args.target), load_npz(args.reference)
    excepts = parse_list(args.excepts)
    common = [n for n in target if n in ref and n not in excepts]
    for data, path in ((target, args.target), (ref, args.reference)):
        _check_numeric(data, path, common)
    result = compare_arrays(target, ref, tolerance, excepts=excepts)
    print_compare(result, target, ref, args.verbose)
    print(f"Target    {args.target}")
    print(f"Reference {args.reference}")
    if not result.rows:
        print("npz compare FAILED: no tensor name is in both files.")
        return 1
    if result.passed:
        print("npz compare PASSED.")
        return 0
    first = result.failures[0]
    print(f"npz compare FAILED: first failing tensor '{first.name}' ({first.verdict.value}).")
    return 1


def _check_numeric(data, path: str, names) -> None:
    """Tensors to compare hold real numbers (strings have no similarity)."""
    for name in names:
        kind = data[name].dtype.kind
        if kind not in "biuf":
            what = "strings" if kind in "OSU" else f"{data[name].dtype} values"
            raise TpucError(
                f"{path}: tensor '{name}' holds {what}; only real numbers can be compared "
                "(leave it out with --excepts)"
            )


def print_compare(result, target, ref, verbose: int) -> None:
    """Per-tensor lines (verbose >= 1), details (>= 2), then the summary."""
    width = max([32] + [len(r.name) for r in result.rows])
    for row in result.rows if verbose > 0 else ():
        print(row.line(width))
        if verbose > 1:
            print(f"    {list(row.shape)} {row.dtype}")
            if not row.passed and row.verdict.value != "NOT_MATCH":
                print(f"    {_largest_error(target[row.name], ref[row.name])}")
    for line in result.summary_lines():
        print(line)


def _largest_error(target, ref) -> str:
    import numpy as np

    a = np.asarray(target, dtype=np.float64).reshape(-1)
    b = np.asarray(ref, dtype=np.float64).reshape(-1)
    index = int(np.nanargmax(np.abs(a - b)))
    return (
        f"largest error at flat index {index}: target {a[index]:.6g}, reference {b[index]:.6g}; "
        f"max |ref| {np.nanmax(np.abs(b)):.6g}"
    )


def cmd_get_shape(args) -> int:
    from tpuc.base.files import load_npz

    data = load_npz(args.npz)
    if args.key is not None:
        print(list(_pick(data, [args.key], args.npz)[args.key].shape))
        return 0
    for name, array in data.items():
        print(f"{name} {list(array.shape)}")
    return 0


def cmd_rename(args) -> int:
    from tpuc.base.files import OutputSet, load_npz

    data = load_npz(args.npz)
    _pick(data, [args.old], args.npz)
    if args.new != args.old and args.new in data:
        raise TpucError(f"{args.npz}: a tensor named '{args.new}' already exists")
    renamed = {(args.new if k == args.old else k): v for k, v in data.items()}
    with OutputSet(protected=(args.npz,)) as out:
        out.save_npz(args.output, renamed)
    print(f"wrote {args.output}")
    return 0


def cmd_extract(args) -> int:
    from tpuc.base.files import OutputSet, load_npz

    keys = parse_list(args.keys)
    if not keys:
        raise TpucError("extract: give the tensor names to keep, comma-separated")
    data = load_npz(args.npz)
    with OutputSet(protected=(args.npz,)) as out:
        out.save_npz(args.output, _pick(data, keys, args.npz))
    print(f"wrote {args.output} ({len(keys)} tensor(s))")
    return 0


def cmd_to_dat(args) -> int:
    import numpy as np

    from tpuc.base.files import OutputSet, load_npz

    data = load_npz(args.npz)
    blob = b"".join(
        np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes() for a in data.values()
    )
    with OutputSet(protected=(args.npz,)) as out:
        out.write_bytes(args.output, blob)
    print(f"wrote {args.output} ({len(blob)} bytes)")
    return 0


def cmd_quant_input(args) -> int:
    import numpy as np

    from tpuc.base.files import OutputSet, load_npz
    from tpuc.target.vendor.run import bmodel_inputs, to_device
    from tpuc.tools.cli import existing_file

    existing_file(args.model, "model")
    descs = {d.name: d for d in bmodel_inputs(args.model)}
    data = load_npz(args.npz)
    missing = [name for name in descs if name not in data]
    if missing:
        raise TpucError(f"{args.npz}: no tensor for the bmodel input(s) {', '.join(missing)}")
    converted = {}
    for name, array in data.items():
        desc = descs.get(name)
        if desc is not None and int(np.prod(array.shape)) != int(np.prod(desc.shape)):
            raise TpucError(
                f"{args.npz}: tensor '{name}' has shape {list(array.shape)}, the bmodel's "
                f"input {list(desc.shape)}"
            )
        converted[name] = array if desc is None else to_device(desc, array)
    with OutputSet(protected=(args.npz, args.model)) as out:
        out.save_npz(args.output, converted)
    kinds = ", ".join(f"{n} {converted[n].dtype}" for n in descs)
    print(f"wrote {args.output} ({kinds})")
    return 0


COMMANDS = {
    "dump": cmd_dump,
    "compare": cmd_compare,
    "get_shape": cmd_get_shape,
    "rename": cmd_rename,
    "extract": cmd_extract,
    "to_dat": cmd_to_dat,
    "quant_input": cmd_quant_input,
}


def run(argv: list[str] | None = None) -> int:
    """The tool without the exit handling (for tests and scripts)."""
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command](args)


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
