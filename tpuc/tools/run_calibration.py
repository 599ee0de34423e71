"""run_calibration.py: the calibration table INT8 deployment reads.

    run_calibration.py name.mlir --dataset DIR | --data_list FILE [--input_num N]
        [--cali_method kl] [--histogram_bin_num 2048] [--tune_num 10 | --tune_list FILE]
        [--sq] [--smc] [--we] [--bc] [--adaround] [--chip bm1684x] [--inference_num 30]
        [--search search_threshold|search_qtable|fast_search|mix_search
         [--quantize_table name_qtable] [--expected_cos 0.99] [--min_layer_cos 0.99]]
        [--auto_mix_cos 0.99] [--auto_mix_num 4]
        -o name_cali_table

Runs the TOP module's float interpreter over the samples (images are
preprocessed as model_transform recorded on the module's inputs), gathers
every tensor's statistics in two streamed passes, picks a symmetric
threshold per tensor with `--cali_method`, auto-tunes the thresholds on the
first `--tune_num` samples, applies the per-op range rules and writes the
table in TPU-MLIR's format. Then, unless `--auto_mix_num 0`, it measures the
FP32 vs INT8 output cosine (for `--chip`) on the first `--auto_mix_num`
samples and, while the smallest is below `--auto_mix_cos` (or a per-position
classifier output, such as a CTC recognizer's, reads another class at some
position: tpuc/workflow/calibration/positions.py), moves the layers that add
most error to F16, listing them in the table for model_deploy.py's
automatic mixed precision (tpuc/workflow/calibration/float_growth.py).

The techniques (--sq, --smc, --we, --bc, --adaround) change the module's
weights (--smc also inserts a Mul before and after each attention MatMul):
TPU-MLIR rewrites the module's weight file in place; tpuc never overwrites
an input, so it writes the changed module and its weights next to the
table (`--output_mlir`), and that module is what model_deploy.py takes
with the table. --search search_threshold writes the searched table; the
qtable modes also write `--quantize_table` for model_deploy.py. Every run
with a technique or a search prints the FP32 vs INT8 output cosine before
and after (tpuc/workflow/calibration/techniques.py).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tpuc.base.errors import TpucError, run_cli
from tpuc.tools.cli import add_sample_flags, check_sample_flags, existing_file, make_parser

PROG = "run_calibration.py"
METHOD_NAMES = ("kl", "max", "percentile9999", "mse", "aciq_gauss", "aciq_laplace")
"""`--cali_method` choices (the keys of tpuc.workflow.calibration.thresholds.METHODS)."""

EPILOG = (
    "The table has one line per tensor, 'name threshold min max': the threshold for symmetric "
    "INT8, min/max for asymmetric. Samples: images (preprocessed as recorded by "
    "model_transform.py), .npy (one input) or .npz (keyed by input name; one file per sample "
    "for several inputs). Set SOURCE_DATE_EPOCH to record a generation time; without it two "
    "runs write identical bytes. Techniques (docs/tools.md, 'Calibration techniques'): "
    "--sq SmoothQuant (LayerNorm -> MatMul), --smc softmax correction (Softmax -> MatMul), "
    "--we cross-layer weight equalization, --bc bias "
    "correction, --adaround learned weight rounding; they write the changed module to "
    "--output_mlir (default: <mlir name>_<techniques>.mlir next to the table), which "
    "model_deploy.py must be given with the table. None of them runs by default: measured on "
    "real models (regression/int8_techniques.py), none gains on most."
)
SEARCH_MODES = ("search_threshold", "search_qtable", "fast_search", "mix_search", "False")
QTABLE_SEARCHES = ("search_qtable", "fast_search", "mix_search")


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
    add_technique_flags(parser)
    parser.add_argument(
        "--auto_mix_cos",
        type=float,
        default=0.99,
        help="automatic mixed precision: grow the F16 layers until the smallest FP32 vs INT8 "
        "output cosine on the --auto_mix_num samples reaches this, a trailing Softmax judged by "
        "its logits, a Softmax over the last axis at several positions (CTC) also until every "
        "position's best class is FP32's; the smallest set reaching it is kept, short of it "
        "the round that measured best (default 0.99)",
    )
    parser.add_argument(
        "--auto_mix_num",
        type=int,
        default=4,
        help="samples (the first of the dataset) the output cosine is measured on for the "
        "automatic mixed precision (0 = no output measurement; default 4)",
    )
    parser.add_argument("-o", "--calibration_table", required=True, help="output table file")
    return parser


def add_technique_flags(parser) -> None:
    """TPU-MLIR's technique and search flags (and --adaround, --output_mlir)."""
    flag = parser.add_argument
    flag("--sq", action="store_true", help="SmoothQuant: move LayerNorm output outliers into the "
         "weights of the MatMuls reading it (alpha searched per LayerNorm)")  # fmt: skip
    flag("--we", action="store_true", help="weight equalization: cross-layer equalization of "
         "consecutive Conv/MatMul pairs through ReLU, LeakyReLU or PReLU")  # fmt: skip
    flag("--bc", action="store_true", help="bias correction: subtract each layer's mean "
         "output error from rounding its weights to INT8, measured on the samples")  # fmt: skip
    flag("--adaround", action="store_true", help="learned rounding of Conv/MatMul weights "
         "(AdaRound) on the samples' layer inputs")  # fmt: skip
    flag("--smc", action="store_true", help="softmax correction: scale each attention Softmax "
         "read by a MatMul to a mean row max of 1 per head before it, back after it")  # fmt: skip
    flag("--bc_inference_num", type=int, default=30,
         help="samples used by --bc and --adaround (default 30)")  # fmt: skip
    flag("--search", choices=SEARCH_MODES, default="False", help="search_threshold: thresholds "
         "chosen by the measured output cosine; search_qtable: float layers for a qtable "
         "(every INT8 layer a candidate); fast_search / mix_search: only layers below "
         "--min_layer_cos (default False: no search)")  # fmt: skip
    flag("--inference_num", type=int, default=30,
         help="samples the FP32 vs INT8 cosine is measured on (default 30)")  # fmt: skip
    flag("--chip", "--processor", dest="chip", default="bm1684x",
         help="chip the INT8 cosine is measured for, by the techniques, the searches and the "
         "automatic mixed precision (default bm1684x)")  # fmt: skip
    flag("--expected_cos", type=float, default=0.99, help="qtable searches: output cosine to "
         "reach (default 0.99)")  # fmt: skip
    flag("--min_layer_cos", type=float, default=0.99, help="fast_search / mix_search: layers "
         "whose own INT8 cosine is below this are candidates (default 0.99)")  # fmt: skip
    flag("--fp_type", choices=("auto", "F16", "BF16", "F32"), default="auto",
         help="qtable searches: float mode of the chosen layers (default auto)")  # fmt: skip
    flag("--quantize_table", help="qtable searches: the qtable written (required with them)")
    flag("--output_mlir", help="techniques: the changed TOP module written (default "
         "<mlir name>_<techniques>.mlir next to the table; weights beside it)")  # fmt: skip


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
    chip: str = "bm1684x"
    mix_cos: float = 0.99
    mix_num: int = 4
    plan: object | None = None  # tpuc.workflow.calibration.techniques.Plan when asked for
    output_mlir: Path | None = None
    qtable: Path | None = None


