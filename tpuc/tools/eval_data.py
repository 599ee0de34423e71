"""The samples model_eval.py scores: labelled images and COCO detection sets.

Classification (`imagenet`, `user_define`): an ImageFolder tree (one
sub-folder per class, class index = sorted folder order, as torchvision's
ImageFolder) or a flat image list (--dataset folder or --data_list) with a
--label_file (lines `name label`, or one label per line in image order).
Detection (`coco`): a COCO-format annotation json (--label_file) whose
`images[].file_name` are relative to --dataset.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tpuc.base.errors import TpucError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".pgm", ".ppm")


@dataclass(frozen=True)
class Sample:
    """One image and what it is scored against (a class index or a COCO image id)."""

    path: str
    target: int


def _images(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def classification_samples(dataset: str | None, data_list: str | None, label_file: str | None):
    """The labelled images of an ImageFolder tree or of a list plus label file."""
    if data_list:
        paths = _listed(data_list)
    else:
        if not dataset:
            raise TpucError(
                "give --dataset DIR (an ImageFolder tree or image folder) or --data_list"
            )
        root = Path(dataset)
        if not root.is_dir():
            raise TpucError(f"--dataset {dataset}: no such folder")
        if not label_file:
            return _image_folder(root)
        paths = _images(root)
    if not label_file:
        raise TpucError("--data_list needs --label_file (the class of each image)")
    if not paths:
        raise TpucError(
            f"{dataset or data_list}: no images (looked for {', '.join(IMAGE_SUFFIXES)})"
        )
    labels = _read_labels(label_file, paths)
    return [Sample(str(p), labels[i]) for i, p in enumerate(paths)]


def _listed(data_list: str) -> list[Path]:
    file = Path(data_list)
    if not file.is_file():
        raise TpucError(f"--data_list {data_list}: no such file")
    base = file.parent
    paths = []
    for line in file.read_text().splitlines():
        if line.strip():
            path = Path(line.split()[0])
            paths.append(path if path.is_absolute() or path.exists() else base / path)
    return paths


def _image_folder(root: Path) -> list[Sample]:
    classes = sorted(p for p in root.iterdir() if p.is_dir())
    samples = [Sample(str(img), index) for index, c in enumerate(classes) for img in _images(c)]
    if samples:
        return samples
    if _images(root):
        raise TpucError(
            f"--dataset {root}: images but no class sub-folders; give --label_file for their labels"
        )
    raise TpucError(f"--dataset {root}: no images (looked for {', '.join(IMAGE_SUFFIXES)})")


def _read_labels(label_file: str, paths: list[Path]) -> list[int]:
    """Labels in image order, from `name label` lines or one label per line."""
    file = Path(label_file)
    if not file.is_file():
        raise TpucError(f"--label_file {label_file}: no such file")
    rows = [line.split() for line in file.read_text().splitlines() if line.strip()]
    try:
        if rows and all(len(r) >= 2 for r in rows):
            by_name = {Path(r[0]).name: int(r[-1]) for r in rows}
            missing = [p.name for p in paths if p.name not in by_name]
            if missing:
                raise TpucError(
                    f"--label_file {label_file}: no label for {len(missing)} of {len(paths)} "
                    f"image(s), e.g. {missing[0]}"
                )
            return [by_name[p.name] for p in paths]
        labels = [int(r[0]) for r in rows]
    except ValueError as exc:
        raise TpucError(f"--label_file {label_file}: a label is not an integer ({exc})") from None
    if len(labels) != len(paths):
        raise TpucError(
            f"--label_file {label_file}: {len(labels)} label(s) for {len(paths)} image(s)"
        )
    return labels


def coco_samples(dataset: str | None, annotation: str | None) -> tuple[list[Sample], dict]:
    """The images of a COCO annotation file (ids as targets) and the parsed json."""
    if not annotation:
        raise TpucError("--dataset_type coco needs --label_file ANNOTATIONS.json (COCO format)")
    file = Path(annotation)
    if not file.is_file():
        raise TpucError(f"--label_file {annotation}: no such file")
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TpucError(f"--label_file {annotation}: not valid JSON ({exc})") from None
    missing = [
        k
        for k in ("images", "annotations", "categories")
        if not isinstance(data, dict) or k not in data
    ]
    if missing:
        raise TpucError(
            f"--label_file {annotation}: not a COCO annotation file (no {', '.join(missing)})"
        )
    root = Path(dataset or file.parent)
    samples = []
    for image in data["images"]:
        try:
            samples.append(Sample(str(root / image["file_name"]), int(image["id"])))
        except (KeyError, TypeError, ValueError):
            raise TpucError(
                f"--label_file {annotation}: an image entry lacks file_name or an integer id"
            ) from None
    if not samples:
        raise TpucError(f"--label_file {annotation}: lists no images")
    absent = [s.path for s in samples if not Path(s.path).is_file()]
    if absent:
        raise TpucError(f"{len(absent)} annotated image(s) not found, e.g. {absent[0]}")
    return samples, data
