"""run_calibration.py: the calibration table INT8 deployment reads.

    run_calibration.py name.mlir --dataset DIR | --data_list FILE [--input_num N]
        [--cali_method kl] [--histogram_bin_num 2048] [--tune_num 10 | --tune_list FILE]
        -o name_cali_table

Runs the TOP module's float interpreter over the samples (images are
preprocessed as model_transform recorded on the module's inputs), gathers
every tensor's statistics in two streamed passes, picks a symmetric
threshold per tensor with `--cali_method`, auto-tunes the thresholds on the
first `--tune_num` samples, applies the per-op range rules and writes the
table in TPU-MLIR's format.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tpuc.errors import TpucError, run_cli
from tpuc.tools.cli import add_sample_flags, check_sample_flags, existing_file, make_parser

PROG = "run_calibration.py"
METHOD_NAMES = ("kl", "max", "percentile9999", "mse", "aciq_gauss", "aciq_laplace")
"""`--cali_method` choices (the keys of tpuc.calibration.thresholds.METHODS)."""

EPILOG = (
    "The table has one line per tensor, 'name threshold min max': the threshold for symmetric "
    "INT8, min/max for asymmetric. Samples: images (preprocessed as recorded by "
    "model_transform.py), .npy (one input) or .npz (keyed by input name; one file per sample "
    "for several inputs). Set SOURCE_DATE_EPOCH to record a generation time; without it two "
    "runs write identical bytes."
)


def build_parser():
    parser = make_parser(
        PROG,
        "Measure every tensor of a TOP module on calibration samples and write the "
        "calibration table (thresholds and min/max) for INT8 deployment.",
        EPILOG,
    )
    parser.add_argument("mlir_file", help="TOP .mlir from model_transform.py")
    add_sample_flags(parser, input_num=0)
    parser.add_argument(
        "--histogram_bin_num",
        type=int,
        default=2048,
        help="histogram buckets of |x| per tensor (default 2048)",
    )
    parser.add_argument(
        "--cali_method",
        choices=METHOD_NAMES,
        default="kl",
        help="threshold method: " + ", ".join(METHOD_NAMES) + " (default kl)",
    )
    parser.add_argument(
        "--tune_num",
        type=int,
        default=5,
        help="samples used by auto-tune, the first of the dataset (0 = no tuning; default 5)",
    )
    parser.add_argument(
        "--tune_list", help="file listing the auto-tune samples instead (one per line)"
    )
    parser.add_argument("-o", "--calibration_table", required=True, help="output table file")
    return parser


@dataclass(frozen=True)
class Request:
    mlir: Path
    dataset: str | None
    data_list: str | None
    input_num: int
    bins: int
    method: str
    tune_num: int
    tune_list: str | None
    output: Path


def check_request(args) -> Request:
    """Flag checks that need no model."""
    mlir = existing_file(args.mlir_file, "mlir file")
    check_sample_flags(args)
    if args.histogram_bin_num < 128:
        raise TpucError(f"--histogram_bin_num {args.histogram_bin_num}: needs at least 128")
    if args.tune_num < 0:
        raise TpucError(f"--tune_num {args.tune_num}: must be 0 (no tuning) or positive")
    if args.tune_list is not None:
        existing_file(args.tune_list, "--tune_list")
    if Path(args.calibration_table).is_dir():
        raise TpucError(f"-o {args.calibration_table}: is a folder, not a table file name")
    return Request(
        mlir=mlir,
        dataset=args.dataset,
        data_list=args.data_list,
        input_num=args.input_num,
        bins=args.histogram_bin_num,
        method=args.cali_method,
        tune_num=args.tune_num,
        tune_list=args.tune_list,
        output=Path(args.calibration_table),
    )


def say(message: str) -> None:
    print(f"[{PROG}] {message}", flush=True)


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def progress(items, what: str):
    """A tqdm bar over samples when stderr is a terminal."""
    if not sys.stderr.isatty():
        return items
    from tqdm import tqdm

    return tqdm(items, desc=what, unit="sample", leave=False)


def generated_time() -> str | None:
    """The table's time stamp: only with SOURCE_DATE_EPOCH (reproducible builds)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if not epoch:
        return None
    from datetime import UTC, datetime

    try:
        return str(datetime.fromtimestamp(int(epoch), UTC).replace(tzinfo=None))
    except (ValueError, OverflowError):
        raise TpucError(f"SOURCE_DATE_EPOCH={epoch}: not a Unix time in seconds") from None


def refuse_overwrite(output: Path, inputs: list[Path]) -> None:
    """Fail before any work when -o names a file the run reads."""
    target = output.resolve()
    for path in inputs:
        if path.resolve() == target:
            raise TpucError(f"-o {output}: refusing to overwrite an input file")


def run(argv: list[str] | None = None) -> int:
    from tpuc.calibration.calibrate import Calibration, write_table

    req = check_request(build_parser().parse_args(argv))
    generated = generated_time()
    start = time.perf_counter()
    cal = Calibration.open(req.mlir, warn)
    samples = cal.samples(req.dataset, req.data_list, req.input_num)
    tune_samples = cal.tune_samples(samples, req.tune_num, req.tune_list)
    lists = [Path(p) for p in (req.data_list, req.tune_list) if p]
    protected = [*cal.input_files(samples, tune_samples), *lists]
    refuse_overwrite(req.output, protected)
    say(f"{len(samples)} samples, method {req.method}, {req.bins} bins, tune {len(tune_samples)}")
    entries = cal.run(samples, tune_samples, req.method, req.bins, progress)
    write_table(
        req.output,
        entries,
        mlir=req.mlir,
        method=req.method,
        bins=req.bins,
        samples=len(samples),
        tune_num=len(tune_samples),
        generated=generated,
        protected=protected,
        lossy=cal.lossy,
    )
    if cal.lossy:
        listed = ", ".join(f"{n} ({db:.1f} dB)" for n, db in list(cal.lossy.items())[:5])
        more = ", …" if len(cal.lossy) > 5 else ""
        say(f"{len(cal.lossy)} tensor(s) lose most in INT8 on these samples: {listed}{more}")
    stages = ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds in cal.timings.items())
    say(f"{len(entries)} tensors -> {req.output} ({time.perf_counter() - start:.1f} s: {stages})")
    return 0


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