def technique_names(args) -> tuple[str, ...]:
    return tuple(name for name in ("sq", "smc", "we", "bc", "adaround") if getattr(args, name))


def check_plan(args, output: Path):
    """The techniques/search plan (None when none was asked for), its checks,
    and where the changed module and the qtable go."""
    from tpuc.workflow.calibration.techniques import Plan

    names = technique_names(args)
    search = None if args.search == "False" else args.search
    if not names and search is None:
        return None, None, None
    for flag in ("inference_num", "bc_inference_num"):
        if getattr(args, flag) < 1:
            raise TpucError(f"--{flag} {getattr(args, flag)}: must be at least 1")
    for flag in ("expected_cos", "min_layer_cos"):
        if not -1.0 <= getattr(args, flag) <= 1.0:
            raise TpucError(f"--{flag} {getattr(args, flag)}: a cosine is between -1 and 1")
    qtable = None
    if search in QTABLE_SEARCHES:
        if not args.quantize_table:
            raise TpucError(f"--search {search} writes a qtable: give --quantize_table")
        qtable = Path(args.quantize_table)
    output_mlir = None
    if names:
        stem = Path(args.mlir_file).stem
        output_mlir = Path(args.output_mlir or output.parent / f"{stem}_{'_'.join(names)}.mlir")
        if output_mlir.suffix != ".mlir":
            raise TpucError(f"--output_mlir {output_mlir}: must end in .mlir")
    plan = Plan(names, search, args.chip, args.cali_method, args.histogram_bin_num,
                args.inference_num, args.expected_cos, args.min_layer_cos, args.fp_type,
                args.bc_inference_num)  # fmt: skip
    return plan, output_mlir, qtable


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
    if args.auto_mix_num < 0:
        raise TpucError(f"--auto_mix_num {args.auto_mix_num}: must be 0 (off) or positive")
    if not -1.0 <= args.auto_mix_cos <= 1.0:
        raise TpucError(f"--auto_mix_cos {args.auto_mix_cos}: a cosine is between -1 and 1")
    if Path(args.calibration_table).is_dir():
        raise TpucError(f"-o {args.calibration_table}: is a folder, not a table file name")
    output = Path(args.calibration_table)
    plan, output_mlir, qtable = check_plan(args, output)
    return Request(
        mlir=mlir,
        dataset=args.dataset,
        data_list=args.data_list,
        input_num=args.input_num,
        bins=args.histogram_bin_num,
        method=args.cali_method,
        tune_num=args.tune_num,
        tune_list=args.tune_list,
        output=output,
        chip=args.chip,
        mix_cos=args.auto_mix_cos,
        mix_num=args.auto_mix_num,
        plan=plan,
        output_mlir=output_mlir,
        qtable=qtable,
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
    from tpuc.workflow.calibration.calibrate import Calibration, write_table

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
    if req.plan is not None:
        outputs = [p for p in (req.output_mlir, req.qtable) if p is not None]
        for path in outputs:
            refuse_overwrite(path, protected)
        return run_plan(req, cal, samples, tune_samples, protected, generated, start)
    entries = cal.run(samples, tune_samples, req.method, req.bins, progress)
    grown = grow_float_layers(req, cal, samples, entries, cal.lossy)
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
        float_layers=grown,
    )
    say_lossy(cal.lossy)
    stages = ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds in cal.timings.items())
    say(f"{len(entries)} tensors -> {req.output} ({time.perf_counter() - start:.1f} s: {stages})")
    return 0


