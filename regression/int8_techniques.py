#!/usr/bin/env python3
"""Issue 26, acceptance 1: real models, FP32 vs INT8 (bm1684x, TPU
interpreter), with and without each calibration technique, in one table.

    python regression/int8_techniques.py OUT_DIR [--models bert,gpt2,...]
        [--variants plain,we,bc,sq,smc,adaround,search] [--remeasure] [--report]

Each model × variant runs run_calibration.py as a user would (plain: no
flag; we/bc/sq/smc/adaround: that flag, deploying the module it writes;
search: `--search search_threshold`; cos999: the automatic mixed precision's
output target raised from 0.99 to 0.999), then deploys as model_deploy.py
does by default (INT8 with the automatic mixed-precision step: the lossy
tensors' layers and the layers grown until the output cosine on the
calibration samples reaches the target, in F16) and compares with
onnxruntime's FP32 on held-out inputs. Each run is a worker process (the
machine is small: one model at a time); its JSON is kept in OUT_DIR and
reused unless --remeasure.

Models and what is measured:
- bert, gpt2: `transformers` BERT-base / GPT-2 (12 layers, random weights,
  sequence 32, padded): every Softmax row of the INT8 run against FP32's
  (worst row cosine, rows uniform where FP32's are not);
- yolov8n, picodet: trained detectors from PyPI wheels on real photos and
  pages (regression/int8_safety.py): smallest output cosine and COCO AP of
  the INT8 detections with FP32's as ground truth;
- ppocr_rec: PP-OCRv4 rec on the text lines of skimage `page` and `text`
  (cut as tests/support/page_text.py cuts them): the share of lines whose
  INT8 CTC text equals FP32's. It calibrates on text lines of its own
  domain that are not the test lines: lines cut the same way from pages
  rendered here (`rendered_page`: the Zen of Python in DejaVu/Liberation
  fonts on unevenly lit, blurred, noisy paper), as a user calibrates on
  their own crops (the anchor's samples are not text);
- digits (the repo's digits CNN, trained here) and the anchors smallcnn,
  resblock, ppocr_cls: smallest output cosine (digits: top-1 agreement).

Calibration uses 4 samples (tune on them), as the machine allows.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from regression import int8_safety as safety  # noqa: E402
from regression.model_zoo import ANCHORS, CACHE  # noqa: E402

VARIANTS = {
    "plain": [],
    "we": ["--we"],
    "bc": ["--bc"],
    "sq": ["--sq"],
    "smc": ["--smc"],
    "adaround": ["--adaround"],
    "search": ["--search", "search_threshold"],
    "cos999": ["--auto_mix_cos", "0.999"],
}
CALI_SAMPLES = 4
MODEL_CACHE = CACHE / "int8_models"


@dataclass
class Case:
    name: str
    build: Callable[[], Path]  # -> onnx path
    inputs: Callable[[], tuple[list[dict], list[dict]]]  # -> (cali, test)
    metric: str  # attention | detect | picodet | ocr | classify


# --- inputs of the models the int8_safety cases do not have ------------------------------


def text_lines() -> list[np.ndarray]:
    """Grey text-line crops of skimage `page` and `text` (line boxes as
    tests/support/page_text.py finds them)."""
    from skimage import data

    from tests.support.page_text import line_boxes

    crops = []
    for image in (data.page(), data.text()):
        for x, y, w, h in line_boxes(image):
            crops.append(image[int(y) : int(y + h), int(x) : int(x + w)])
    return crops


def rec_input(crop: np.ndarray, height: int = 48, width: int = 320) -> np.ndarray:
    """RapidOCR's rec preprocessing: height 48 keeping the aspect (at most
    320 wide), (x/255 − 0.5)/0.5, zero-padded on the right to 320."""
    w = min(width, max(1, math.ceil(height * crop.shape[1] / crop.shape[0])))
    rgb = np.repeat(safety.resized(crop, height, w)[..., None], 3, axis=2)
    x = np.zeros((3, height, width), np.float32)
    x[:, :, :w] = (rgb.astype(np.float32) / 255.0 - 0.5).transpose(2, 0, 1) / 0.5
    return x[None]


FONTS = Path("/usr/share/fonts/truetype")
PAGE_FONTS = (
    "dejavu/DejaVuSans.ttf",
    "liberation/LiberationSerif-Regular.ttf",
    "dejavu/DejaVuSansCondensed.ttf",
    "liberation/LiberationSans-Regular.ttf",
)


def rendered_page(seed: int) -> np.ndarray:
    """A grey 200x400 'scan' of printed text that is not in the test images:
    lines of the Zen of Python (stdlib `this`) in a font of PAGE_FONTS, dark
    ink on an unevenly lit background, blurred, with sensor noise."""
    import codecs

    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    with contextlib.redirect_stdout(io.StringIO()):
        import this
    lines = [t for t in codecs.decode(this.s, "rot13").splitlines()[2:] if t]
    rng = np.random.default_rng(seed)
    size = int(rng.integers(13, 21))
    font = ImageFont.truetype(str(FONTS / PAGE_FONTS[seed % len(PAGE_FONTS)]), size)
    yy, xx = np.mgrid[0:200, 0:400]
    light = rng.uniform(110, 200) + rng.uniform(20, 90) * xx / 400 + rng.uniform(0, 30) * yy / 200
    page = Image.fromarray(np.clip(light, 0, 255).astype(np.uint8))
    draw, start = ImageDraw.Draw(page), int(rng.integers(len(lines)))
    for row in range(200 // int(size * 1.45)):
        ink = int(rng.integers(0, 60))
        draw.text((6, 4 + row * int(size * 1.45)), lines[(start + row) % len(lines)], ink, font)
    blurred = np.asarray(page.filter(ImageFilter.GaussianBlur(rng.uniform(0.4, 1.0))), np.float32)
    noise = rng.normal(0, rng.uniform(2, 6), blurred.shape)
    return np.clip(blurred + noise, 0, 255).astype(np.uint8)


def rendered_lines(count: int) -> list[np.ndarray]:
    """`count` text-line crops of rendered pages, cut as the test lines are
    (tests/support/page_text.py), one per page so fonts and sizes vary;
    every other one a fragment of 2–6 character heights, as many test crops
    are (skimage `text`'s words)."""
    from tests.support.page_text import line_boxes

    crops = []
    for seed in range(count):
        page = rendered_page(seed)
        boxes = line_boxes(page)
        x, y, w, h = boxes[seed % len(boxes)]
        if seed % 2:
            x, w = x + w / 3, min(w - w / 3, h * (2 + seed % 5))
        crops.append(page[int(y) : int(y + h), int(x) : int(x + w)])
    return crops


def rec_inputs() -> tuple[list[dict], list[dict]]:
    """Calibration on text lines of the same kind as the tests but not
    them (rendered pages), as a user calibrates on their own domain."""
    cali = [{"x": rec_input(c)} for c in rendered_lines(CALI_SAMPLES)]
    return cali, [{"x": rec_input(c)} for c in text_lines()]


def ctc_text(probs: np.ndarray) -> tuple[int, ...]:
    """Greedy CTC: best class per step, repeats merged, blanks (0) dropped."""
    best = np.asarray(probs)[0].argmax(-1)
    keep = np.r_[True, best[1:] != best[:-1]] & (best != 0)
    return tuple(int(c) for c in best[keep])


def digits_model() -> Path:
    """The repo's digits CNN (regression/digits_cnn.py), batch 1."""
    path = MODEL_CACHE / "digits_cnn_b1.onnx"
    if path.exists():
        return path
    import torch

    from regression.digits_cnn import train

    with contextlib.redirect_stdout(io.StringIO()):
        net = train(15)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(net, torch.zeros(1, 1, 8, 8), str(path), input_names=["x"],
                      output_names=["logits"], opset_version=13, dynamo=False)  # fmt: skip
    return path


def digits_inputs() -> tuple[list[dict], list[dict]]:
    """4 training images calibrate; 200 held-out (odd-index) images test."""
    from tests.support.digits import SCALE, digits_arrays

    images, _ = digits_arrays()
    x = images[:, None, None].astype(np.float32) * np.float32(SCALE)
    return [{"x": x[i]} for i in range(0, 2 * CALI_SAMPLES, 2)], [
        {"x": x[i]} for i in range(1, 400, 2)
    ]


def anchor(name: str) -> Case:
    folder = ANCHORS / name

    def inputs() -> tuple[list[dict], list[dict]]:
        files = sorted((folder / "cali").glob("*.npz"))
        cali = [dict(np.load(p)) for p in files[:CALI_SAMPLES]]
        tests = [dict(np.load(p)) for p in files[CALI_SAMPLES : CALI_SAMPLES + 4]]
        return cali, tests + [dict(np.load(folder / "test_input.npz"))]

    return Case(name, lambda: folder / f"{name}.onnx", inputs, "classify")


def tokens(kind: str) -> Case:
    build = safety.transformer(kind, 12, 32)
    return Case(kind, lambda: build(MODEL_CACHE), lambda: safety.token_inputs(32)(None),
                "attention")  # fmt: skip


CASES = {
    "bert": tokens("bert"),
    "gpt2": tokens("gpt2"),
    "yolov8n": Case(
        "yolov8n", lambda: safety.yolov8n(None), lambda: safety.yolo_inputs(None), "detect"
    ),  # fmt: skip
    "picodet": Case(
        "picodet", lambda: safety.picodet(None), lambda: safety.picodet_inputs(None), "picodet"
    ),  # fmt: skip
    "ppocr_rec": Case(
        "ppocr_rec", lambda: ANCHORS / "ppocr_rec" / "ppocr_rec.onnx", rec_inputs, "ocr"
    ),  # fmt: skip
    "digits": Case("digits", digits_model, digits_inputs, "classify"),
    **{name: anchor(name) for name in ("smallcnn", "resblock", "ppocr_cls")},
}


# --- one model × variant (worker process) -------------------------------------------------


def transform(case: Case, onnx_path: Path, work: Path, cali: list[dict]) -> Path:
    from tpuc.tools import model_transform

    mlir = work / f"{case.name}.mlir"
    if mlir.exists():
        return mlir
    work.mkdir(parents=True, exist_ok=True)
    shapes = str([list(a.shape) for a in cali[0].values()]).replace(" ", "")
    argv = ["--model_name", case.name, "--model_def", str(onnx_path), "--mlir", str(mlir),
            "--input_shapes", shapes]  # fmt: skip
    safety.quiet(model_transform.run, argv)
    return mlir


def calibrate(mlir: Path, cali: list[dict], variant: str, work: Path) -> tuple[Path, Path, str]:
    """run_calibration.py with the variant's flags: the module to deploy, its
    table and what the tool printed."""
    from tpuc.tools import run_calibration

    folder = work / "cali"
    folder.mkdir(exist_ok=True)
    for i, sample in enumerate(cali):
        np.savez(folder / f"s{i}.npz", **sample)
    table = work / f"{variant}_cali_table"
    out_mlir = work / f"{variant}.mlir"
    flags = VARIANTS[variant]
    argv = [str(mlir), "--dataset", str(folder), "-o", str(table), *flags]
    if variant in ("we", "bc", "sq", "smc", "adaround"):
        argv += ["--output_mlir", str(out_mlir)]
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        code = run_calibration.run(argv)
    if code != 0:
        raise SystemExit(f"run_calibration {' '.join(argv)} failed:\n{log.getvalue()}")
    return (out_mlir if out_mlir.exists() else mlir), table, log.getvalue()


def measure(case: Case, original: Path, deployed: Path, table: Path, tests: list[dict]) -> dict:
    """FP32 (onnxruntime) vs INT8 with model_deploy's default automatic mix."""
    import onnxruntime as ort

    from tpuc.interp.top_interpreter import TopInterpreter
    from tpuc.interp.tpu_interpreter import TpuInterpreter
    from tpuc.ir.module_io import load_module
    from tpuc.ir.qtable import format_qtable
    from tpuc.ir.weights import attach_weights, weights_of
    from tpuc.workflow.auto_mix import auto_float_layers, int8_share
    from tpuc.workflow.deploy import lower

    module, store = load_module(deployed)
    auto = {x.name: x.mode for x in auto_float_layers(module, table, "bm1684x")}
    qtable = None
    if auto:
        qtable = table.with_suffix(".auto_qtable")
        qtable.write_text(format_qtable(auto))
    lowered = module.clone()
    attach_weights(lowered, store)
    lower(lowered, "bm1684x", "INT8", cali_table=str(table), qtable=qtable)
    tpu = TpuInterpreter(lowered)
    top = None
    if case.metric == "attention":
        reference_module, reference_store = load_module(original)
        top = (reference_module, reference_store, TopInterpreter(reference_module, native=False))
    session = ort.InferenceSession(str(case.build()), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    kept, total, flops = int8_share(module, "bm1684x", auto)
    result = {"float_layers": sorted(auto), "cos": [], "rows": [], "dets": [], "same": [],
              "int8_layers": [kept, total], "int8_flops": flops}  # fmt: skip
    for x in tests:
        feed = {i.name: x[i.name].astype(safety._ort_dtype(i.type)) for i in session.get_inputs()}
        reference = dict(zip(names, session.run(None, feed), strict=True))
        real = tpu.real_values(tpu.run(weights_of(lowered), x, dump_all=top is not None))
        result["cos"].append(min(safety._cos(real[n], reference[n]) for n in reference))
        score(case, top, x, reference, real, result)
    return result


def score(case: Case, top, x: dict, reference: dict, real: dict, result: dict) -> None:
    """The model's own measure of one test input, added to `result`."""
    head = safety.Case(case.name, None, None, case.metric)
    if case.metric == "attention":
        module, store, interp = top
        floats = interp.run(store, x, dump_all=True)
        result["rows"].append(safety.softmax_rows(module, floats, real))
    elif case.metric in ("detect", "picodet"):
        result["dets"].append(
            (safety.detections(head, reference), safety.detections(head, real, safety.EVAL_MIN))
        )
    elif case.metric == "ocr":
        (name,) = reference
        result["same"].append(ctc_text(reference[name]) == ctc_text(real[name]))
    elif case.name == "digits":
        (name,) = reference
        result["same"].append(int(reference[name].argmax()) == int(real[name].argmax()))


def worker(out: Path, model: str, variant: str) -> None:
    case = CASES[model]
    onnx_path = case.build()
    cali, tests = case.inputs()
    work = out / model
    mlir = transform(case, onnx_path, work, cali)
    start = time.perf_counter()
    deployed, table, log = calibrate(mlir, cali, variant, work)
    seconds = time.perf_counter() - start
    (work / f"{variant}.log").write_text(log)
    result = measure(case, mlir, deployed, table, tests)
    result["seconds"] = seconds
    if result["dets"]:
        result["ap"] = safety.coco_ap(result["dets"])
        result["n_dets"] = [len(r) for r, _ in result["dets"]]
    del result["dets"]
    (out / f"{model}_{variant}.json").write_text(json.dumps(result))


# --- driver --------------------------------------------------------------------------------


def run(out: Path, model: str, variant: str, again: bool, report: bool = False) -> dict | None:
    path = out / f"{model}_{variant}.json"
    if report and not path.exists():
        return {}
    if again or not path.exists():
        cmd = [sys.executable, __file__, str(out), "--worker", model, variant]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            print(f"<!-- {model} {variant} failed: {' '.join(tail)} -->", flush=True)
            return None
    return json.loads(path.read_text())


def cell(case: Case, r: dict | None) -> str:
    """min output cos / the model's own measure / layers in F16."""
    if r is None:
        return "failed"
    if not r:
        return "not run"
    parts = [f"{min(r['cos']):.4f}"]
    if case.metric == "attention":
        parts.append(f"row {min(w for w, _ in r['rows']):.4f}, {sum(u for _, u in r['rows'])} unif")
    elif "ap" in r:
        parts.append(f"AP {r['ap'][0]:.3f}")
    elif r["same"]:
        parts.append(f"{'text' if case.metric == 'ocr' else 'top1'} {np.mean(r['same']):.3f}")
    share = ""
    if "int8_layers" in r:
        kept, total = r["int8_layers"]
        share = f" (INT8 {kept}/{total}, {100 * r['int8_flops']:.0f}% FLOPs)"
    parts.append(f"F16 {len(r['float_layers'])}{share}")
    return ", ".join(parts) + f" ({r['seconds']:.0f} s)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", default=",".join(CASES))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--remeasure", action="store_true", help="run every cell again")
    parser.add_argument("--report", action="store_true", help="print the cells measured so far")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.out, *args.worker)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    variants = args.variants.split(",")
    print("| model | " + " | ".join(variants) + " |")
    print("|---|" + "---|" * len(variants))
    for model in args.models.split(","):
        found = [run(args.out, model, v, args.remeasure, args.report) for v in variants]
        cells = [cell(CASES[model], r) for r in found]
        print(f"| {model} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
