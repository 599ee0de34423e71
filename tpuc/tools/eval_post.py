"""Scoring a model's outputs for model_eval.py: top-k counts for classifiers,
and detection decoders (a registry) plus pycocotools' COCOeval for detectors.

A detection decoder turns one image's outputs into (boxes [K,4] as x1,y1,x2,y2
in network-input pixels, scores [K], classes [K]) before NMS; `to_image`
maps the boxes back through the preprocessing (resize, crop or letterbox) to
the original image, where COCO scores them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tpuc.base.errors import TpucError
from tpuc.ir.preprocess import Preprocess

Decoder = Callable[
    [Sequence[np.ndarray], float, tuple[int, int]], tuple[np.ndarray, np.ndarray, np.ndarray]
]
DECODERS: dict[str, Decoder] = {}


def decoder(name: str):
    """Register a detection-output decoder under `name` (--detection_head)."""

    def register(fn: Decoder) -> Decoder:
        DECODERS[name] = fn
        return fn

    return register


# --- classification --------------------------------------------------------------


@dataclass
class TopK:
    """Running top-1 / top-5 counts."""

    total: int = 0
    top1: int = 0
    top5: int = 0

    def add(self, logits: np.ndarray, labels: Sequence[int]) -> None:
        """Score the first len(labels) rows of `logits` (padding rows ignored)."""
        rows = np.asarray(logits, np.float64).reshape(logits.shape[0], -1)[: len(labels)]
        if rows.shape[1] <= max(labels, default=0):
            raise TpucError(
                f"label {max(labels)} but the model gives {rows.shape[1]} class score(s)"
            )
        # stable order: ties go to the lower class index, as a hand count would
        order = np.argsort(-rows, axis=1, kind="stable")[:, :5]
        for row, label in zip(order, labels, strict=True):
            self.total += 1
            self.top1 += int(row[0] == label)
            self.top5 += int(label in row)

    def summary(self) -> dict[str, float]:
        n = max(self.total, 1)
        return {"count": self.total, "top1": self.top1 / n, "top5": self.top5 / n}


# --- detection --------------------------------------------------------------------


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> np.ndarray:
    """Indices kept by greedy non-maximum suppression (highest score first)."""
    order = np.argsort(-scores, kind="stable")
    x1, y1, x2, y2 = boxes.T
    area = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    keep = []
    while order.size:
        i, rest = order[0], order[1:]
        keep.append(i)
        w = np.clip(np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]), 0, None)
        h = np.clip(np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]), 0, None)
        inter = w * h
        overlap = inter / np.maximum(area[i] + area[rest] - inter, 1e-12)
        order = rest[overlap <= iou]
    return np.asarray(keep, dtype=np.int64)


def class_nms(boxes, scores, classes, iou: float, limit: int = 300):
    """NMS per class (boxes shifted apart by class), at most `limit` kept."""
    if not len(scores):
        return np.zeros(0, np.int64)
    shift = classes[:, None].astype(np.float64) * (boxes.max() + 1.0)
    return nms(boxes + shift, scores, iou)[:limit]


@decoder("boxes")
def plain_boxes(outputs: Sequence[np.ndarray], score_thr: float, net_hw):
    """Two outputs: boxes [K,4] (x1,y1,x2,y2, input pixels) and scores [K,C]
    (one score per class), or three: boxes [K,4], scores [K], classes [K]."""
    if len(outputs) not in (2, 3):
        raise TpucError(
            f"--detection_head boxes: expected 2 or 3 outputs, the model has {len(outputs)}"
        )
    boxes = np.asarray(outputs[0], np.float64).reshape(-1, 4)
    if len(outputs) == 3:
        scores = np.asarray(outputs[1], np.float64).reshape(-1)
        classes = np.asarray(outputs[2]).reshape(-1).astype(np.int64)
    else:
        per_class = np.asarray(outputs[1], np.float64).reshape(boxes.shape[0], -1)
        classes = per_class.argmax(axis=1)
        scores = per_class[np.arange(len(classes)), classes]
    keep = scores >= score_thr
    return boxes[keep], scores[keep], classes[keep]


YOLOV5_ANCHORS = (
    ((10, 13), (16, 30), (33, 23)),
    ((30, 61), (62, 45), (59, 119)),
    ((116, 90), (156, 198), (373, 326)),
)


@decoder("yolov5")
def yolov5(outputs: Sequence[np.ndarray], score_thr: float, net_hw):
    """YOLOv5's raw heads, as TPU-MLIR's coco_mAP decodes them: three outputs
    [3*(5+C),H,W] (or [3,H,W,5+C]) for strides 8/16/32 with the built-in
    anchors; sigmoid, xy = (2s-0.5+grid)*stride, wh = (2s)^2*anchor."""
    if len(outputs) != 3:
        raise TpucError(
            f"--detection_head yolov5: expected 3 head outputs, the model has {len(outputs)}"
        )
    heads = sorted(outputs, key=lambda o: -o.shape[-1] if o.ndim == 3 else -o.shape[1])
    rows = []
    for head, anchors in zip(heads, YOLOV5_ANCHORS, strict=True):
        rows.append(_yolov5_head(np.asarray(head, np.float64), anchors, net_hw[0]))
    pred = np.concatenate(rows)
    conf = pred[:, 4:5] * pred[:, 5:]
    classes = conf.argmax(axis=1)
    scores = conf[np.arange(len(classes)), classes]
    keep = scores >= score_thr
    xy, wh = pred[keep, :2], pred[keep, 2:4]
    return np.concatenate([xy - wh / 2, xy + wh / 2], axis=1), scores[keep], classes[keep]


def _yolov5_head(head: np.ndarray, anchors, net_h: int) -> np.ndarray:
    if head.ndim == 3:  # [3*(5+C), H, W]
        _, h, w = head.shape
        head = head.reshape(3, -1, h, w).transpose(0, 2, 3, 1)
    _, h, w, _ = head.shape
    stride = net_h / h
    s = 1 / (1 + np.exp(-head))
    gy, gx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    grid = np.stack([gx, gy], axis=-1)[None]
    xy = (s[..., :2] * 2 - 0.5 + grid) * stride
    wh = (s[..., 2:4] * 2) ** 2 * np.asarray(anchors, np.float64)[:, None, None, :]
    return np.concatenate([xy, wh, s[..., 4:]], axis=-1).reshape(-1, head.shape[-1])


def to_image(boxes: np.ndarray, image_hw, net_hw, pp: Preprocess) -> np.ndarray:
    """Boxes in network-input pixels back to original-image pixels, undoing
    tpuc.ir.preprocess's resize, letterbox or short-side scale and center crop."""
    ih, iw = image_hw
    h, w = net_hw
    rh, rw = pp.resize_dims or (h, w)
    rh, rw = max(rh, h), max(rw, w)
    out = boxes.astype(np.float64).copy()
    out[:, [0, 2]] += (rw - w) // 2
    out[:, [1, 3]] += (rh - h) // 2
    if not pp.keep_aspect_ratio:
        sx, sy, dx, dy = iw / rw, ih / rh, 0.0, 0.0
    else:
        pick = min if pp.keep_ratio_mode == "letterbox" else max
        ratio = pick(rw / iw, rh / ih)
        nw, nh = max(1, int(iw * ratio)), max(1, int(ih * ratio))
        if pp.keep_ratio_mode == "letterbox":
            nw, nh = min(nw, rw), min(nh, rh)
            centered = pp.pad_type == "center"
            dx, dy = ((rw - nw) // 2, (rh - nh) // 2) if centered else (0, 0)
            dx, dy = -dx, -dy
        else:
            nw, nh = max(rw, nw), max(rh, nh)
            dx, dy = (nw - rw) // 2, (nh - rh) // 2
        sx, sy = iw / nw, ih / nh
    out[:, [0, 2]] = np.clip((out[:, [0, 2]] + dx) * sx, 0, iw)
    out[:, [1, 3]] = np.clip((out[:, [1, 3]] + dy) * sy, 0, ih)
    return out


@dataclass
class CocoScore:
    """Detections in COCO's result format, scored by pycocotools at the end."""

    annotations: dict
    head: str = "boxes"
    score_thr: float = 0.01
    nms_thr: float = 0.6
    results: list = field(default_factory=list)
    image_ids: list = field(default_factory=list)

    def add(self, outputs: Sequence[np.ndarray], image_id: int, image_hw, net_hw, pp) -> None:
        boxes, scores, classes = DECODERS[self.head](outputs, self.score_thr, net_hw)
        keep = class_nms(boxes, scores, classes, self.nms_thr)
        boxes = to_image(boxes[keep], image_hw, net_hw, pp)
        categories = [c["id"] for c in self.annotations["categories"]]
        self.image_ids.append(image_id)
        for (x1, y1, x2, y2), score, cls in zip(boxes, scores[keep], classes[keep], strict=True):
            if not 0 <= cls < len(categories):
                raise TpucError(
                    f"class {cls} but the annotations have {len(categories)} categories"
                )
            self.results.append(
                {
                    "image_id": image_id,
                    "category_id": categories[int(cls)],
                    "bbox": [float(x1), float(y1), float(x2 - x1), float(y2 - y1)],
                    "score": float(score),
                }
            )

    def summary(self) -> dict[str, float]:
        """COCOeval's bbox statistics (prints its AP table)."""
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval

        truth = COCO()
        truth.dataset = self.annotations
        truth.createIndex()
        if not self.results:
            print("no detections: AP is 0")
            return {"AP": 0.0, "AP50": 0.0, "count": len(self.image_ids)}
        found = truth.loadRes(self.results)
        evaluator = COCOeval(truth, found, "bbox")
        evaluator.params.imgIds = self.image_ids
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
        stats = evaluator.stats
        return {"AP": float(stats[0]), "AP50": float(stats[1]), "count": len(self.image_ids)}


@decoder("db")
def db_text(outputs: Sequence[np.ndarray], score_thr: float, net_hw):
    """PP-OCR det (DB): a text probability map [1,H,W]; each connected region
    above 0.3 becomes a box, grown by DB's unclip (offset area*1.5/perimeter)
    and scored by its mean probability; one class."""
    import cv2

    prob = np.asarray(outputs[0], np.float32).reshape(net_hw)
    count, labels, stats, _ = cv2.connectedComponentsWithStats((prob > 0.3).astype(np.uint8), 4)
    boxes, scores = [], []
    for i in range(1, count):
        x, y, w, h, area = (int(v) for v in stats[i])
        if min(w, h) < 3:
            continue
        grow = w * h * 1.5 / (2 * (w + h))
        boxes.append([x - grow, y - grow, x + w + grow, y + h + grow])
        scores.append(float(prob[labels == i].mean()))
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    scores = np.asarray(scores, np.float64)
    keep = scores >= score_thr
    return boxes[keep], scores[keep], np.zeros(int(keep.sum()), np.int64)
