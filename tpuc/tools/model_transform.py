"""model_transform.py: import a model into the TOP dialect and check it.

Steps (each announced on one line):
1. check the request: files, shapes, names, tolerance, preprocessing flags;
2. convert the model (ONNX or TFLite) -> `<name>_origin.mlir` +
   `<name>_top_f32_all_origin_weight.npz`;
3. shape-infer, canonicalize, count FLOPs -> `--mlir` + `<name>_top_f32_all_weight.npz`;
4. with --test_input: preprocess it -> `<name>_in_f32.npz`, run the TOP
   interpreter -> `--test_result` (every tensor), run the reference
   (onnxruntime for ONNX, LiteRT for TFLite, OpenCV's Caffe importer for a
   `--model_def x.prototxt --model_data x.caffemodel`) on the original model
   (every tensor TOP also has; `<name>_ref_outputs.npz` with --debug) and
   compare tensor by tensor. A TFLite model's inputs and outputs keep its own
   layout (NHWC); intermediates are compared in TOP's NCHW.
All files go next to `--mlir` and are written together at the end; a bad
request leaves nothing behind and never touches the input model. When the
comparison fails the files are kept and the run ends with exit status 1,
naming the first divergent tensor in network order.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tpuc.base.errors import TpucError, run_cli
from tpuc.tools.cli import existing_file, make_parser, parse_list, parse_shapes

if TYPE_CHECKING:  # imported lazily at run time: --help must stay fast
    from tpuc.base.compare import CompareResult, Tolerance
    from tpuc.frontends.onnx.reference import OnnxNames
    from tpuc.ir.preprocess import Preprocess

PROG = "model_transform.py"
EPILOG = (
    "Outputs, next to --mlir: <name>_origin.mlir and <name>_top_f32_all_origin_weight.npz; the "
    "--mlir file and <name>_top_f32_all_weight.npz; with --test_input also <name>_in_f32.npz (the "
    "preprocessed input) and --test_result; with --debug also <name>_ref_outputs.npz "
    "(onnxruntime or LiteRT tensors). Exit status 1 on a bad request (nothing is "
    "written) or when TOP and the reference diverge (files are kept, the first divergent tensor "
    "is named)."
)
MAX_FAILURE_LINES = 10


def build_parser():
    from tpuc.ir.preprocess import add_preprocess_args

    parser = make_parser(
        PROG,
        "Convert a model to the TOP dialect and, with --test_input, check the TOP interpreter "
        "(tpuc's own float kernels) against the source framework (onnxruntime, LiteRT) "
        "tensor by tensor.",
        EPILOG,
    )
    parser.add_argument("--model_name", required=True, help="model name, prefix of every file")
    parser.add_argument(
        "--model_def", required=True, help="model definition file (.onnx, .tflite, Caffe .prototxt)"
    )
    parser.add_argument("--model_data", help="Caffe weights (.caffemodel) for a .prototxt")
    parser.add_argument(
        "--input_shapes",
        help="input shapes, e.g. [[1,3,224,224],[1,10]], in the model's own layout (NHWC for "
        "TFLite) (default: from the model; required for an ONNX model's dynamic dims; a "
        "TFLite model's dynamic batch is 1)",
    )
    parser.add_argument(
        "--output_names", help="comma-separated tensors to use as outputs (cuts the graph)"
    )
    parser.add_argument(
        "--test_input",
        help="image, .npy or .npz to verify with; several files comma-separated, one per input",
    )
    parser.add_argument(
        "--test_result", help="npz of every TOP tensor (default: <name>_top_outputs.npz)"
    )
    parser.add_argument("--excepts", default="", help="comma-separated tensors not compared")
    parser.add_argument(
        "--tolerance", default="0.99,0.99", help="minimum cosine,euclid similarity (0.99,0.99)"
    )
    parser.add_argument("--mlir", required=True, help="output TOP .mlir file")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="keep the reference tensors (<name>_ref_outputs.npz); per-tensor lines",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print one comparison line per tensor"
    )
    add_preprocess_args(parser)
    return parser


@dataclass(frozen=True)
class Request:
    """A checked model_transform request and the files it will write."""

    name: str
    model_def: Path
    input_shapes: list[list[int]] | None
    output_names: list[str] | None
    test_input: list[str]
    tolerance: Tolerance
    excepts: list[str]
    preprocess: Preprocess
    mlir: Path
    debug: bool
    verbose: bool
    test_result: Path
    model_data: Path | None = None  # Caffe weights

    def path(self, suffix: str) -> Path:
        """`<dir of --mlir>/<name><suffix>`."""
        return self.mlir.parent / f"{self.name}{suffix}"


def check_request(args) -> Request:
    """Everything that can be checked before the model is read."""
    from tpuc.base.compare import Tolerance
    from tpuc.ir.preprocess import preprocess_from_args

    name = args.model_name.strip()
    if not name or "/" in name or "\\" in name:
        raise TpucError(f"--model_name: '{args.model_name}' is not a usable file-name prefix")
    model_def = existing_file(args.model_def, "--model_def")
    suffix = model_def.suffix.lower()
    model_data = check_model_data(args, suffix)
    if suffix not in FRONTENDS:
        known = ", ".join(sorted(FRONTENDS))
        raise TpucError(f"--model_def {args.model_def}: unknown model format (supported: {known})")
    output_names = parse_list(args.output_names) or None
    if args.output_names is not None and not output_names:
        raise TpucError("--output_names: expected comma-separated tensor names")
    test_input = parse_list(args.test_input)
    for path in test_input:
        existing_file(path, "--test_input")
    mlir = Path(args.mlir)
    default_result = mlir.parent / f"{name}_top_outputs.npz"
    request = Request(
        name=name,
        model_def=model_def,
        input_shapes=parse_shapes(args.input_shapes),
        output_names=output_names,
        test_input=test_input,
        tolerance=Tolerance.parse(args.tolerance),
        excepts=parse_list(args.excepts),
        preprocess=preprocess_from_args(args),
        mlir=mlir,
        debug=bool(args.debug),
        verbose=bool(args.verbose or args.debug),
        test_result=Path(args.test_result) if args.test_result else default_result,
        model_data=model_data,
    )
    _check_distinct(request)
    return request


def check_model_data(args, suffix: str) -> Path | None:
    """--model_data goes with a Caffe .prototxt and only with it."""
    data = getattr(args, "model_data", None)
    if suffix == ".caffemodel":
        raise TpucError(
            f"--model_def {args.model_def}: a .caffemodel holds the weights: pass it as "
            "--model_data and the network's .prototxt as --model_def"
        )
    if suffix != ".prototxt":
        if data is not None:
            raise TpucError("--model_data: only a Caffe .prototxt takes weights from a file")
        return None
    if data is None:
        raise TpucError(
            f"--model_data: missing; the Caffe model {args.model_def} needs its .caffemodel "
            "(--model_def x.prototxt --model_data x.caffemodel)"
        )
    return existing_file(data, "--model_data")


def _check_distinct(req: Request) -> None:
    outputs = {
        "--mlir": req.mlir,
        "origin mlir": req.path("_origin.mlir"),
        "weights": req.path("_top_f32_all_weight.npz"),
        "origin weights": req.path("_top_f32_all_origin_weight.npz"),
        "--test_result": req.test_result,
        "test input npz": req.path("_in_f32.npz"),
    }
    seen: dict[Path, str] = {}
    for role, path in outputs.items():
        other = seen.get(path.resolve())
        if other:
            raise TpucError(f"{path}: used both as {other} and as {role}; choose another name")
        seen[path.resolve()] = role


# --- the steps -----------------------------------------------------------------------


@dataclass(frozen=True)
class OnnxReference:
    """onnxruntime on the ONNX file, knowing only its tensor names."""

    names: OnnxNames
    label: str = "onnxruntime"

    def run(self, req: Request, inputs, top_names: set[str]) -> tuple[dict, int]:
        from tpuc.frontends.onnx.reference import run_onnx

        keys = onnx_tensor_keys(self.names, top_names)
        say(f"running onnxruntime on {req.model_def} ({len(keys)} tensors to compare)")
        ref = run_onnx(
            str(req.model_def),
            inputs,
            tensors=keys,
            notes=lambda m: say(f"note: {m}"),
            names=self.names,
        )
        return ref, len(keys)


@dataclass(frozen=True)
class TfliteReference:
    """LiteRT on the .tflite file; `keys` maps TOP tensors to TFLite ones."""

    keys: dict
    ranges: dict  # a pre-quantized model's own activation ranges (empty for a float one)
    label: str = "LiteRT"

    def run(self, req: Request, inputs, top_names: set[str]) -> tuple[dict, int]:
        from tpuc.frontends.tflite.reference import run_tflite

        keys = {k: v for k, v in self.keys.items() if k in top_names}
        say(f"running LiteRT on {req.model_def} ({len(keys)} tensors to compare)")
        ref = run_tflite(str(req.model_def), inputs, keys=keys, notes=lambda m: say(f"note: {m}"))
        return ref, len(keys)


def _convert_onnx(req: Request):
    """Parse the file once: the frontend converts the parsed model and the
    reference run keeps only its names (the parsed weights are freed here)."""
    from tpuc.frontends.onnx import convert_onnx
    from tpuc.frontends.onnx.graph import load_model
    from tpuc.frontends.onnx.reference import OnnxNames

    path = str(req.model_def)
    model = load_model(path)
    module, weights = convert_onnx(path, req.name, req.input_shapes, req.output_names, model=model)
    return module, weights, OnnxReference(OnnxNames.of(model))


def _convert_tflite(req: Request):
    from tpuc.frontends.tflite import convert_tflite

    path = str(req.model_def)
    module, weights, keys, ranges = convert_tflite(
        path, req.name, req.input_shapes, req.output_names
    )
    return module, weights, TfliteReference(keys, ranges)


@dataclass(frozen=True)
class CaffeReference:
    """OpenCV's Caffe importer on the prototxt + caffemodel."""

    names: object  # tpuc.frontends.caffe.reference.CaffeNames
    label: str = "OpenCV"

    def run(self, req: Request, inputs, top_names: set[str]) -> tuple[dict, int]:
        ref = self.names.run_reference(inputs, top_names, say)
        return ref, len(ref)


