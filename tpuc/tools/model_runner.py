"""model_runner.py: run a model on an input npz and save the outputs as npz.

    model_runner.py --input in.npz --model m.bmodel|m.mlir|m.onnx|m.tflite --output out.npz
                    [--dump_all_tensors] [--out_fixed] [--profile timeline.json]

`.prototxt` (with `--model_data x.caffemodel`) runs in OpenCV's Caffe
importer, outputs keyed by layer name. `.bmodel` runs in tpuc's device
simulator (tpuc.target.runtime); `.mlir` in the TOP
interpreter or, for a TPU module (`_tpu.mlir`), the TPU interpreter (the
weight npz named by `module.weight_file` must sit next to it); `.onnx` in
onnxruntime; `.tflite` in LiteRT's reference kernels (inputs and outputs in
the model's own layout, NHWC for images). With `--dump_all_tensors` every
intermediate tensor is saved too (a bmodel needs the `_tensor_location.json`
model_deploy wrote next to it). `--out_fixed` keeps the stored integers of
quantized tensors instead of their real values. A bmodel's int8/uint8 input
(model_deploy.py --quant_input) takes an integer array as its stored values
and quantizes a float one with the bmodel's input scale, as TPU-MLIR's
model_runner does. `--profile FILE` (a .bmodel
only) writes the cycle model's per-command timeline as JSON and prints the
ten most expensive layers. The input npz is keyed by the model's input names.
onnxruntime runs come from the ONNX frontend's `run_onnx`
(tpuc.frontends.onnx.reference), the reference run of model_transform.py too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tpuc.base.errors import TpucError, run_cli
from tpuc.tools.cli import existing_file, make_parser

PROG = "model_runner.py"


def build_parser():
    parser = make_parser(
        PROG,
        "Run a model (.bmodel in the device simulator, .mlir in the TOP or TPU interpreter, "
        ".onnx in onnxruntime, .tflite in LiteRT) on an input npz and save its outputs as npz.",
        "A .mlir needs its weight npz (module.weight_file) next to it. The input npz is keyed "
        "by the model's input names; shapes (and for a bmodel, dtypes) must match. "
        "--dump_all_tensors on a bmodel reads the <prefix>_tensor_location.json that "
        "model_deploy.py wrote next to it.",
    )
    parser.add_argument("--input", required=True, help="input .npz, keyed by input name")
    parser.add_argument(
        "--model",
        required=True,
        help=(
            "model: .bmodel, .mlir (TOP or TPU), .onnx, .tflite or Caffe .prototxt "
            "(with --model_data)"
        ),
    )
    parser.add_argument("--model_data", help="Caffe .prototxt: its weights (.caffemodel)")
    parser.add_argument(
        "--output", help="output .npz (default: <model name>_output.npz in the current directory)"
    )
    parser.add_argument(
        "--dump_all_tensors",
        action="store_true",
        help="save every intermediate tensor, not only the outputs",
    )
    parser.add_argument(
        "--chip",
        type=str.lower,
        help="bmodel: the simulated device's chip (default: the bmodel's); another chip's "
        "bmodel is refused",
    )
    parser.add_argument(
        "--out_fixed",
        action="store_true",
        help="bmodel / TPU .mlir: save quantized tensors as their stored integers, not real values",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="bmodel: write the estimated per-command timeline (engine, layer, start and end "
        "cycle, bytes or MACs) as JSON to FILE and print the ten most expensive layers",
    )
    return parser


# --- the tool ----------------------------------------------------------------------


@dataclass(frozen=True)
class RunOptions:
    dump_all: bool = False  # every tensor, not only the outputs
    out_fixed: bool = False  # stored integers of quantized tensors
    chip: str | None = None  # bmodel: the simulated device's chip
    model_data: str | None = None  # Caffe: the .caffemodel


def run_mlir_file(model_path: str, inputs: Mapping, options: RunOptions) -> dict:
    """A TOP module in the TOP interpreter, a lowered TPU module in the TPU
    interpreter (later states hold reordered weights: run their bmodel)."""
    from tpuc.base.module_state import ModuleState, state_of
    from tpuc.interp.accelerator import accelerated
    from tpuc.interp.top_interpreter import run_top
    from tpuc.interp.tpu_interpreter import TpuInterpreter
    from tpuc.ir.module_io import load_module
    from tpuc.ir.preprocess import input_specs, inputs_from_npz

    module, store = load_module(model_path)
    feed = inputs_from_npz(inputs, input_specs(module), "--input")
    state = state_of(module)
    if state is None or state in (ModuleState.TOP_F32, ModuleState.TOP_CALIBRATED):
        native = accelerated("model_runner")
        return run_top(module, store, feed, dump_all=options.dump_all, native=native)
    if state != ModuleState.TPU_LOWERED:
        raise TpucError(
            f"--model {model_path}: a {state} module has reordered weights; run the _tpu.mlir "
            "or the bmodel instead"
        )
    # integer arrays stay integers: a quantized input (strip-io-quant) takes them as stored values
    feed = {k: inputs[k] if inputs[k].dtype.kind in "iu" else v for k, v in feed.items()}
    interpreter = TpuInterpreter(module)
    outputs = interpreter.run(store, feed, dump_all=options.dump_all)
    return outputs if options.out_fixed else interpreter.real_values(outputs)


def run_onnx_file(model_path: str, inputs: Mapping, options: RunOptions) -> dict:
    from tpuc.frontends.onnx.reference import run_onnx

    notes = lambda m: print(f"note: {m}")  # noqa: E731
    return run_onnx(model_path, inputs, dump_all=options.dump_all, notes=notes)


def run_tflite_file(model_path: str, inputs: Mapping, options: RunOptions) -> dict:
    """LiteRT's reference kernels; inputs and outputs in the model's layout."""
    from tpuc.frontends.tflite.reference import run_tflite

    return run_tflite(model_path, inputs, dump_all=options.dump_all)


def run_bmodel_file(model_path: str, inputs: Mapping, options: RunOptions) -> dict:
    """The device simulator (tpuc's ISA) or the vendor runtime (native); a
    combined bmodel runs the stage whose input shapes are the inputs'."""
    import numpy as np

    from tpuc.target.runtime import load_bmodel
    from tpuc.target.vendor.run import is_native, run_native

    if is_native(model_path):
        if options.dump_all or options.chip:
            raise TpucError(
                f"{model_path}: a native bmodel runs in the vendor runtime, which gives its "
                "outputs only (no --dump_all_tensors or --chip)"
            )
        return run_native(model_path, inputs, fixed=options.out_fixed)

    shapes = {name: np.shape(value) for name, value in inputs.items()}
    program = load_bmodel(model_path, device=options.chip, shapes=shapes)
    rows = tensor_location(model_path)["tensors"] if options.dump_all else None
    return program.run(inputs, out_fixed=options.out_fixed, dump=rows)


def tensor_location(model_path: str) -> dict:
    """The `_tensor_location.json` next to a bmodel that names it."""
    import json
    from pathlib import Path

    bmodel = Path(model_path)
    for candidate in sorted(bmodel.parent.glob("*_tensor_location.json")):
        try:
            rows = json.loads(candidate.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rows, dict) and rows.get("bmodel") == bmodel.name:
            check_location_rows(rows.get("tensors"), str(candidate))
            return rows
    raise TpucError(
        f"--dump_all_tensors: no *_tensor_location.json for {bmodel.name} in "
        f"{bmodel.parent or '.'} (model_deploy.py writes it next to the bmodel)"
    )


_ROW_FIELDS: dict[str, tuple[type, ...]] = {
    "layer_id": (int,),
    "name": (str,),
    "address": (int,),
    "dtype": (str,),
    "shape": (list,),
}
_OPTIONAL_FIELDS: dict[str, tuple[type, ...]] = {
    "quantized": (bool,),
    "scale": (int, float),
    "zero_point": (int,),
}


def check_location_rows(rows, source: str) -> None:
    """The rows the simulator reads tensors by: field types and values (a
    hand-edited file would otherwise fail deep in the run)."""
    from tpuc.base.dtypes import DTYPE_BYTES

    if not isinstance(rows, list):
        raise TpucError(f"{source}: 'tensors' must be a list of tensor rows")
    for index, row in enumerate(rows):
        where = f"{source}: tensors[{index}]"
        if not isinstance(row, dict):
            raise TpucError(f"{where}: not an object")
        for key, kinds in _ROW_FIELDS.items():
            _check_field(row, key, kinds, where, required=True)
        for key, kinds in _OPTIONAL_FIELDS.items():
            _check_field(row, key, kinds, where, required=False)
        if row["dtype"] not in DTYPE_BYTES:
            raise TpucError(f"{where}: unknown dtype '{row['dtype']}'")
        shape = row["shape"]
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise TpucError(f"{where}: 'shape' must be a list of non-negative integers")
        if row["address"] < 0 or row["layer_id"] < 0:
            raise TpucError(f"{where}: 'address' and 'layer_id' must not be negative")


def _check_field(row: dict, key: str, kinds: tuple[type, ...], where: str, required: bool) -> None:
    if key not in row:
        if required:
            raise TpucError(f"{where}: no '{key}' field")
        return
    value = row[key]
    wrong_bool = isinstance(value, bool) and bool not in kinds
    if wrong_bool or not isinstance(value, kinds):
        names = " or ".join(_JSON_TYPES[k] for k in kinds)
        raise TpucError(f"{where}: '{key}' must be {names}, not {json_type(value)}")


_JSON_TYPES = {
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    bool: "a boolean",
}


def json_type(value) -> str:
    """The JSON name of a decoded value's type."""
    for kind, name in ((bool, "a boolean"), (int, "an integer"), (float, "a number")):
        if isinstance(value, kind):
            return name
    return {str: "a string", list: "a list", dict: "an object"}.get(type(value), "null")


def run_caffe_file(model_path: str, inputs: Mapping, options: RunOptions) -> dict:
    """OpenCV's Caffe importer: outputs keyed by layer name (every layer's
    first output with --dump_all_tensors)."""
    from tpuc.frontends.caffe.reference import run_caffe

    if options.model_data is None:
        raise TpucError(
            f"--model_data: missing; the Caffe model {model_path} needs its .caffemodel"
        )
    existing_file(options.model_data, "--model_data")
    notes = lambda m: print(f"note: {m}")  # noqa: E731
    return run_caffe(model_path, options.model_data, inputs, dump_all=options.dump_all, notes=notes)


RUNNERS: dict[str, Callable[[str, Mapping, RunOptions], dict]] = {
    ".mlir": run_mlir_file,
    ".onnx": run_onnx_file,
    ".tflite": run_tflite_file,
    ".bmodel": run_bmodel_file,
}
RUNNERS[".prototxt"] = run_caffe_file
"""Model file suffix -> runner(path, inputs, options)."""


def run(argv: list[str] | None = None) -> int:
    from tpuc.base.files import OutputSet, load_npz

    args = build_parser().parse_args(argv)
    model = existing_file(args.model, "--model")
    runner = RUNNERS.get(model.suffix.lower())
    if runner is None:
        known = ", ".join(sorted(RUNNERS))
        raise TpucError(f"--model {args.model}: unsupported model type (supported: {known})")
    existing_file(args.input, "--input")
    inputs = load_npz(args.input)
    output = args.output or f"{model.stem}_output.npz"
    for flag, value in (("--chip", args.chip), ("--profile", args.profile)):
        if value is not None and model.suffix.lower() != ".bmodel":
            raise TpucError(f"{flag} applies to a .bmodel only")
    if args.model_data is not None and model.suffix.lower() != ".prototxt":
        raise TpucError("--model_data applies to a Caffe .prototxt only")
    options = RunOptions(args.dump_all_tensors, args.out_fixed, args.chip, args.model_data)
    results = runner(str(model), inputs, options)
    with OutputSet(protected=(args.input, args.model)) as out:
        out.save_npz(output, results)
        if args.profile is not None:
            out.write_text(args.profile, profile_bmodel(str(model)))
    print(f"saved {len(results)} tensor(s) to {output}")
    return 0


def profile_bmodel(model_path: str) -> str:
    """The cycle model's timeline as JSON text; prints the totals and the
    ten most expensive layers (named from _tensor_location.json if present)."""
    import json

    from tpuc.target.bmodel import load_bmodel_file
    from tpuc.target.runtime.profile import estimate, profile_document, top_layers
    from tpuc.target.vendor.run import is_native

    if is_native(model_path):
        raise TpucError(
            f"--profile: {model_path} is a native bmodel; its latency is the vendor library's "
            "estimate, printed by model_deploy.py with every command in "
            "<prefix>_compiler_profile.txt"
        )
    profile = estimate(load_bmodel_file(model_path), model_path)
    names = layer_names(model_path)
    print(f"estimated latency: {profile.summary()}")
    for line in top_layers(profile, names):
        print(f"  {line}")
    return json.dumps(profile_document(profile, names), indent=1) + "\n"


def layer_names(model_path: str) -> dict[int, str]:
    """layer_id -> first tensor name, from the bmodel's _tensor_location.json
    (empty without one: layers are then called by number)."""
    try:
        rows = tensor_location(model_path)["tensors"]
    except TpucError:
        return {}
    names: dict[int, str] = {}
    for row in rows:
        names.setdefault(int(row["layer_id"]), str(row["name"]))
    return names


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
