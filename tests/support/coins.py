"""A COCO-format detection set from a real image: skimage's `coins` (303x384,
greyscale, 24 coins), one category "coin". The boxes are justified by a
segmentation anyone can rerun: Otsu threshold, closing with a disk of
radius 3, connected components over 300 pixels; coins touching the border
are dropped (clear_border), which leaves 20 boxes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NET_HW = (96, 128)  # the oracle detector's input: resized, aspect ratio not kept


def coin_boxes() -> tuple[np.ndarray, list[list[float]]]:
    """The image and its boxes as COCO [x, y, w, h]."""
    from skimage import data, filters, measure, morphology, segmentation

    image = data.coins()
    mask = morphology.closing(image > filters.threshold_otsu(image), morphology.disk(3))
    labels = measure.label(segmentation.clear_border(mask))
    boxes = []
    for region in measure.regionprops(labels):
        if region.area > 300:
            y0, x0, y1, x1 = region.bbox
            boxes.append([float(x0), float(y0), float(x1 - x0), float(y1 - y0)])
    return image, boxes


def write_coco(root: Path) -> Path:
    """root/coins.png and root/annotations.json; returns the json's path."""
    from PIL import Image

    image, boxes = coin_boxes()
    root.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(root / "coins.png")
    h, w = image.shape
    annotations = [
        {
            "id": i + 1,
            "image_id": 1,
            "category_id": 1,
            "bbox": box,
            "area": box[2] * box[3],
            "iscrowd": 0,
        }
        for i, box in enumerate(boxes)
    ]
    coco = {
        "images": [{"id": 1, "file_name": "coins.png", "height": h, "width": w}],
        "annotations": annotations,
        "categories": [{"id": 1, "name": "coin"}],
    }
    path = root / "annotations.json"
    path.write_text(json.dumps(coco))
    return path


def oracle_detector(path: Path) -> Path:
    """x[1,1,96,128] -> boxes[1,K,4] (the true boxes in input pixels, x1y1x2y2)
    and scores[1,K,1]; the boxes are added to 0*mean(x) so they flow from the
    input through real ops. Scores the geometry and COCO plumbing: its AP
    is 1 in float."""
    _, boxes = coin_boxes()
    image_h, image_w = 303, 384
    sy, sx = NET_HW[0] / image_h, NET_HW[1] / image_w
    xyxy = np.array([[x * sx, y * sy, (x + w) * sx, (y + h) * sy] for x, y, w, h in boxes])
    scores = np.linspace(0.9, 0.6, len(boxes))[None, :, None]
    inits = [
        numpy_helper.from_array(xyxy[None].astype(np.float32), "B"),
        numpy_helper.from_array(scores.astype(np.float32), "S"),
        numpy_helper.from_array(np.zeros((1, 1, 1), np.float32), "Z"),
    ]
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], axes=[1, 2, 3], keepdims=1, name="mean"),
        helper.make_node("Reshape", ["m", "shape"], ["m3"], name="flat"),
        helper.make_node("Mul", ["m3", "Z"], ["zero"], name="zero"),
        helper.make_node("Add", ["zero", "B"], ["boxes"], name="boxes"),
        helper.make_node("Add", ["zero", "S"], ["scores"], name="scores"),
    ]
    inits.append(numpy_helper.from_array(np.array([1, 1, 1], np.int64), "shape"))
    k = len(boxes)
    graph = helper.make_graph(
        nodes,
        "coin_oracle",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, *NET_HW])],
        [
            helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, k, 4]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, k, 1]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)
    return path