def say_lossy(lossy: dict[str, float]) -> None:
    """The tensors the table lists as lossy (model_deploy.py keeps them in float)."""
    if lossy:
        listed = ", ".join(f"{n} ({db:.1f} dB)" for n, db in list(lossy.items())[:5])
        more = ", …" if len(lossy) > 5 else ""
        say(f"{len(lossy)} tensor(s) lose most in INT8 on these samples: {listed}{more}")


def grow_float_layers(req: Request, cal, samples, entries, lossy) -> dict[str, float]:
    """The layers the output-cosine growth keeps in float beyond the lossy
    tensors' (layer -> the loss it added), said as they are measured."""
    import tempfile

    from tpuc.base.cali_table import CaliTable, format_table
    from tpuc.target.chips import get_chip
    from tpuc.workflow.auto_mix import float_mode, lossy_float_layers, share_text
    from tpuc.workflow.calibration.float_growth import FloatGrowth

    if req.mix_num == 0:
        return {}
    chip = get_chip(req.chip)
    mode = float_mode(chip)
    start = {layer.name: layer.mode for layer in lossy_float_layers(cal.module, lossy, chip)}
    inputs = [cal.load(s) for s in samples[: req.mix_num]]
    with tempfile.TemporaryDirectory(prefix="tpuc_growth_") as tmp:
        table = Path(tmp) / "cali_table"
        table.write_text(format_table(CaliTable(entries=dict(entries)), mlir=req.mlir.name,
                                      methods=[req.method], histogram_bins=req.bins,
                                      samples=len(samples), tune_num=0))  # fmt: skip
        growing = FloatGrowth(cal.module, cal.weights, table, chip, inputs, cal.interp, Path(tmp))
        growth = growing.grow(start, req.mix_cos, mode, say)
    floated = [*start, *growth.layers]
    outcome = "reached"
    if not growth.reached:
        outcome = "not reached (no layer left adding error): the round that measured best is kept"
    first, last = growth.scores[0].positions, growth.scores[-1].positions
    agree = f", positions agreeing {first} -> {last}" if first.positions else ""
    say(f"auto mix: output cosine {growth.before:.6f} -> {growth.after:.6f}{agree} on "
        f"{len(inputs)} sample(s), target {req.mix_cos} {outcome}; {len(growth.layers)} "
        f"layer(s) grown into {mode}, {len(floated)} in all; "
        f"{share_text(cal.module, chip, floated)} ({growth.seconds:.1f} s)")  # fmt: skip
    return growth.layers


