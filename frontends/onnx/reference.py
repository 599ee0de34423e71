"""Reference execution of an ONNX model in onnxruntime.

model_transform.py compares the TOP interpreter with this run tensor by
tensor, and model_runner.py runs `.onnx` files with it. It belongs to the
ONNX frontend (it knows ONNX names and onnxruntime's quirks), not to a
command line, so that library code and every tool can use it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tpuc.base.errors import TpucError

EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"
"""onnxruntime option: where a model given as bytes keeps its external data."""

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