def _convert_caffe(req: Request):
    from tpuc.frontends.caffe import convert_caffe
    from tpuc.frontends.caffe.reference import CaffeNames

    assert req.model_data is not None  # check_model_data
    model_def, model_data = str(req.model_def), str(req.model_data)
    module, weights, layer_tensors = convert_caffe(
        model_def, model_data, req.name, req.input_shapes, req.output_names
    )
    return module, weights, CaffeReference(CaffeNames(model_def, model_data, layer_tensors))


FRONTENDS: dict[str, Callable[[Request], tuple]] = {
    ".onnx": _convert_onnx,
    ".tflite": _convert_tflite,
    ".prototxt": _convert_caffe,
}
"""Model suffix -> converter returning (TOP module, weights, the reference
run of the source model: an object with `label` and `run`)."""


def say(message: str) -> None:
    """One progress line, flushed so it shows before a long step runs."""
    print(f"[{PROG}] {message}", flush=True)


def onnx_tensor_keys(names: OnnxNames, top_names: set[str]) -> dict[str, str]:
    """ONNX tensor -> TOP tensor name, for tensors both have (a TOP name is
    the ONNX tensor name, or TPU-MLIR's `<tensor>_<OpType>`)."""
    keys = {}
    for out, op_type in names.produced:
        if out in top_names:
            keys[out] = out
        elif f"{out}_{op_type}" in top_names:
            keys[out] = f"{out}_{op_type}"
    return keys


