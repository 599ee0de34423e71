"""Reading a Caffe model: the prototxt (text format) gives the network, the
caffemodel (binary) the blobs, matched by layer name.

Both files are parsed with tpuc's own caffe.proto (`caffe_descriptor.py`,
loaded into a private DescriptorPool so that it works with any protobuf
runtime and never clashes with another package's `caffe` messages). Layer
parameters are read from the prototxt only; from the caffemodel tpuc takes
names, types and blobs, so fork caffemodels whose parameter numbers differ
still load.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from tpuc.base.errors import TpucError

V1_TYPES = {
    "ABSVAL": "AbsVal",
    "ARGMAX": "ArgMax",
    "BNLL": "BNLL",
    "CONCAT": "Concat",
    "CONVOLUTION": "Convolution",
    "DATA": "Data",
    "DECONVOLUTION": "Deconvolution",
    "DROPOUT": "Dropout",
    "DUMMY_DATA": "DummyData",
    "ELTWISE": "Eltwise",
    "EXP": "Exp",
    "FLATTEN": "Flatten",
    "HDF5_DATA": "HDF5Data",
    "IMAGE_DATA": "ImageData",
    "INNER_PRODUCT": "InnerProduct",
    "LRN": "LRN",
    "MEMORY_DATA": "MemoryData",
    "MVN": "MVN",
    "POOLING": "Pooling",
    "POWER": "Power",
    "RELU": "ReLU",
    "SIGMOID": "Sigmoid",
    "SILENCE": "Silence",
    "SOFTMAX": "Softmax",
    "SPLIT": "Split",
    "SLICE": "Slice",
    "TANH": "TanH",
    "THRESHOLD": "Threshold",
    "WINDOW_DATA": "WindowData",
}
"""V1 `layers { type: ENUM }` -> the layer type string of `layer { type: "..." }`."""

DATA_LAYERS = {"Data", "ImageData", "HDF5Data", "MemoryData", "WindowData", "DummyData"}
"""Layers that feed data in training nets: not part of an inference graph."""
WEIGHTED = {"Convolution", "ConvolutionDepthwise", "Deconvolution", "InnerProduct", "BatchNorm",
            "PReLU"}  # fmt: skip
"""Layer types that always take blobs from the caffemodel."""
SKIPPED = {"Silence", "Accuracy", "SoftmaxWithLoss", "EuclideanLoss"}
"""Training-only layers: dropped from the inference graph."""


@cache
def messages() -> dict[str, type]:
    """Message classes of tpuc's caffe.proto by short name."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from tpuc.frontends.caffe.caffe_descriptor import DESCRIPTOR

    pool = descriptor_pool.DescriptorPool()
    fd = pool.Add(descriptor_pb2.FileDescriptorProto.FromString(DESCRIPTOR))
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{fd.package}.{name}"))
        for name in ("NetParameter", "NetWeights", "BlobProto", "LayerParameter")
    }


@dataclass
class Layer:
    """One inference layer: its prototxt parameters and caffemodel blobs."""

    name: str
    type: str
    bottoms: list[str]
    tops: list[str]
    param: Any  # the LayerParameter / V1LayerParameter message
    line: int  # of the layer in the prototxt (1-based)
    blobs: list[np.ndarray] = field(default_factory=list)
    blob_shapes: list[tuple[int, ...] | None] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"layer '{self.name}' ({self.type})"


@dataclass
class CaffeNet:
    """A parsed Caffe model: inputs in order, layers of the TEST phase."""

    path: str
    name: str
    inputs: list[tuple[str, list[int] | None]]
    layers: list[Layer]

    def error(self, layer: Layer, message: str) -> TpucError:
        return TpucError(f"{self.path}:{layer.line}: {layer.label}: {message}")


def read_prototxt(path: str) -> Any:
    """Parse a prototxt; an unknown field or bad value is one line naming
    the file, line, field and the layer it is in."""
    from google.protobuf import text_format

    text = _read_text(path, "--model_def")
    net = messages()["NetParameter"]()
    try:
        text_format.Parse(text, net, allow_unknown_extension=False)
    except text_format.ParseError as exc:
        line = exc.GetLine() or 0
        where = _layer_at(text, line)
        message = str(exc).split(" : ", 1)[-1].replace("tpuc.caffe.", "")
        message = message.rstrip(".")
        unknown = re.search(r'has no field named "(\w+)"', message)
        if unknown:
            message = (
                f"field '{unknown.group(1)}' is not known to tpuc's caffe.proto ({message}; "
                "see docs/frontends-caffe.md)"
            )
        raise TpucError(f"{path}:{line}: {where}{message}") from None
    return net


def _read_text(path: str, flag: str) -> str:
    try:
        return Path(path).read_text()
    except UnicodeDecodeError:
        raise TpucError(
            f"{flag} {path}: not a text prototxt (binary file? pass it as --model_data)"
        ) from None
    except OSError as exc:
        raise TpucError(f"{flag} {path}: cannot read ({exc.strerror})") from None


def _layer_at(text: str, line: int) -> str:
    """'layer 'name': ' for the top-level layer block that holds `line`."""
    depth, start = 0, 0
    for number, raw in enumerate(text.splitlines()[:line], 1):
        code = raw.split("#", 1)[0]
        if depth == 0 and re.match(r"\s*layers?\s*\{", code):
            start = number
        depth += code.count("{") - code.count("}")
        if depth <= 0 and number < line:
            start = 0  # that block closed before the line
    if not start:
        return ""
    name = _first_name_after(text, start)
    return f"layer '{name}': " if name else f"layer at line {start}: "


