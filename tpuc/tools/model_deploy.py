"""model_deploy.py: lower a TOP module for a chip, check it, and compile the bmodel.

Steps (each announced on one line):
1. check the request: files, tolerance, chip and modes (from the chip's
   data), the module's state, INT8 without a calibration table;
2. INT8 with a calibration table: keep the layers the table lists as lossy
   (`# int8_lossy`, measured by run_calibration.py) in F16, or the chip's
   float fallback, by a quantize table `<prefix>_auto_qtable` (the user's
   --quantize_table entries win; off with --disable_auto_mix);
   lower: import-calibration-table (with --calibration_table),
   processor-assign, convert-top-to-tpu, canonicalize ->
   `<name>_<chip>_<mode>[_sym|_asym]_tpu.mlir` and its `_tpu_weight.npz`;
3. with --test_input: run the TPU interpreter -> `<prefix>_tpu_outputs.npz`
   (real values), compare with --test_reference (default: the TOP
   interpreter on the same input) and, on failure, name the first layer in
   graph order below --tolerance;
4. weight-reorder, subnet-divide, layer-group (--opt 1|2, off with
   --disable_layer_group), address-assign -> `<prefix>_final.mlir`
   (groups as `lg` attributes, addresses on the tensor types) and
   `_final_weight.npz`; codegen -> the bmodel (--model) and
   `<prefix>_tensor_location.json`; print the layer groups found (count,
   ops per group, slices) and the bmodel's estimated latency on the chip
   (tpuc.target.runtime.profile: µs, cycles, TIU and GDMA busy shares);
5. with --test_input (unless --skip_validation): run the bmodel in the
   device simulator -> `<prefix>_model_outputs.npz`, which must equal the
   TPU interpreter's outputs bit for bit.
--quant_input / --quant_output strip the casts at the network's edges
before step 4 (tpuc.tools.deploy_quant_io): the bmodel keeps its stored
int8/uint8 inputs and outputs, checked against the TPU interpreter's tensors
before the removed casts.
All files go next to --model and are written together; a bad request leaves
nothing behind.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tpuc.base.errors import TpucError, run_cli
from tpuc.target.chips import CHIPS, MODES
from tpuc.tools.cli import existing_file, make_parser, parse_list
from tpuc.tools.deploy_progress import PROG, Stages, say

if TYPE_CHECKING:  # imported lazily at run time: --help must stay fast
    from tpuc.base.compare import Tolerance
    from tpuc.workflow.deploy import Verification

EPILOG = (
    "Outputs, next to --model: <name>_<chip>_<mode>[_sym|_asym]_tpu.mlir (_sym/_asym for INT8) "
    "and its _tpu_weight.npz, <prefix>_final.mlir and _final_weight.npz, "
    "<prefix>_tensor_location.json and the bmodel itself; with --test_input also "
    "<prefix>_tpu_outputs.npz (real values of the TPU interpreter) and <prefix>_model_outputs.npz "
    "(the bmodel in the device simulator); with --debug and a calibration table also "
    "<prefix>_top_calibrated.mlir. Exit status 1 on a bad request (nothing is written), when the "
    "TPU module differs from the reference (files are kept; the first layer below --tolerance is "
    "named) or when the bmodel's outputs are not bit-identical to the TPU interpreter's."
)
MAX_FAILURE_LINES = 10


def build_parser():
    parser = make_parser(
        PROG,
        "Lower a TOP module to the TPU dialect for one chip and quantize mode, compile it to a "
        "bmodel and, with --test_input, check the TPU interpreter against the TOP results and "
        "the bmodel against the TPU interpreter.",
        EPILOG,
    )
    parser.add_argument("--mlir", required=True, help="TOP .mlir from model_transform.py")
    parser.add_argument(
        "--chip",
        "--processor",
        required=True,
        type=str.lower,
        choices=list(CHIPS),
        metavar="CHIP",
        help="target chip: " + ", ".join(CHIPS),
    )
    parser.add_argument(
        "--quantize",
        required=True,
        type=str.upper,
        choices=list(MODES),
        metavar="MODE",
        help="default quantize mode: " + ", ".join(MODES) + " (any case)",
    )
    parser.add_argument(
        "--asymmetric", action="store_true", help="INT8 with zero points (bm168x chips only)"
    )
    parser.add_argument(
        "--calibration_table", help="calibration table from run_calibration.py (needed by INT8)"
    )
    parser.add_argument(
        "--quantize_table", help="qtable: 'layer_name MODE' lines overriding --quantize per layer"
    )
    parser.add_argument(
        "--quant_input",
        action="store_true",
        help="strip the inputs' casts: the bmodel takes the stored int8/uint8 (F16/BF16: "
        "f16/bf16) values; its input scale is 1/S, as TPU-MLIR writes it",
    )
    parser.add_argument(
        "--quant_output",
        action="store_true",
        help="strip the outputs' casts: the bmodel returns the stored int8/uint8 (F16/BF16: "
        "f16/bf16) values with their scale and zero point",
    )
    parser.add_argument(
        "--quant_input_list",
        default="",
        help="with --quant_input: only these inputs, 1-based, e.g. 1,3 (default: all)",
    )
    parser.add_argument(
        "--quant_output_list",
        default="",
        help="with --quant_output: only these outputs, 1-based, e.g. 1,3 (default: all)",
    )
    parser.add_argument(
        "--disable_auto_mix",
        action="store_true",
        help="INT8: do not keep the layers run_calibration.py found lossy (the table's "
        "'# int8_lossy' lines) in a float mode; every layer runs in INT8 unless "
        "--quantize_table says otherwise",
    )
    parser.add_argument(
        "--tolerance", default="0.8,0.5", help="minimum cosine,euclid similarity (0.8,0.5)"
    )
    parser.add_argument(
        "--test_input",
        help="<name>_in_f32.npz, .npy or image to verify with; comma-separated, one per input",
    )
    parser.add_argument(
        "--test_reference",
        help="npz of TOP tensors to compare with, usually <name>_top_outputs.npz "
        "(default: run the TOP interpreter)",
    )
    parser.add_argument(
        "--compare_all", action="store_true", help="save and compare every tensor, not only outputs"
    )
    parser.add_argument("--excepts", default="", help="comma-separated tensors not compared")
    parser.add_argument(
        "--model",
        required=True,
        help="output bmodel; every other file is written in its folder",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="keep intermediate files (<prefix>_top_calibrated.mlir); per-tensor lines",
    )
    parser.add_argument(
        "--opt",
        type=int,
        default=2,
        choices=(1, 2),
        help="layer-group search: 1 greedy (longest runs that fit), 2 dynamic programming "
        "over cut points with the cycle model as cost (default 2)",
    )
    parser.add_argument(
        "--disable_layer_group",
        action="store_true",
        help="no layer groups: every op is a global layer reading and writing DDR",
    )
    parser.add_argument(
        "--skip_validation",
        action="store_true",
        help="do not run the bmodel (device simulator or vendor runtime) against the TPU "
        "interpreter",
    )
    parser.add_argument(
        "--codegen",
        default="tpuc",
        choices=("tpuc", "native"),
        help="tpuc: tpuc's own instruction set, run by tpuc's device simulator (default; no "
        "download); native: the chip's own command streams written by the vendor backend "
        "library, run by the vendor runtime (bm1684x; layer groups planned on the vendor's "
        "cycles unless --disable_layer_group; needs `tpuc-vendor fetch` once)",
    )
    return parser


@dataclass(frozen=True)
class Request:
    """A checked model_deploy request and the files it reads."""

    mlir: Path
    chip: str
    mode: str
    asymmetric: bool
    cali_table: Path | None
    qtable: Path | None
    tolerance: Tolerance
    test_input: list[str]
    test_reference: Path | None
    compare_all: bool
    excepts: list[str]
    model: Path
    debug: bool
    skip_validation: bool = False
    opt: int = 2
    disable_layer_group: bool = False
    auto_mix: bool = True
    codegen: str = "tpuc"
    vendor: object = None  # the vendor component (tpuc.target.vendor.fetch.VendorPaths) for native
    quant_io: object = None  # --quant_input / --quant_output (deploy_quant_io.QuantIO)

    @property
    def folder(self) -> Path:
        return self.model.parent

    def inputs(self) -> list[Path]:
        """Every file the run reads: never overwritten."""
        files = [self.mlir, self.cali_table, self.qtable, self.test_reference]
        return [p for p in files if p is not None] + [Path(p) for p in self.test_input]


def check_request(args) -> Request:
    """Everything that can be checked before the module is read."""
    from tpuc.base.compare import Tolerance
    from tpuc.tools.deploy_quant_io import QuantIO

    def optional(value: str | None, flag: str) -> Path | None:
        return existing_file(value, flag) if value is not None else None

    test_input = parse_list(args.test_input)
    for path in test_input:
        existing_file(path, "--test_input")
    if args.test_reference is not None and not test_input:
        raise TpucError("--test_reference needs --test_input (the input it was computed on)")
    qtable = optional(args.quantize_table, "--quantize_table")
    quant_io = QuantIO.parse(args, say)
    _use_own_table(args)
    _check_target(args, qtable)
    model = Path(args.model)
    if model.is_dir():
        raise TpucError(f"--model {args.model}: is a folder, not a bmodel file name")
    vendor = None
    if args.codegen == "native":
        from tpuc.tools.deploy_native import native_vendor

        vendor = native_vendor(args.chip)
    return Request(
        mlir=existing_file(args.mlir, "--mlir"),
        chip=args.chip,
        mode=args.quantize,
        asymmetric=bool(args.asymmetric),
        cali_table=optional(args.calibration_table, "--calibration_table"),
        qtable=qtable,
        tolerance=Tolerance.parse(args.tolerance),
        test_input=test_input,
        test_reference=optional(args.test_reference, "--test_reference"),
        compare_all=bool(args.compare_all),
        excepts=parse_list(args.excepts),
        model=model,
        debug=bool(args.debug),
        skip_validation=bool(args.skip_validation),
        opt=int(args.opt),
        disable_layer_group=bool(args.disable_layer_group),
        auto_mix=not args.disable_auto_mix,
        codegen=args.codegen,
        vendor=vendor,
        quant_io=quant_io,
    )


def _use_own_table(args) -> None:
    """A pre-quantized model (a quantized TFLite one) names its own
    calibration table in `module.cali_table`: INT8 without
    --calibration_table uses it, asymmetric (the model's zero points). A
    table given on the command line wins."""
    import re

    if args.quantize != "INT8" or args.calibration_table is not None:
        return
    try:
        with open(args.mlir, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return  # existing_file reports it
    found = re.search(r'module\.cali_table = "([^"]+)"', head.split("\n", 1)[0])
    if found is None:
        return
    table = Path(args.mlir).parent / found.group(1)
    args.calibration_table = str(existing_file(str(table), "module.cali_table"))
    args.asymmetric = True
    say(f"the model's own quantization: {table} (asymmetric)")


def _check_target(args, qtable: Path | None) -> None:
    """Chip, modes and calibration, before the (maybe large) module is read."""
    from tpuc.ir.qtable import read_qtable
    from tpuc.workflow.deploy import check_target

    modes = read_qtable(qtable) if qtable is not None else {}
    has_table = args.calibration_table is not None
    check_target(args.chip, args.quantize, bool(args.asymmetric), has_table, modes)


@dataclass
class Loaded:
    """The TOP module with its weights, and the test data (read before any
    lowering work, so a bad file fails at once)."""

    module: object
    store: dict
    inputs: dict | None
    reference: dict | None


def load(req: Request) -> Loaded:
    from tpuc.base.files import load_npz
    from tpuc.ir.module_io import load_module
    from tpuc.ir.preprocess import input_specs, load_inputs

    module, store = load_module(req.mlir)
    inputs = reference = None
    if req.test_input:
        inputs = load_inputs(req.test_input, input_specs(module))
        if req.test_reference is not None:
            reference = load_npz(req.test_reference)
    return Loaded(module, store, inputs, reference)


def auto_mix(out, req: Request, module, target: Path) -> Request:
    """The request with the automatic mixed-precision step's quantize table
    (written to `target`, the user's entries on top) when it keeps any
    layer in float; else the request as it is."""
    import dataclasses

    from tpuc.ir.qtable import format_qtable, read_qtable
    from tpuc.workflow.auto_mix import auto_float_layers, merged_qtable, report, share_text

    if not req.auto_mix or req.mode != "INT8" or req.cali_table is None:
        return req
    auto = auto_float_layers(module, req.cali_table, req.chip)
    user = read_qtable(req.qtable, module) if req.qtable is not None else {}
    auto = [layer for layer in auto if layer.name not in user]
    if not auto:
        return req
    floated = [layer.name for layer in auto] + [n for n, m in user.items() if m != "INT8"]
    say(report(auto, share=share_text(module, req.chip, floated)))
    header = [f"automatic: layers {req.cali_table.name} keeps in float (lossy in INT8)"]
    if req.qtable is not None:
        header.append(f"with the entries of {req.qtable.name} on top")
    out.write_text(target, format_qtable(merged_qtable(auto, user), header))
    return dataclasses.replace(req, qtable=out.staged(target))


def module_name(module) -> str:
    from tpuc.ir.module_io import module_attr

    name = module_attr(module, "name") or (module.sym_name.data if module.sym_name else None)
    if not name:
        raise TpucError("the module has no name (module.name); was it written by model_transform?")
    return str(name)


@dataclass
class Lowered:
    """What lowering leaves for codegen: the request as lowered (its qtable
    the automatic one, if any), the TPU module's output names before
    strip-io-quant renames them, the edge-cast plan and the TPU
    interpreter's check (with --test_input)."""

    req: Request
    tpu_outputs: list[str]
    io_plan: object
    check: Verification | None


def deploy(req: Request) -> int:
    from tpuc.base.files import OutputSet
    from tpuc.tools import deploy_quant_io as quant_io
    from tpuc.tools.deploy_codegen import compile_target
    from tpuc.workflow.deploy import deploy_prefix

    stages = Stages()
    say(f"loading {req.mlir}")
    data = load(req)
    if req.quant_io is not None:
        quant_io.check_lists(data.module, req.quant_io)
    stages.done("load")
    prefix = deploy_prefix(module_name(data.module), req.chip, req.mode, req.asymmetric)

    def path(suffix: str) -> Path:
        return req.folder / f"{prefix}{suffix}"

    written: list[Path] = []
    with OutputSet(protected=tuple(req.inputs())) as out:
        lowered = lower_and_check(out, req, data, path, written, stages)
        quant_io.strip(data.module, lowered.io_plan)
        compiled = compile_target(lowered.req, data, out, path, written)
        stages.done("codegen")
        bmodel_check = check_bmodel_run(out, lowered, data, compiled, path, written)
        if bmodel_check is not None:
            stages.done("bmodel check")
    say(f"saved {', '.join(str(p) for p in written)}")
    conclude(lowered, bmodel_check, compiled)
    say(f"done ({stages.line()})")
    return 0


def lower_and_check(out, req: Request, data: Loaded, path, written: list[Path], stages) -> Lowered:
    """Automatic mixed precision, lowering to `_tpu.mlir`, and (with
    --test_input) the TPU interpreter against the reference."""
    from tpuc.ir.core import output_names
    from tpuc.ir.module_io import save_module
    from tpuc.tools import deploy_quant_io as quant_io
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import pipeline_text

    # TOP as it was: the reference, or the layer search's intermediates
    top = data.module.clone() if data.inputs is not None else None
    mixed = auto_mix(out, req, data.module, path("_auto_qtable"))
    if mixed.qtable != req.qtable:
        written.append(path("_auto_qtable"))
    req = mixed  # its qtable: the automatic one, staged until the outputs are committed
    lower(
        data.module,
        req.chip,
        req.mode,
        req.asymmetric,
        req.cali_table,
        req.qtable,
        source=str(req.mlir),
        before=lambda passes: say(f"lowering: {pipeline_text(passes)}"),
        float_epilogue=req.codegen != "native",  # the native target lowers as TPU-MLIR
    )
    stages.done("lower")
    lowered = Lowered(req, output_names(data.module), None, None)
    if req.quant_io is not None:
        lowered.io_plan = quant_io.make_plan(data.module, req.quant_io, req.mode, say)
    if req.debug and req.cali_table is not None:
        written.append(_save_calibrated(out, req, path("_top_calibrated.mlir")))
    tpu_mlir, weights = path("_tpu.mlir"), path("_tpu_weight.npz")
    save_module(out, data.module, tpu_mlir, data.store, weights)
    written += [tpu_mlir, weights]
    stages.done("save")
    if data.inputs is None:
        return lowered
    outputs = path("_tpu_outputs.npz")
    lowered.check = validate(req, data, top, outputs, quant_io.keep_names(lowered.io_plan))
    stages.add(lowered.check.timings)
    out.save_npz(outputs, lowered.check.values)
    written.append(outputs)
    stages.done("save outputs")
    return lowered


def check_bmodel_run(out, lowered: Lowered, data: Loaded, compiled, path, written: list[Path]):
    """The bmodel's outputs against the TPU interpreter's, saved as
    `_model_outputs.npz`; None without --test_input or with
    --skip_validation."""
    from tpuc.tools import deploy_quant_io as quant_io
    from tpuc.tools.deploy_codegen import run_bmodel

    check, io_plan, req = lowered.check, lowered.io_plan, lowered.req
    if check is None or req.skip_validation:
        return None
    expected = quant_io.expected_values(check.values, check.stored, io_plan)
    fixed = quant_io.any_quantized_output(io_plan)
    result = run_bmodel(req, compiled.bmodel, data.inputs, expected, compiled.module, fixed)
    out.save_npz(path("_model_outputs.npz"), quant_io.real_outputs(result.outputs, io_plan))
    written.append(path("_model_outputs.npz"))
    return result


def conclude(lowered: Lowered, bmodel_check, compiled) -> None:
    """The checks' verdicts, once every file is written: a failure is an
    error naming what differs."""
    req, check = lowered.req, lowered.check
    if check is not None:
        report(req, check, lowered.tpu_outputs)
        if not check.passed:
            raise TpucError(check.failure(req.mode))
        say(f"TPU module matches the reference (--tolerance {req.tolerance})")
    if bmodel_check is None:
        return
    if not bmodel_check.passed:
        raise TpucError(
            f"the bmodel differs from the TPU interpreter: {'; '.join(bmodel_check.mismatches)}"
        )
    names = len(bmodel_check.outputs)
    if req.codegen != "native":
        say(f"bmodel matches the TPU interpreter bit for bit ({names} output(s))")
        return
    from tpuc.tools.deploy_native import check_kind

    _, how = check_kind(req.mode, req.qtable is not None, compiled.module)
    say(f"bmodel matches the TPU interpreter ({how}, {names} output(s))")


def validate(
    req: Request, data: Loaded, top, outputs_path: Path, keep: list[str] | None = None
) -> Verification:
    """Run the TPU interpreter and compare with the reference (`keep`: more
    tensors to return, stored and real)."""
    from tpuc.workflow.deploy import verify

    what = f"{req.test_reference}" if data.reference is not None else "the TOP interpreter"
    say(f"running the TPU interpreter -> {outputs_path}; comparing with {what}")
    check = verify(
        data.module,
        data.store,
        data.inputs,
        req.tolerance,
        reference=data.reference,
        top_module=top,
        excepts=req.excepts,
        compare_all=req.compare_all,
        progress=sys.stderr.isatty(),
        keep=keep or (),
    )
    return check


def _save_calibrated(out, req: Request, path: Path) -> Path:
    """The TOP module after import-calibration-table, reading the TOP weight
    file where it is (no second copy of the weights)."""
    import os

    from tpuc.ir.module_io import (
        module_attr,
        module_text,
        parse_module,
        read_module_text,
        set_module_attr,
    )
    from tpuc.workflow.pipeline import calibrate_import_passes, run_passes

    module = parse_module(read_module_text(req.mlir), str(req.mlir))
    run_passes(module, calibrate_import_passes(req.cali_table, req.asymmetric))
    weight_file = req.mlir.parent / module_attr(module, "weight_file", "")
    set_module_attr(module, "weight_file", os.path.relpath(weight_file, path.parent))
    out.write_text(path, module_text(module))
    return path


def report(req: Request, check: Verification, outputs: list[str]) -> None:
    """Per-tensor lines (all with --debug, else the failing ones), the
    summary, and a table of the final outputs (the TPU module's, as checked)."""
    result = check.result
    width = max([32] + [len(r.name) for r in result.rows])
    for row in result.rows if req.debug else result.failures[:MAX_FAILURE_LINES]:
        print(row.line(width))
    for line in result.summary_lines():
        print(line)
    for line in result.table([n for n in outputs if result.row(n)]):
        print(f"  {line}")


def run(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return deploy(check_request(args))


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