def run_plan(req: Request, cal, samples, tune_samples, protected, generated, start) -> int:
    """Techniques and/or search, then every output written together."""
    from tpuc.base.cali_table import CaliTable, format_table
    from tpuc.base.files import OutputSet
    from tpuc.ir.module_io import save_module
    from tpuc.ir.qtable import format_qtable
    from tpuc.workflow.calibration.techniques import run_plan as run_techniques

    outcome = run_techniques(cal, samples, tune_samples, req.plan, progress, say)
    mlir = req.output_mlir if outcome.weights_changed else req.mlir
    methods = [req.method] + list(req.plan.techniques)
    if req.plan.search:
        methods.append(req.plan.search)
    grown = grow_float_layers(req, cal, samples, outcome.entries, outcome.lossy)
    table = CaliTable(entries=outcome.entries, lossy=outcome.lossy, float_layers=grown)
    text = format_table(table, mlir=mlir.name, methods=methods,
                        histogram_bins=req.bins, samples=len(samples),
                        tune_num=len(tune_samples), generated=generated)  # fmt: skip
    with OutputSet(protected=tuple(protected)) as out:
        if outcome.weights_changed:
            weights = mlir.with_name(f"{mlir.stem}_top_f32_all_weight.npz")
            save_module(out, cal.module, mlir, cal.weights, weights)
        if outcome.qtable is not None:
            out.write_text(req.qtable, format_qtable(outcome.qtable, [f"chip: {req.plan.chip}"]))
        out.write_text(req.output, text)
    say_lossy(outcome.lossy)
    say(f"{len(outcome.entries)} tensors -> {req.output} ({time.perf_counter() - start:.1f} s)")
    if outcome.weights_changed:
        say(f"changed module -> {mlir}; deploy it with this table: model_deploy.py --mlir {mlir} "
            f"--calibration_table {req.output} ...")  # fmt: skip
    if outcome.qtable is not None:
        say(f"qtable -> {req.qtable} (model_deploy.py --quantize_table {req.qtable})")
    if outcome.after < outcome.before:
        warn(f"the INT8 output cosine went down ({outcome.before:.6f} -> {outcome.after:.6f}) "
             "on these samples: compare with a plain calibration before deploying")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