def verify(req: Request, module, store, inputs, out, reference):
    """Run TOP and the source framework on `inputs`; stage the npz files;
    return the comparison. Empties `store` once TOP has run, so that the
    weights are freed before the reference loads its own copy."""
    from tpuc.base.compare import compare_arrays
    from tpuc.interp.accelerator import accelerated
    from tpuc.interp.top_interpreter import run_top

    say(f"running the TOP interpreter -> {req.test_result}")
    # a progress bar only where someone watches (it would clutter logs); tpuc's
    # own kernels unless $TPUC_NATIVE=1, so the check tests what TOP means
    native = accelerated("model_transform")
    top = run_top(module, store, inputs, dump_all=True, progress=sys.stderr.isatty(), native=native)
    store.clear()
    out.save_npz(req.test_result, top)
    ref, _ = reference.run(req, inputs, set(top))
    if req.debug:
        out.save_npz(req.path("_ref_outputs.npz"), ref)
    skip = set(req.excepts) | set(inputs)
    return compare_arrays(top, ref, req.tolerance, excepts=skip, order=list(top))


def report(req: Request, result: CompareResult, finals: list[str]) -> None:
    """Per-tensor lines (all with -v/--debug, else the failing ones), the
    summary, and a table of the final outputs."""
    width = max([32] + [len(r.name) for r in result.rows])
    for row in result.rows if req.verbose else result.failures[:MAX_FAILURE_LINES]:
        print(row.line(width))
    for line in result.summary_lines():
        print(line)
    for line in result.table([n for n in finals if result.row(n)]):
        print(f"  {line}")


