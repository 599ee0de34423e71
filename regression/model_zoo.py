"""Where the regression models come from, and how to build them locally.

Three sources, all reachable without a model hub:
- the anchor set built by `shared/anchors/make_anchor_models.py` (found via
  `--anchors DIR` or $TPUC_ANCHORS; each model has meta.json and a real-image
  `test_input.npz`);
- the `onnx` package's bundled "light" architectures, whose placeholder
  weights are replaced by seeded random ones (batch-norm variances > 0);
- real trained models inside PyPI wheels (`pip download --no-deps`).
Downloads and generated files go to a cache outside the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

CACHE = Path(os.environ.get("TPUC_CACHE", Path.home() / ".cache" / "tpuc"))
ANCHORS = Path(os.environ.get("TPUC_ANCHORS", "/work/cache/anchors"))
RAPIDOCR_WHEEL = "rapidocr-onnxruntime==1.4.4"


@dataclass
class ZooModel:
    """One regression model: its ONNX file, fixed input shapes and a test input."""

    name: str
    onnx_path: Path
    test_input: Path
    input_shapes: list[list[int]] = field(default_factory=list)


def anchor_model(name: str, anchors: Path = ANCHORS) -> ZooModel:
    folder = anchors / name
    meta = json.loads((folder / "meta.json").read_text())
    return ZooModel(name, folder / meta["onnx"], folder / "test_input.npz", [meta["input_shape"]])


# --- onnx light models with materialized weights ------------------------------------


def _weight_value(
    rng: np.random.Generator, shape: tuple[int, ...], op: str, slot: int, consumer_op: str
):
    """Seeded random values by the role a placeholder plays for its consumer."""
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    if op == "Conv" and slot == 1:
        return rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
    if op == "Gemm" and slot == 1:
        return rng.standard_normal(shape) * np.sqrt(2.0 / shape[-1])
    if op == "BatchNormalization":
        pick = {
            1: lambda: rng.uniform(0.8, 1.2, shape),
            2: lambda: rng.standard_normal(shape) * 0.1,
            3: lambda: rng.standard_normal(shape) * 0.1,
            4: lambda: rng.uniform(0.5, 1.5, shape),
        }
        return pick[slot]()
    if consumer_op == "Mul":
        return rng.uniform(0.8, 1.2, shape)
    return rng.standard_normal(shape) * 0.01


def materialize_light(name: str, seed: int = 0) -> Path:
    """light_<name>.onnx with its ConstantOfShape placeholders (and weight
    inputs) turned into seeded random initializers."""
    import onnx
    from onnx import helper, numpy_helper

    out = CACHE / "light" / f"{name}.onnx"
    if out.is_file():
        return out
    source = Path(onnx.__file__).parent / "backend/test/data/light" / f"light_{name}.onnx"
    model = onnx.load(source)
    graph = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    shapes = {
        n.output[0]: tuple(int(v) for v in inits[n.input[0]])
        for n in graph.node
        if n.op_type == "ConstantOfShape"
    }
    data_inputs = [i for i in graph.input if i.name not in inits and i.name not in shapes]
    for i in graph.input:
        if i.name in inits and i.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            shapes[i.name] = tuple(inits[i.name].shape)
    consumers: dict[str, list] = {}
    for node in graph.node:
        for slot, tensor in enumerate(node.input):
            consumers.setdefault(tensor, []).append((node, slot))
    rng = np.random.default_rng(seed)
    new_inits = []
    for wname, shape in shapes.items():
        if wname not in consumers:
            continue
        node, slot = consumers[wname][0]
        after = consumers.get(node.output[0], [(node, 0)])[0][0].op_type
        value = _weight_value(rng, shape, node.op_type, slot, after)
        new_inits.append(numpy_helper.from_array(np.asarray(value, np.float32), wname))
    kept = [t for t in graph.initializer if t.name not in shapes and not t.name.endswith("__SHAPE")]
    nodes = [n for n in graph.node if n.op_type != "ConstantOfShape"]
    new_graph = helper.make_graph(nodes, name, data_inputs, list(graph.output), kept + new_inits)
    new_model = helper.make_model(new_graph, opset_imports=list(model.opset_import))
    new_model.ir_version = model.ir_version
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(new_model, out)
    return out


def light_model(name: str, seed: int = 0) -> ZooModel:
    """A light architecture with a seeded test input (N(0,1) like normalized images)."""
    path = materialize_light(name, seed)
    test = CACHE / "light" / f"{name}_input.npz"
    if not test.is_file():
        import onnx

        data = onnx.load(path).graph.input[0]
        shape = [d.dim_value for d in data.type.tensor_type.shape.dim]
        x = np.random.default_rng(seed + 1).standard_normal(shape).astype(np.float32)
        np.savez(test, **{data.name: x})
    return ZooModel(name, path, test)


# --- real models from wheels --------------------------------------------------------


def wheel_file(requirement: str, member: str) -> Path:
    """Extract `member` from the wheel of `requirement` (downloaded once)."""
    wheels = CACHE / "wheels"
    target = wheels / Path(member).name
    if target.is_file():
        return target
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "-q",
            "-d",
            str(wheels),
            requirement,
        ],
        check=True,
    )
    package = requirement.split("==")[0].replace("-", "_")
    wheel = next(wheels.glob(f"{package}-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        target.write_bytes(archive.read(member))
    return target


def ppocr_det_640(anchors: Path = ANCHORS) -> ZooModel:
    """The real PP-OCRv4 detector at 640x640, fed the anchor page upscaled."""
    path = wheel_file(RAPIDOCR_WHEEL, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx")
    test = CACHE / "ppocr_det_640_input.npz"
    if not test.is_file():
        with np.load(anchors / "ppocr_det" / "test_input.npz") as data:
            key = data.files[0]
            small = data[key]
        big = np.repeat(np.repeat(small, 2, axis=2), 2, axis=3)
        np.savez(test, **{key: big})
    return ZooModel("ppocr_det_640", path, test, [[1, 3, 640, 640]])


def silero_vad() -> ZooModel:
    """silero-vad's op18 'ifless' export (its LSTM written out as Gemm/Sigmoid/
    Tanh) on one 512-sample chunk at 16 kHz: a chirp with noise, fresh state."""
    path = wheel_file("silero-vad", "silero_vad/data/silero_vad_op18_ifless.onnx")
    test = CACHE / "silero_vad_input.npz"
    if not test.is_file():
        t = np.arange(512) / 16000.0
        rng = np.random.default_rng(0)
        chunk = 0.3 * np.sin(2 * np.pi * (200 + 2000 * t) * t) + 0.02 * rng.standard_normal(512)
        np.savez(test, input=chunk[None].astype(np.float32), sr=np.array(16000, np.int64),
                 state=np.zeros((2, 1, 128), np.float32))  # fmt: skip
    return ZooModel("silero_vad", path, test, [[1, 512], [], [2, 1, 128]])


ANCHOR_NAMES = [
    "smallcnn",
    "resblock",
    "resnet50",
    "squeezenet",
    "inception_v1",
    "shufflenet",
    "densenet121",
    "ppocr_det",
    "ppocr_cls",
    "ppocr_rec",
]
LIGHT_NAMES = ["inception_v2", "vgg19"]


def all_models(anchors: Path = ANCHORS) -> dict[str, callable]:
    """Model name -> a function that builds/fetches it (lazily)."""
    zoo: dict[str, callable] = {n: (lambda n=n: anchor_model(n, anchors)) for n in ANCHOR_NAMES}
    zoo.update({n: (lambda n=n: light_model(n)) for n in LIGHT_NAMES})
    zoo["ppocr_det_640"] = lambda: ppocr_det_640(anchors)
    zoo["silero_vad"] = silero_vad
    return zoo
