#!/usr/bin/env python3
"""Regenerate the example shipped with the package (tpuc/data/).

tinycnn.onnx: a small seeded-random CNN (conv+BN+ReLU, a residual block,
ReLU6 clip, max/global-average pooling, Gemm, Softmax), enough to exercise
the canonical fusions; cat.png: skimage's `chelsea`, resized to 64x64.
Needs onnx, numpy, Pillow and (for the image) scikit-image.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

DATA = Path(__file__).resolve().parent.parent / "tpuc" / "data"


def _conv_bn_relu(rng, nodes, inits, x, y, cin, cout, stride=1, relu="Relu"):
    w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / (cin * 9))).astype(np.float32)
    inits += [numpy_helper.from_array(w, f"{y}_w")]
    bn = [
        rng.uniform(0.8, 1.2, cout),
        rng.standard_normal(cout) * 0.1,
        rng.standard_normal(cout) * 0.1,
        rng.uniform(0.5, 1.5, cout),
    ]
    names = [f"{y}_{k}" for k in ("gamma", "beta", "mean", "var")]
    inits += [
        numpy_helper.from_array(v.astype(np.float32), n) for v, n in zip(bn, names, strict=True)
    ]
    nodes.append(
        helper.make_node(
            "Conv",
            [x, f"{y}_w"],
            [f"{y}_conv"],
            pads=[1, 1, 1, 1],
            strides=[stride, stride],
            kernel_shape=[3, 3],
            name=f"{y}_conv",
        )
    )
    nodes.append(
        helper.make_node("BatchNormalization", [f"{y}_conv", *names], [f"{y}_bn"], name=f"{y}_bn")
    )
    if relu == "Relu":
        nodes.append(helper.make_node("Relu", [f"{y}_bn"], [y], name=y))
    else:
        nodes.append(helper.make_node("Clip", [f"{y}_bn", "zero", "six"], [y], name=y))


def build_model(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes: list = []
    inits = [
        numpy_helper.from_array(np.float32(0), "zero"),
        numpy_helper.from_array(np.float32(6), "six"),
    ]
    _conv_bn_relu(rng, nodes, inits, "input", "c1", 3, 16)
    nodes.append(
        helper.make_node("MaxPool", ["c1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="p1")
    )
    _conv_bn_relu(rng, nodes, inits, "p1", "c2", 16, 16)
    _conv_bn_relu(rng, nodes, inits, "c2", "c3", 16, 16, relu="Clip")
    nodes.append(helper.make_node("Add", ["p1", "c3"], ["res"], name="res"))
    _conv_bn_relu(rng, nodes, inits, "res", "c4", 16, 32, stride=2)
    nodes.append(helper.make_node("GlobalAveragePool", ["c4"], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flat"))
    fc = (rng.standard_normal((10, 32)) * np.sqrt(2 / 32) * 3).astype(np.float32)
    inits += [
        numpy_helper.from_array(fc, "fc_w"),
        numpy_helper.from_array(np.zeros(10, np.float32), "fc_b"),
    ]
    nodes.append(
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1, name="fc")
    )
    nodes.append(helper.make_node("Softmax", ["logits"], ["prob"], axis=1, name="prob"))
    graph = helper.make_graph(
        nodes,
        "tinycnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="tpuc-example"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DATA)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    onnx.save(build_model(), args.out / "tinycnn.onnx")
    import skimage.data

    Image.fromarray(skimage.data.chelsea()).resize((64, 64), Image.BILINEAR).save(
        args.out / "cat.png", optimize=True
    )
    print(f"wrote {args.out / 'tinycnn.onnx'} and {args.out / 'cat.png'}")


if __name__ == "__main__":
    main()
