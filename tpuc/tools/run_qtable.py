"""run_qtable.py: the mixed-precision qtable for a model INT8 cannot carry whole.

    run_qtable.py name.mlir --dataset DIR | --data_list FILE
        --calibration_table name_cali_table --chip bm1684x [--input_num 10]
        [--expected_cos 0.99] [--min_layer_cos 0.99] [--fp_type auto]
        [--loss_table full_loss_table.txt] -o name_qtable

Scores every candidate layer by the network's output loss (1 − cos against
the float model, mean over samples) with only that layer in float, writes
the loss table best first, then adds layers greedily by gain until the
output cosine reaches --expected_cos and writes them as the qtable that
model_deploy.py --quantize_table reads (tpuc/workflow/mixed_precision.py).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tpuc.base.errors import TpucError, run_cli
from tpuc.tools.cli import add_sample_flags, check_sample_flags, existing_file, make_parser

PROG = "run_qtable.py"
FP_TYPES = ("auto", "F16", "BF16", "F32")

EPILOG = (
    "Loss = 1 - cos of the network outputs against the float model. Candidates are the INT8 "
    "layers whose own all-INT8 cosine is below --min_layer_cos (every INT8 layer when none "
    "is). --fp_type auto is F32 where the chip has it (bm1684x, bm1688) and BF16 on cv18xx. "
    "Set SOURCE_DATE_EPOCH to record a generation time; without it two runs write identical "
    "bytes."
)


def build_parser():
    parser = make_parser(
        PROG,
        "Find the layers that must run in float for an INT8 model to reach a target output "
        "cosine, and write them as a mixed-precision qtable.",
        EPILOG,
    )
    parser.add_argument("mlir_file", help="TOP .mlir from model_transform.py")
    add_sample_flags(parser, input_num=10)
    parser.add_argument("--calibration_table", required=True, help="table from run_calibration.py")
    parser.add_argument("--chip", "--processor", dest="chip", required=True, help="target chip")
    parser.add_argument(
        "--expected_cos", type=float, default=0.99, help="output cosine to reach (default 0.99)"
    )
    parser.add_argument(
        "--min_layer_cos",
        type=float,
        default=0.99,
        help="layers whose own INT8 cosine is below this are candidates (default 0.99)",
    )
    parser.add_argument(
        "--fp_type", choices=FP_TYPES, default="auto", help="float mode of chosen layers"
    )
    parser.add_argument(
        "--loss_table", default="full_loss_table.txt", help="loss per layer (default "
        "full_loss_table.txt)"
    )  # fmt: skip
    parser.add_argument("-o", "--quantize_table", required=True, help="output qtable")
    return parser


@dataclass(frozen=True)
class Request:
    mlir: Path
    dataset: str | None
    data_list: str | None
    table: Path
    chip: str
    input_num: int
    expected_cos: float
    min_layer_cos: float
    fp_type: str
    loss_table: Path
    output: Path


def check_request(args) -> Request:
    """Flag checks that need no model."""
    mlir = existing_file(args.mlir_file, "mlir file")
    table = existing_file(args.calibration_table, "--calibration_table")
    check_sample_flags(args)
    for flag in ("expected_cos", "min_layer_cos"):
        value = getattr(args, flag)
        if not -1.0 <= value <= 1.0:
            raise TpucError(f"--{flag} {value}: a cosine is between -1 and 1")
    if Path(args.loss_table).resolve() == Path(args.quantize_table).resolve():
        raise TpucError("--loss_table and -o name the same file")
    return Request(mlir, args.dataset, args.data_list, table, args.chip, args.input_num,
                   args.expected_cos, args.min_layer_cos, args.fp_type,
                   Path(args.loss_table), Path(args.quantize_table))  # fmt: skip


def say(message: str) -> None:
    print(f"[{PROG}] {message}", flush=True)


def progress(items, what: str):
    """A tqdm bar (with its time estimate) over the layers."""
    from tqdm import tqdm

    return tqdm(items, desc=what, unit=what[:-1], leave=False, disable=not sys.stderr.isatty())


def fp_mode(chip, fp_type: str) -> str:
    from tpuc.workflow.mixed_precision import best_float_mode

    mode = best_float_mode(chip) if fp_type == "auto" else fp_type
    chip.check_mode(mode)
    return mode


def run(argv: list[str] | None = None) -> int:
    from tpuc.base.files import OutputSet
    from tpuc.ir.qtable import format_qtable
    from tpuc.target.chips import get_chip
    from tpuc.tools.run_calibration import generated_time
    from tpuc.workflow.calibration.calibrate import Calibration
    from tpuc.workflow.calibration.dataset import load_sample
    from tpuc.workflow.mixed_precision import MixedPrecisionSearch, loss_table_text

    req = check_request(build_parser().parse_args(argv))
    chip = get_chip(req.chip)
    mode = fp_mode(chip, req.fp_type)
    generated = generated_time()
    start = time.perf_counter()
    cal = Calibration.open(req.mlir, lambda m: print(f"warning: {m}", file=sys.stderr))
    samples = cal.samples(req.dataset, req.data_list, req.input_num)
    protected = [*cal.input_files(samples), req.table]
    for output in (req.output, req.loss_table):
        if output.resolve() in {p.resolve() for p in protected}:
            raise TpucError(f"{output}: refusing to overwrite an input file")
    inputs = [load_sample(s, cal.specs) for s in samples]
    say(f"{len(samples)} samples, chip {chip.name}, float mode {mode}")
    search = MixedPrecisionSearch(
        cal.module, cal.weights, req.table, chip, inputs, top_interp=cal.interp
    )
    try:
        say(f"all-INT8 output cosine {search.base_cos:.6f} (loss {1 - search.base_cos:.6g})")
        layers = search.candidates(req.min_layer_cos)
        say(f"{len(layers)} candidate layers")
        losses = search.layer_losses(layers, mode, progress)
        chosen, cos = search.select(losses, mode, req.expected_cos)
    finally:
        search.close()
    header = [f"genetated time: {generated}"] if generated else []  # sic: TPU-MLIR's spelling
    header += [f"sample number: {len(samples)}", f"all int8 loss: {1 - search.base_cos!r}",
               f"chip: {chip.name}  mix_mode: {mode}"]  # fmt: skip
    with OutputSet(protected=tuple(protected)) as out:
        out.write_text(req.loss_table, loss_table_text(losses, header))
        out.write_text(req.output, format_qtable(chosen, header))
    stats = search.stats
    say(f"{len(chosen)} float layers -> {req.output}; predicted output cosine {cos:.8f} "
        f"({'reaches' if cos >= req.expected_cos else 'below'} --expected_cos "
        f"{req.expected_cos}); loss table {req.loss_table}")  # fmt: skip
    say(f"{stats.evaluations} evaluations, {stats.ops_run} ops run, {stats.ops_reused} reused "
        f"({time.perf_counter() - start:.1f} s)")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
