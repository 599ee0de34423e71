"""scikit-learn's digits (1797 real 8x8 handwritten digits) as an ImageFolder
tree, and a tiny classifier for them built without torch: a seeded
least-squares linear model exported with onnx.helper."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SCALE = 1 / 255  # the preprocessing the model is trained (and transformed) with


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 [N,8,8] as written to PNG, labels [N])."""
    from sklearn.datasets import load_digits

    data = load_digits()
    images = np.clip(data.images * 16, 0, 255).astype(np.uint8)  # 0..16 -> 0..255
    return images, data.target.astype(np.int64)


def write_image_folder(root: Path, count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """root/<digit>/<index>.png for the first `count` digits; returns what was written."""
    from PIL import Image

    images, labels = digits_arrays()
    images, labels = images[:count], labels[:count]
    for index, (image, label) in enumerate(zip(images, labels, strict=True)):
        folder = root / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(image, mode="L").save(folder / f"{index:04d}.png")
    return images, labels


def linear_classifier(path: Path, batch: int = 16) -> Path:
    """x[batch,1,8,8] -> Flatten -> Gemm -> logits[batch,10], fitted by least
    squares (ridge) on all digits scaled by SCALE."""
    images, labels = digits_arrays()
    x = images.reshape(len(images), -1).astype(np.float64) * SCALE
    x1 = np.concatenate([x, np.ones((len(x), 1))], axis=1)
    onehot = np.eye(10)[labels]
    coef = np.linalg.solve(x1.T @ x1 + 1e-2 * np.eye(65), x1.T @ onehot)
    weight = numpy_helper.from_array(coef[:64].T.astype(np.float32), "W")
    bias = numpy_helper.from_array(coef[64].astype(np.float32), "B")
    nodes = [
        helper.make_node("Flatten", ["x"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "W", "B"], ["logits"], transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])],
        [weight, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.save(model, path)
    return path
