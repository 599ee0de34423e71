"""A COCO-format text-detection set from a real image: skimage's `page`
(191x384 greyscale scan of a book page). Text-line boxes come from a
segmentation anyone can rerun: Sauvola threshold (window 25), specks of
<= 8 px dropped, dilation with a 3x15 rectangle joining letters into lines,
connected components over 150 px and at least 8 px tall. Three images: the
page, its left and its right half (boxes clipped to each)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def line_boxes(image: np.ndarray) -> list[list[float]]:
    """Text-line boxes of a page as COCO [x, y, w, h]."""
    from skimage import filters, measure, morphology

    dark = image < filters.threshold_sauvola(image, window_size=25)
    labels = measure.label(dark)
    sizes = np.bincount(labels.ravel())
    dark &= sizes[labels] > 8
    joined = morphology.dilation(dark, np.ones((3, 15), bool))
    boxes = []
    for region in measure.regionprops(measure.label(joined)):
        y0, x0, y1, x1 = region.bbox
        if region.area > 150 and y1 - y0 >= 8:
            boxes.append([float(x0), float(y0), float(x1 - x0), float(y1 - y0)])
    return boxes


def write_coco(root: Path) -> Path:
    """root/page*.png and root/annotations.json (category 1: text)."""
    from PIL import Image
    from skimage import data

    page = data.page()
    half = page.shape[1] // 2
    crops = {"page.png": page, "page_left.png": page[:, :half], "page_right.png": page[:, half:]}
    root.mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for index, (name, crop) in enumerate(crops.items(), start=1):
        Image.fromarray(np.ascontiguousarray(crop)).save(root / name)
        h, w = crop.shape
        images.append({"id": index, "file_name": name, "height": h, "width": w})
        for box in line_boxes(crop):
            annotations.append(
                {"id": len(annotations) + 1, "image_id": index, "category_id": 1, "bbox": box,
                 "area": box[2] * box[3], "iscrowd": 0}
            )  # fmt: skip
    coco = {"images": images, "annotations": annotations, "categories": [{"id": 1, "name": "text"}]}
    path = root / "annotations.json"
    path.write_text(json.dumps(coco))
    return path