def divergence(req: Request, result: CompareResult, label: str = "onnxruntime") -> TpucError:
    """The failure that names the first failing tensor in network order."""
    from tpuc.base.compare import Verdict

    first = result.failures[0]
    s = first.similarity
    if first.verdict is Verdict.NOT_MATCH:
        why = f"shape {list(first.shape)} vs {label} {list(first.ref_shape or ())}"
    else:
        why = f"cos {s.cosine:.6f}, euclid {s.euclid:.6f}; --tolerance {req.tolerance}"
    return TpucError(
        f"TOP and {label} diverge first at tensor '{first.name}' ({why}); "
        f"{len(result.failures)} tensor(s) fail; see {req.test_result} (rerun with -v for all)"
    )


def transform(req: Request) -> int:
    from tpuc.base.files import OutputSet
    from tpuc.ir.core import output_names
    from tpuc.ir.module_io import module_attr, save_module
    from tpuc.ir.preprocess import input_specs, load_inputs, with_preprocess
    from tpuc.ir.weights import WeightStore, attach_weights
    from tpuc.workflow.pipeline import transform as transform_stage

    protected = (req.model_def, *req.test_input, *[p for p in (req.model_data,) if p])
    with OutputSet(protected=protected) as out:
        say(f"converting {req.model_def}")
        module, weights, reference = FRONTENDS[req.model_def.suffix.lower()](req)
        store = WeightStore(weights)
        del weights  # the store holds them; cleared before the reference run
        attach_weights(module, store)
        annotate_inputs(module, req.preprocess)
        inputs = None
        if req.test_input:
            specs = with_preprocess(input_specs(module), req.preprocess)
            inputs = load_inputs(req.test_input, specs)
        origin_weights = req.path("_top_f32_all_origin_weight.npz")
        save_module(out, module, req.path("_origin.mlir"), store, origin_weights)
        say("shape-infer, canonicalize")
        transform_stage(module)
        say(f"FLOPs {module_attr(module, 'FLOPs', 0):,}")
        if getattr(reference, "ranges", None):
            write_own_table(req, module, reference.ranges, out)
        weight_path = req.path("_top_f32_all_weight.npz")
        save_module(out, module, req.mlir, store, weight_path)
        result = None
        if inputs is not None:
            out.save_npz(req.path("_in_f32.npz"), inputs)
            result = verify(req, module, store, inputs, out, reference)
    say(f"saved {', '.join(str(p) for p in written_files(req))}")
    if result is None:
        return 0
    report(req, result, output_names(module))
    if not result.rows:
        raise TpucError(
            f"no tensor of the TOP interpreter matches a {reference.label} tensor by name"
        )
    if not result.passed:
        raise divergence(req, result, reference.label)
    say(f"TOP matches {reference.label} (--tolerance {req.tolerance})")
    return 0


def write_own_table(req: Request, module, ranges: dict, out) -> None:
    """A pre-quantized model's scales and zero points as the calibration
    table `<name>_cali_table`, named by `module.cali_table` so that
    model_deploy.py --quantize INT8 uses it without --calibration_table."""
    from tpuc.base.cali_table import format_table
    from tpuc.frontends.tflite.quant import calibration_table
    from tpuc.ir.module_io import set_module_attr

    path = req.path("_cali_table")
    table = calibration_table(module, ranges)
    text = format_table(
        table,
        mlir=str(req.mlir),
        methods=["tflite"],
        histogram_bins=0,
        samples=0,
        tune_num=0,
        exact=True,
    )
    out.write_text(path, text)
    set_module_attr(module, "module.cali_table", path.name)
    say(f"pre-quantized model: its own scales and zero points -> {path}")


def written_files(req: Request) -> list[Path]:
    files = [req.path("_origin.mlir"), req.path("_top_f32_all_origin_weight.npz"), req.mlir]
    files.append(req.path("_top_f32_all_weight.npz"))
    if req.test_input:
        files += [req.path("_in_f32.npz"), req.test_result]
        if req.debug:
            files.append(req.path("_ref_outputs.npz"))
    return files


def annotate_inputs(module, preprocess: Preprocess) -> None:
    """Record the preprocessing on every top.Input that can take an image."""
    from tpuc.dialects.top import InputOp
    from tpuc.ir.preprocess import annotate_input

    for op in module.walk():
        if isinstance(op, InputOp):
            annotate_input(op, preprocess)


def run(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return transform(check_request(args))


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
