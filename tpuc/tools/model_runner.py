"""model_runner.py: run a model on an input npz and save the outputs as npz.

    model_runner.py --input in.npz --model m.bmodel|m.mlir|m.onnx --output out.npz
                    [--dump_all_tensors] [--out_fixed]

`.bmodel` runs in tpuc's device simulator (tpuc.runtime); `.mlir` in the TOP
interpreter or, for a TPU module (`_tpu.mlir`), the TPU interpreter (the
weight npz named by `module.weight_file` must sit next to it); `.onnx` in
onnxruntime. With `--dump_all_tensors` every intermediate tensor is saved
too (a bmodel needs the `_tensor_location.json` model_deploy wrote next to
it). `--out_fixed` keeps the stored integers of quantized tensors instead of
their real values. The input npz is keyed by the model's input names.
`run_onnx` is also the reference run of model_transform.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tpuc.errors import TpucError, run_cli
from tpuc.tools.cli import existing_file, make_parser

PROG = "model_runner.py"
EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"
"""onnxruntime option: where a model given as bytes keeps its external data."""


def build_parser():
    parser = make_parser(
        PROG,
        "Run a model (.bmodel in the device simulator, .mlir in the TOP or TPU interpreter, "
        ".onnx in onnxruntime) on an input npz and save its outputs as npz.",
        "A .mlir needs its weight npz (module.weight_file) next to it. The input npz is keyed "
        "by the model's input names; shapes (and for a bmodel, dtypes) must match. "
        "--dump_all_tensors on a bmodel reads the <prefix>_tensor_location.json that "
        "model_deploy.py wrote next to it.",
    )
    parser.add_argument("--input", required=True, help="input .npz, keyed by input name")
    parser.add_argument(
        "--model", required=True, help="model: .bmodel, .mlir (TOP or TPU) or .onnx"
    )
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


@dataclass(frozen=True)
class OnnxNames:
    """What a reference run needs to know of an ONNX model: its graph
    outputs and every node output with its op type, in node order. Kept
    instead of the parsed model, whose weights can then be freed."""

    outputs: tuple[str, ...]
    produced: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, model) -> OnnxNames:
        seen: set[str] = set()
        produced = []
        for node in model.graph.node:
            for name in node.output:
                if name and name not in seen:
                    seen.add(name)
                    produced.append((name, node.op_type))
        return cls(tuple(o.name for o in model.graph.output), tuple(produced))

    @classmethod
    def read(cls, model_path: str) -> OnnxNames:
        """Parse the file (its external data is not needed for names)."""
        import onnx

        try:
            model = onnx.load(model_path, load_external_data=False)
        except Exception as exc:
            raise TpucError(f"{model_path}: not a valid ONNX model ({_first_line(exc)})") from None
        return cls.of(model)


def run_onnx(
    model_path: str,
    inputs: Mapping,
    *,
    dump_all: bool = False,
    tensors: Mapping[str, str] | None = None,
    notes: Callable[[str], None] | None = None,
    names: OnnxNames | None = None,
) -> dict:
    """Run an ONNX model in onnxruntime. Returns the graph outputs by name;
    plus, with `dump_all`, every node output, and the tensors of `tensors`
    (ONNX name -> key in the result). Tensors onnxruntime cannot expose are
    left out (reported through `notes`). `names`: the model's names when
    the caller has already parsed it (else the file is parsed here)."""
    if names is None and (dump_all or tensors):
        names = OnnxNames.read(model_path)
    keys = {n: n for n in names.outputs} if names is not None else {}
    extra = dict(tensors or {})
    if dump_all and names is not None:
        extra.update({n: extra.get(n, n) for n, _ in names.produced})
    extra = {n: k for n, k in extra.items() if n not in keys}
    session, exposed = _session(model_path, list(extra), notes or (lambda _: None))
    keys.update({n: extra[n] for n in exposed})
    feed = _feed(session, inputs, model_path)
    out_names = [o.name for o in session.get_outputs()]
    try:
        values = session.run(out_names, feed)
    except Exception as exc:
        raise TpucError(f"{model_path}: onnxruntime failed: {_first_line(exc)}") from None
    return {keys.get(n, n): v for n, v in zip(out_names, values, strict=True)}


def _session(model_path: str, extra: list[str], notes: Callable[[str], None]):
    """An InferenceSession exposing `extra` tensors as outputs if it can."""
    if extra:
        try:
            return _make_session(model_path, extra, notes), extra
        except TpucError as exc:
            notes(f"onnxruntime cannot expose intermediate tensors ({exc}); outputs only")
    return _make_session(model_path, [], notes), []


def _make_session(model_path: str, extra: list[str], notes: Callable[[str], None]):
    """A CPU session on the file as it is, or with `extra` outputs; an IR
    version newer than onnxruntime supports is lowered once (in memory,
    never on disk)."""
    import re

    import onnxruntime as ort

    ir_version = None
    for attempt in range(2):
        options = ort.SessionOptions()
        options.log_severity_level = 3
        try:
            if not extra and ir_version is None:
                return ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
            data = _model_bytes(model_path, extra, ir_version, options)
            return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        except OSError as exc:
            raise TpucError(f"{model_path}: cannot read it ({exc.strerror})") from None
        except Exception as exc:
            message = _first_line(exc)
            match = re.search(r"IR version: (\d+), max supported IR version: (\d+)", message)
            if attempt == 0 and match and int(match.group(1)) > int(match.group(2)):
                ir_version = int(match.group(2))
                notes(f"running with IR version {ir_version} (model has {match.group(1)})")
                continue
            raise TpucError(f"{model_path}: onnxruntime cannot load it: {message}") from None
    raise AssertionError("unreachable")


def _model_bytes(model_path: str, extra: list[str], ir_version: int | None, options) -> bytes:
    """The model file with a serialized ModelProto appended that adds the
    `extra` graph outputs (and sets `ir_version`): protobuf merges repeated
    fields and keeps the last scalar, so onnxruntime reads the model with
    those changes, and the model is neither parsed nor serialized here."""
    import onnx

    tail = onnx.ModelProto()
    tail.graph.output.extend(onnx.ValueInfoProto(name=n) for n in extra)
    if ir_version is not None:
        tail.ir_version = ir_version
    folder = os.path.dirname(os.path.abspath(model_path))
    options.add_session_config_entry(EXTERNAL_DATA_FOLDER, folder)
    with open(model_path, "rb") as handle:
        return handle.read() + tail.SerializeToString()


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


@dataclass(frozen=True)
class RunOptions:
    dump_all: bool = False  # every tensor, not only the outputs
    out_fixed: bool = False  # stored integers of quantized tensors
    chip: str | None = None  # bmodel: the simulated device's chip


def run_mlir_file(model_path: str, inputs: Mapping, options: RunOptions) -> dict:
    """A TOP module in the TOP interpreter, a lowered TPU module in the TPU
    interpreter (later states hold reordered weights: run their bmodel)."""
    from tpuc.interp.top_interpreter import run_top
    from tpuc.interp.tpu_interpreter import TpuInterpreter
    from tpuc.module_io import load_module
    from tpuc.module_state import ModuleState, state_of
    from tpuc.preprocess import input_specs, inputs_from_npz

    module, store = load_module(model_path)
    feed = inputs_from_npz(inputs, input_specs(module), "--input")
    state = state_of(module)
    if state is None or state in (ModuleState.TOP_F32, ModuleState.TOP_CALIBRATED):
        return run_top(module, store, feed, dump_all=options.dump_all)
    if state != ModuleState.TPU_LOWERED:
        raise TpucError(
            f"--model {model_path}: a {state} module has reordered weights; run the _tpu.mlir "
            "or the bmodel instead"
        )
    interpreter = TpuInterpreter(module)
    outputs = interpreter.run(store, feed, dump_all=options.dump_all)
    return outputs if options.out_fixed else interpreter.real_values(outputs)


def run_onnx_file(model_path: str, inputs: Mapping, options: RunOptions) -> dict:
    notes = lambda m: print(f"note: {m}")  # noqa: E731
    return run_onnx(model_path, inputs, dump_all=options.dump_all, notes=notes)


def run_bmodel_file(model_path: str, inputs: Mapping, options: RunOptions) -> dict:
    from tpuc.runtime import load_bmodel

    program = load_bmodel(model_path, device=options.chip)
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
            return rows
    raise TpucError(
        f"--dump_all_tensors: no *_tensor_location.json for {bmodel.name} in "
        f"{bmodel.parent or '.'} (model_deploy.py writes it next to the bmodel)"
    )


RUNNERS: dict[str, Callable[[str, Mapping, RunOptions], dict]] = {
    ".mlir": run_mlir_file,
    ".onnx": run_onnx_file,
    ".bmodel": run_bmodel_file,
}
"""Model file suffix -> runner(path, inputs, options)."""


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
    if args.chip is not None and model.suffix.lower() != ".bmodel":
        raise TpucError("--chip applies to a .bmodel only")
    options = RunOptions(args.dump_all_tensors, args.out_fixed, args.chip)
    results = runner(str(model), inputs, options)
    with OutputSet(protected=(args.input, args.model)) as out:
        out.save_npz(output, results)
    print(f"saved {len(results)} tensor(s) to {output}")
    return 0


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: run(argv))


if __name__ == "__main__":
    main()
