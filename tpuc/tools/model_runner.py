"""model_runner.py: run a model on an input npz and save the outputs as npz.

    model_runner.py --input in.npz --model m.mlir|m.onnx --output out.npz [--dump_all_tensors]

`.mlir` runs in the TOP interpreter (the weight npz named by
`module.weight_file` must sit next to it); `.onnx` runs in onnxruntime. With
`--dump_all_tensors` every intermediate tensor is saved too. The input npz
is keyed by the model's input names. `run_onnx` is also the reference run
of model_transform.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tpuc.errors import TpucError, run_cli
from tpuc.tools.cli import existing_file, make_parser

PROG = "model_runner.py"


def build_parser():
    parser = make_parser(
        PROG,
        "Run a model (.mlir in the TOP interpreter, .onnx in onnxruntime) on an input npz "
        "and save its outputs as npz.",
        "A .mlir needs its weight npz (module.weight_file) next to it. The input npz is keyed "
        "by the model's input names; shapes must match.",
    )
    parser.add_argument("--input", required=True, help="input .npz, keyed by input name")
    parser.add_argument("--model", required=True, help="model: .mlir (TOP) or .onnx")
    parser.add_argument(
        "--output", help="output .npz (default: <model name>_output.npz in the current directory)"
    )
    parser.add_argument(
        "--dump_all_tensors",
        action="store_true",
        help="save every intermediate tensor, not only the outputs",
    )
    return parser


# --- onnxruntime ------------------------------------------------------------------

_ORT_DTYPES = {
    "tensor(float)": "float32",
    "tensor(double)": "float64",
    "tensor(float16)": "float16",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int16)": "int16",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(uint16)": "uint16",
    "tensor(bool)": "bool",
}


def onnx_node_outputs(model) -> list[str]:
    """Every tensor produced by a node of the main graph, in node order."""
    seen: set[str] = set()
    names = []
    for node in model.graph.node:
        for name in node.output:
            if name and name not in seen:
                seen.add(name)
                names.append(name)
    return names


def run_onnx(
    model_path: str,
    inputs: Mapping,
    *,
    dump_all: bool = False,
    tensors: Mapping[str, str] | None = None,
    notes: Callable[[str], None] | None = None,
) -> dict:
    """Run an ONNX model in onnxruntime. Returns the graph outputs by name;
    plus, with `dump_all`, every node output, and the tensors of `tensors`
    (ONNX name -> key in the result). Tensors onnxruntime cannot expose are
    left out (reported through `notes`)."""
    import onnx

    try:
        model = onnx.load(model_path)
    except Exception as exc:
        raise TpucError(f"{model_path}: not a valid ONNX model ({_first_line(exc)})") from None
    keys = {o.name: o.name for o in model.graph.output}
    extra = dict(tensors or {})
    if dump_all:
        extra.update({n: extra.get(n, n) for n in onnx_node_outputs(model)})
    extra = {n: k for n, k in extra.items() if n not in keys}
    session, exposed = _session(model, model_path, list(extra), notes or (lambda _: None))
    keys.update({n: extra[n] for n in exposed})
    feed = _feed(session, inputs, model_path)
    names = [o.name for o in session.get_outputs()]
    try:
        values = session.run(names, feed)
    except Exception as exc:
        raise TpucError(f"{model_path}: onnxruntime failed: {_first_line(exc)}") from None
    return {keys[n]: v for n, v in zip(names, values, strict=True)}


def _session(model, model_path: str, extra: list[str], notes: Callable[[str], None]):
    """An InferenceSession exposing `extra` tensors as outputs if it can."""
    import onnx

    if extra:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        copy.graph.output.extend(onnx.ValueInfoProto(name=n) for n in extra)
        try:
            return _make_session(copy, model_path, notes), extra
        except TpucError as exc:
            notes(f"onnxruntime cannot expose intermediate tensors ({exc}); outputs only")
    return _make_session(model, model_path, notes), []


def _make_session(model, model_path: str, notes: Callable[[str], None]):
    """A CPU session from an in-memory model; an IR version newer than
    onnxruntime supports is lowered once on the copy (never on disk)."""
    import re

    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    for attempt in range(2):
        try:
            data = model.SerializeToString()
            return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        except ValueError as exc:  # protobuf over 2 GiB
            raise TpucError(f"{model_path}: cannot hand the model to onnxruntime ({exc})") from None
        except Exception as exc:
            message = _first_line(exc)
            match = re.search(r"max supported IR version: (\d+)", message)
            if attempt == 0 and match and model.ir_version > int(match.group(1)):
                notes(f"running with IR version {match.group(1)} (model has {model.ir_version})")
                lowered = type(model)()
                lowered.CopyFrom(model)
                lowered.ir_version = int(match.group(1))
                model = lowered
                continue
            raise TpucError(f"{model_path}: onnxruntime cannot load it: {message}") from None
    raise AssertionError("unreachable")


def _feed(session, inputs: Mapping, model_path: str) -> dict:
    import numpy as np

    feed = {}
    for spec in session.get_inputs():
        if spec.name not in inputs:
            raise TpucError(f"{model_path}: no data for input '{spec.name}' (shape {spec.shape})")
        dtype = _ORT_DTYPES.get(spec.type, "float32")
        feed[spec.name] = np.require(inputs[spec.name], dtype, "C")
    return feed


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- the tool ----------------------------------------------------------------------


def run_mlir_file(model_path: str, inputs: Mapping, dump_all: bool) -> dict:
    from tpuc.interp.top_interpreter import run_top
    from tpuc.module_io import load_module
    from tpuc.preprocess import input_specs, inputs_from_npz

    module, store = load_module(model_path)
    feed = inputs_from_npz(inputs, input_specs(module), "--input")
    return run_top(module, store, feed, dump_all=dump_all)


def run_onnx_file(model_path: str, inputs: Mapping, dump_all: bool) -> dict:
    return run_onnx(model_path, inputs, dump_all=dump_all, notes=lambda m: print(f"note: {m}"))


RUNNERS: dict[str, Callable[[str, Mapping, bool], dict]] = {
    ".mlir": run_mlir_file,
    ".onnx": run_onnx_file,
}
"""Model file suffix -> runner (bmodel, tflite ... arrive with their tools)."""


def run(argv: list[str] | None = None) -> int:
    from tpuc.files import OutputSet, load_npz

    args = build_parser().parse_args(argv)
    model = existing_file(args.model, "--model")
    runner = RUNNERS.get(model.suffix.lower())
    if runner is None:
        known = ", ".join(sorted(RUNNERS))
        raise TpucError(f"--model {args.model}: unsupported model type (supported: {known})")
    existing_file(args.input, "--input")
    inputs = load_npz(args.input)
    output = args.output or f"{model.stem}_output.npz"
    results = runner(str(model), inputs, args.dump_all_tensors)
    with OutputSet(protected=(args.input, args.model)) as out:
        out.save_npz(output, results)
    print(f"saved {len(results)} tensor(s) to {output}")
    return 0


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
