#!/usr/bin/env python3
"""Pre-quantized INT8 TFLite models made from the MediaPipe float models
with a real quantizer, deployed with their own scales.

For each float model of the `mediapipe==0.10.21` wheel (read as in
tflite_mediapipe.py; sparse ones are skipped): fold the fp16 weights behind
DEQUANTIZE into float32 constants and add a `serving_default` signature
(ai-edge-quantizer needs both), quantize it with ai-edge-quantizer's
static int8 recipe (int8 weights per axis, int8 activations, int8 I/O),
calibrated on seeded crops of scikit-image sample images, then:
model_transform.py (TOP against LiteRT's int8 run, in real values),
model_deploy.py --quantize INT8 with no calibration table (the model's own
scales and zero points), the bmodel bit-exact against the TPU interpreter,
and the TPU interpreter's int8 outputs against LiteRT's: the share of
elements equal and within 1 LSB.

    pip install ai-edge-quantizer   # regression only (no TensorFlow)
    python regression/tflite_int8_mediapipe.py [--cache /tmp/mp] [--work DIR]
        [--models face_detection_short_range,iris_landmark]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tflite_mediapipe import base_images, extract_models, sample, tool, wheel_path  # noqa: E402

CALI_SAMPLES = 8


def prepare_float(path: Path, out: Path) -> bool:
    """fp16 weights folded, builtin codes set, a signature added; False for
    a sparse model."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s

    model = s.ModelT.InitFromObj(s.Model.GetRootAs(path.read_bytes(), 0))
    graph = model.subgraphs[0]
    if any(t.sparsity is not None for t in graph.tensors):
        return False
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]
    for code, value in zip(model.operatorCodes, codes, strict=True):
        code.builtinCode = value  # the quantizer reads only builtin_code (the opcode quirk)
    kept = []
    for op in graph.operators:
        src = graph.tensors[op.inputs[0]]
        data = model.buffers[src.buffer].data if src.buffer else None
        if codes[op.opcodeIndex] == s.BuiltinOperator.DEQUANTIZE and data is not None:
            values = np.frombuffer(bytes(bytearray(data)), np.float16).astype(np.float32)
            buffer = s.BufferT()
            buffer.data = np.frombuffer(values.tobytes(), np.uint8)
            model.buffers.append(buffer)
            graph.tensors[op.outputs[0]].buffer = len(model.buffers) - 1
            continue
        kept.append(op)
    graph.operators = kept
    sig = s.SignatureDefT()
    sig.signatureKey, sig.subgraphIndex = b"serving_default", 0
    sig.inputs = [_tensor_map(s, graph, i) for i in graph.inputs]
    sig.outputs = [_tensor_map(s, graph, i) for i in graph.outputs]
    model.signatureDefs = [sig]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    out.write_bytes(builder.Output())
    return True


def _tensor_map(s, graph, index: int):
    entry = s.TensorMapT()
    entry.name, entry.tensorIndex = graph.tensors[index].name, index
    return entry


def quantize(float_path: Path, out: Path, details) -> None:
    from ai_edge_quantizer import quantizer, recipe

    qt = quantizer.Quantizer(str(float_path))
    qt.load_quantization_recipe(recipe.static_wi8_ai8())
    rng = np.random.default_rng(0)
    images = base_images()
    data = [
        {d["name"]: sample(images[i % len(images)], d["shape"], rng) for d in details}
        for i in range(CALI_SAMPLES)
    ]
    result = qt.quantize(qt.calibrate({"serving_default": data}))
    result.export_model(str(out), overwrite=True)


def run_model(path: Path, work: Path) -> str:
    from ai_edge_litert.interpreter import Interpreter

    from tpuc.frontends.tflite.model import load_tflite
    from tpuc.frontends.tflite.reference import run_tflite

    name = path.stem
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    log = d / "log.txt"
    log.write_text("")
    folded = d / f"{name}_f32.tflite"
    try:
        details = Interpreter(model_path=str(path)).get_input_details()
        Interpreter(model_path=str(path)).allocate_tensors()
    except Exception as exc:
        return f"| {name} | skipped: LiteRT: {str(exc).splitlines()[0][:60]} |"
    if not prepare_float(path, folded):
        return f"| {name} | skipped: sparse weights (the quantizer reads dense ones) |"
    qpath = d / f"{name}_int8.tflite"
    try:
        quantize(folded, qpath, details)
    except Exception as exc:
        return f"| {name} | skipped: quantizer: {str(exc).splitlines()[0][:60]} |"
    feed = {dd["name"]: sample(base_images()[0], dd["shape"], None) for dd in details}
    np.savez(d / "in.npz", **feed)
    argv = ["--model_name", name, "--model_def", str(qpath), "--test_input", str(d / "in.npz"),
            "--mlir", str(d / f"{name}.mlir"), "--tolerance=-1,-10"]  # fmt: skip
    if tool("model_transform", argv, log) != 0:
        return f"| {name} | transform failed (see {log}) |"
    argv = ["--mlir", str(d / f"{name}.mlir"), "--chip", "bm1684x", "--quantize", "INT8",
            "--test_input", str(d / f"{name}_in_f32.npz"), "--tolerance=-1,-10",
            "--model", str(d / f"{name}_int8.bmodel")]  # fmt: skip
    if tool("model_deploy", argv, log) != 0:
        return f"| {name} | deploy failed (see {log}) |"
    tpu = dict(np.load(next(d.glob(f"{name}_bm1684x_int8_asym_tpu_outputs.npz"))))
    ref = run_tflite(str(qpath), feed)
    model = load_tflite(str(qpath))
    cells = []
    for i in model.outputs:
        t = model.tensor(i)
        if t.name not in tpu:
            cells.append(f"{t.name}: missing")
            continue
        lsb = np.abs(np.round((tpu[t.name] - ref[t.name]) / float(t.scales[0])))
        cells.append(f"{t.name}: {np.mean(lsb == 0):.4f} / {np.mean(lsb <= 1):.4f}")
    return f"| {name} | bit-exact | " + "; ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "mp"))
    parser.add_argument("--work", default=None)
    parser.add_argument("--models", default="")
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="tpuc_mediapipe_int8_"))
    models = extract_models(wheel_path(Path(args.cache)), work / "models")
    wanted = [m for m in args.models.split(",") if m]
    if wanted:
        models = [m for m in models if m.stem in wanted]
    header = (
        "| model | deploy (no calibration table) | per output: equal / within 1 LSB of LiteRT |"
    )
    print(header)
    print("|---|---|---|")
    for path in models:
        print(run_model(path, work), flush=True)
    print(f"work folder: {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