def _first_name_after(text: str, start: int) -> str | None:
    for raw in text.splitlines()[start - 1 : start + 40]:
        found = re.search(r'\bname\s*:\s*"([^"]*)"', raw.split("#", 1)[0])
        if found:
            return found.group(1)
    return None


def read_caffemodel(path: str) -> Any:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TpucError(f"--model_data {path}: cannot read ({exc.strerror})") from None
    weights = messages()["NetWeights"]()
    try:
        weights.ParseFromString(data)
    except Exception:
        raise TpucError(
            f"--model_data {path}: not a binary caffemodel (a text prototxt? pass it as "
            "--model_def)"
        ) from None
    return weights


def blob_array(blob: Any) -> tuple[np.ndarray, tuple[int, ...] | None]:
    """The blob's values and its declared shape (None for a legacy 4-D
    num/channels/height/width blob, whose shape only fixes the count)."""
    data = np.asarray(blob.data if len(blob.data) else blob.double_data, np.float32)
    if blob.HasField("shape"):
        return data, tuple(int(d) for d in blob.shape.dim)
    return data, None


def load_net(prototxt: str, caffemodel: str | None) -> CaffeNet:
    """Parse both files; layers of the TEST phase in order, with their blobs."""
    net = read_prototxt(prototxt)
    if len(net.layer) and len(net.layers):
        raise TpucError(f"{prototxt}: mixes 'layer' and legacy 'layers' entries")
    lines = _layer_lines(Path(prototxt).read_text())
    layers = [_layer_of(p, lines, i) for i, p in enumerate(net.layer or net.layers)]
    layers = [layer for layer in layers if _in_test_phase(layer.param)]
    inputs = _legacy_inputs(prototxt, net)
    model = CaffeNet(prototxt, net.name or Path(prototxt).stem, inputs, layers)
    if caffemodel is not None:
        attach_blobs(model, read_caffemodel(caffemodel), caffemodel)
    return model


def _layer_lines(text: str) -> list[int]:
    """Line of each top-level `layer {`/`layers {`, in order."""
    out, depth = [], 0
    for number, raw in enumerate(text.splitlines(), 1):
        code = raw.split("#", 1)[0]
        if depth == 0 and re.match(r"\s*layers?\s*\{", code):
            out.append(number)
        depth += code.count("{") - code.count("}")
    return out


def _layer_of(param: Any, lines: list[int], index: int) -> Layer:
    kind = param.type
    if not isinstance(kind, str):  # V1: an enum number
        enum = param.DESCRIPTOR.fields_by_name["type"].enum_type
        raw = enum.values_by_number[kind].name
        kind = V1_TYPES.get(raw, raw)
    line = lines[index] if index < len(lines) else 0
    return Layer(param.name, kind, list(param.bottom), list(param.top), param, line)


def _in_test_phase(param: Any) -> bool:
    """Caffe's NetStateRule check for phase TEST (level 0, no stages)."""
    test = 1
    if len(param.include):
        return any(_rule_met(rule, test) for rule in param.include)
    return not any(_rule_met(rule, test) for rule in param.exclude)


def _rule_met(rule: Any, phase: int) -> bool:
    if rule.HasField("phase") and rule.phase != phase:
        return False
    if rule.HasField("min_level") and rule.min_level > 0:
        return False
    if rule.HasField("max_level") and rule.max_level < 0:
        return False
    return not len(rule.stage)


def _legacy_inputs(path: str, net: Any) -> list[tuple[str, list[int] | None]]:
    """`input:` with `input_shape` (one per input) or `input_dim` (4 each)."""
    names = list(net.input)
    if len(net.input_shape):
        if len(net.input_shape) != len(names):
            raise TpucError(f"{path}: {len(names)} input(s) but {len(net.input_shape)} input_shape")
        return [(n, [int(d) for d in s.dim]) for n, s in zip(names, net.input_shape, strict=True)]
    dims = [int(d) for d in net.input_dim]
    if dims:
        if len(dims) != 4 * len(names):
            raise TpucError(f"{path}: input_dim needs 4 values per input ({len(names)} inputs)")
        return [(n, dims[4 * i : 4 * i + 4]) for i, n in enumerate(names)]
    return [(n, None) for n in names]


def attach_blobs(model: CaffeNet, weights: Any, path: str) -> None:
    """Give each layer the blobs of the caffemodel layer of the same name."""
    found = {}
    for entry in list(weights.layer) + list(weights.layers):
        if entry.name and len(entry.blobs):
            found[entry.name] = entry
    weighted = [layer for layer in model.layers if layer.type in WEIGHTED]
    if found and weighted and not any(layer.name in found for layer in model.layers):
        other = f" (network '{weights.name}')" if weights.name else ""
        sample = ", ".join(sorted(found)[:3])
        raise TpucError(
            f"--model_data {path}: a caffemodel for another network{other}: none of its "
            f"layers with blobs ({sample}, ...) is in {model.path} (network '{model.name}')"
        )
    for layer in model.layers:
        entry = found.get(layer.name)
        if entry is None:
            continue
        for blob in entry.blobs:
            data, shape = blob_array(blob)
            layer.blobs.append(data)
            layer.blob_shapes.append(shape)
