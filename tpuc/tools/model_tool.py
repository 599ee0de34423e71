"""model_tool.py: inspect, combine, split and edit bmodel files.

TPU-MLIR's model_tool, with its flags and output: `--info`, `--chip`,
`--print`, `--weight`, `--extract`, `--combine a b -o c`, `--dump FILE START
SIZE OUT`, `--kernel_dump`, `--kernel_update`, `--kernel_remove`. It reads
tpuc's own bmodels and native ones (the chip's command streams, read with
the vendor component's schema) alike.

Combine is written here, in Python over the schema (tpuc.target.bmodel.combine),
not delegated to the vendor's model_tool binary: that binary cannot read
tpuc's own bmodels, needs a library from the wheel's bundled third_party
folder (libomp.so.5) that the vendor fetch never unpacks, writes its output
in place (half a file when it fails) and ends on an error with a C
assert. The vendor binary remains a good cross-check: it reads the native
files written here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tpuc.base.errors import TpucError, run_cli
from tpuc.tools.cli import make_parser

PROG = "model_tool.py"


def build_parser():
    parser = make_parser(
        PROG,
        "Inspect, combine, split and edit bmodel files (tpuc's own and native ones).",
        "Output files are written to a temporary name and renamed when complete; an input "
        "is never overwritten (also not through a hard link), except by --kernel_update and "
        "--kernel_remove without -o, which edit the given bmodel as TPU-MLIR's do. Native "
        "bmodels are read with the vendor component's schema (`tpuc-vendor fetch` once).",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--info", metavar="FILE", help="nets, stages, inputs/outputs, memory sizes")
    mode.add_argument("--chip", metavar="FILE", help="the chip the bmodel is for")
    mode.add_argument("--print", metavar="FILE", help="every field of the bmodel as JSON")
    mode.add_argument("--weight", metavar="FILE", help="each stage's weights in its coefficients")
    mode.add_argument(
        "--extract", metavar="FILE", help="one bmodel per net and stage: bm_net<N>_stage<S>.bmodel"
    )
    mode.add_argument(
        "--combine",
        metavar="FILE",
        nargs="+",
        help="combine bmodels into one (-o, default bm_combined.bmodel): nets by name, a net's "
        "versions for other input shapes as its stages",
    )
    mode.add_argument(
        "--dump",
        nargs=4,
        metavar=("FILE", "START", "SIZE", "OUT"),
        help="save SIZE bytes of the binary blob from offset START (decimal or 0x hex) to OUT",
    )
    mode.add_argument(
        "--kernel_dump",
        metavar="FILE",
        help="save the embedded kernel module (-o, default its name)",
    )
    mode.add_argument(
        "--kernel_update",
        nargs=2,
        metavar=("FILE", "KERNEL"),
        help="embed the kernel module KERNEL (a .so), replacing any (-o: into a new file)",
    )
    mode.add_argument(
        "--kernel_remove", metavar="FILE", help="remove the embedded kernel module (-o: new file)"
    )
    parser.add_argument(
        "-o", dest="output", help="output file (--combine, --kernel_*) or folder (--extract)"
    )
    return parser


# --- reading and writing ---------------------------------------------------------------


def load_tree(path: str):
    """The tree of the bmodel file at `path` (schema by its kind)."""
    from tpuc.base.files import read_bytes
    from tpuc.target.bmodel.native import NATIVE_TYPE, model_type
    from tpuc.target.bmodel.tree import read_tree

    data = read_bytes(path, "bmodel file")
    fbs = None
    if model_type(data) == NATIVE_TYPE:
        from tpuc.target.vendor.fetch import locate

        fbs = locate().bmodel_fbs
    return read_tree(data, path, fbs)


def encode(tree, target: str) -> bytes:
    """The file bytes of `tree`, read back and checked before anything is saved
    (tpuc's own: every digest and field, as the simulator would)."""
    from tpuc.target.bmodel import read_bmodel
    from tpuc.target.bmodel.tree import read_tree, write_tree
    from tpuc.target.bmodel.validate import validate_model

    data = write_tree(tree)
    if tree.native:
        read_tree(data, target, _native_fbs())
    else:
        validate_model(read_bmodel(data, target), target)
    return data


def _native_fbs() -> Path:
    from tpuc.target.vendor.fetch import locate

    return locate().bmodel_fbs


def refuse_inputs(output: str, inputs: list[str], flag: str) -> None:
    """An output that is one of the inputs — same path or the same file
    through a hard or symbolic link — is refused before anything is read."""
    target = Path(output)
    if not target.exists():
        return
    for name in inputs:
        if Path(name).exists() and os.path.samefile(target, name):
            same = "is" if target.resolve() == Path(name).resolve() else "is a link to"
            raise TpucError(f"{flag} {output}: {same} the input {name}; choose another file")


def save(files: dict[str, bytes], inputs: list[str]) -> None:
    """Write every file (temporary name, then rename), all or none."""
    from tpuc.base.files import OutputSet

    with OutputSet(protected=tuple(inputs)) as out:
        for path, data in files.items():
            out.write_bytes(path, data)


def new_stamp() -> tuple[str, str]:
    """(time, version) for a file this tool makes."""
    from tpuc.target.bmodel import bmodel_time
    from tpuc.target.bmodel.model import _version

    return bmodel_time(), _version()


# --- the modes ----------------------------------------------------------------------


def show_info(args) -> None:
    from tpuc.target.bmodel.info import describe

    print(describe(load_tree(args.info)), end="")


def show_chip(args) -> None:
    print(load_tree(args.chip).root.get("chip"))


def show_print(args) -> None:
    from tpuc.target.bmodel.info import as_json

    print(as_json(load_tree(args.print)), end="")


def show_weight(args) -> None:
    from tpuc.target.bmodel.info import weights

    print(weights(load_tree(args.weight)), end="")


def combine(args) -> None:
    from tpuc.target.bmodel.combine import Source, combine

    output = args.output or "bm_combined.bmodel"
    refuse_inputs(output, args.combine, "-o")
    sources = [Source(path, load_tree(path)) for path in args.combine]
    tree = combine(sources, *new_stamp())
    save({output: encode(tree, output)}, args.combine)
    print(f"Success: combined to [{output}].")


def extract(args) -> None:
    from tpuc.target.bmodel.combine import extract

    folder = Path(args.output or ".")
    tree = load_tree(args.extract)
    files = {}
    for net, stage, part in extract(tree, *new_stamp()):
        path = str(folder / f"bm_net{net}_stage{stage}.bmodel")
        refuse_inputs(path, [args.extract], "--extract")
        files[path] = encode(part, path)
    save(files, [args.extract])
    for path in files:
        print(f"Generate file [{path}] ......")
    print("Success: all files have been generated!")


def dump(args) -> None:
    from tpuc.base.files import read_bytes
    from tpuc.target.bmodel.container import _HEADER, HEADER_SIZE

    path, start_text, size_text, output = args.dump
    start, size = _offset(start_text, "START"), _offset(size_text, "SIZE")
    refuse_inputs(output, [path], "--dump")
    load_tree(path)  # a bmodel, checked
    data = read_bytes(path, "bmodel file")
    _, _, fb_size, blob_size = _HEADER.unpack_from(data)
    if size == 0 or start + size > blob_size:
        raise TpucError(
            f"--dump {path}: start 0x{start:x} size 0x{size:x} lies outside its "
            f"{blob_size}-byte binary blob"
        )
    begin = HEADER_SIZE + fb_size + start
    save({output: data[begin : begin + size]}, [path])
    print(f"save file[{output}] success")


def _offset(text: str, what: str) -> int:
    try:
        value = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        raise TpucError(f"--dump {what} '{text}': not a decimal or 0x hex number") from None
    if value < 0:
        raise TpucError(f"--dump {what} {text}: must not be negative")
    return value


def kernel_dump(args) -> None:
    from tpuc.target.bmodel.combine import kernel_module

    name, data = kernel_module(load_tree(args.kernel_dump), args.kernel_dump)
    output = args.output or Path(name).name
    refuse_inputs(output, [args.kernel_dump], "-o")
    save({output: data}, [args.kernel_dump])
    print(f"Success: dump kernel_module to [{output}].")


def kernel_update(args) -> None:
    from tpuc.base.files import read_bytes
    from tpuc.target.bmodel.combine import with_kernel

    path, kernel = args.kernel_update
    output = args.output or path
    if args.output:
        refuse_inputs(output, [path, kernel], "-o")
    tree = load_tree(path)
    if not tree.native:
        raise TpucError(
            f"--kernel_update {path}: a bmodel of tpuc's own ISA; tpuc's device simulator "
            "loads no kernel module"
        )
    data = read_bytes(kernel, "kernel module")
    if not data.startswith(b"\x7fELF"):
        raise TpucError(f"--kernel_update {kernel}: not a shared library (no ELF header)")
    save({output: encode(with_kernel(tree, Path(kernel).name, data), output)}, [kernel])
    print(f"Success: update to [{output}].")


def kernel_remove(args) -> None:
    from tpuc.target.bmodel.combine import without_kernel

    path = args.kernel_remove
    output = args.output or path
    if args.output:
        refuse_inputs(output, [path], "-o")
    tree = without_kernel(load_tree(path), path)
    save({output: encode(tree, output)}, [])
    print("Success remove kernel module.")


MODES: dict[str, Callable] = {
    "info": show_info,
    "chip": show_chip,
    "print": show_print,
    "weight": show_weight,
    "extract": extract,
    "combine": combine,
    "dump": dump,
    "kernel_dump": kernel_dump,
    "kernel_update": kernel_update,
    "kernel_remove": kernel_remove,
}
"""Flag (its dest) -> what it does."""


def run(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    mode = next(name for name in MODES if getattr(args, name) is not None)
    if args.output is not None and mode not in (
        "combine", "extract", "kernel_dump", "kernel_update", "kernel_remove",
    ):  # fmt: skip
        raise TpucError(f"-o applies to --combine, --extract and --kernel_* only, not --{mode}")
    MODES[mode](args)
    return 0


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
