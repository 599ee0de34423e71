"""Real data for model_eval.py and visual.py: scikit-learn's digits as an
ImageFolder tree, a small CNN trained on it with torch, and its ONNX.

    python regression/digits_cnn.py OUT_DIR [--epochs 15] [--batch 16]

Writes OUT_DIR/digits/<class>/<index>.png (1797 real 8x8 handwritten digits,
greyscale, pixel = value*16), OUT_DIR/cali/ (3 images per class, for
run_calibration.py) and OUT_DIR/digits_cnn.onnx (input x[batch,1,8,8] =
pixel/255, output logits[batch,10]; about 20 KB). Training uses images with
an even index, so the odd ones are held out; the script prints both
accuracies as torch computes them. torch is not a tpuc dependency: install
the CPU build (`pip install torch==2.13.0` here). Then, for example:

    model_transform.py --model_name digits --model_def OUT/digits_cnn.onnx \
        --mlir OUT/digits.mlir --pixel_format gray --scale 0.00392156862745098
    run_calibration.py OUT/digits.mlir --dataset OUT/cali -o OUT/digits_cali
    model_deploy.py --mlir OUT/digits.mlir --quantize INT8 --chip bm1684x \
        --calibration_table OUT/digits_cali --model OUT/digits.bmodel
    model_eval.py --stages OUT/digits_cnn.onnx,OUT/digits.mlir,\
OUT/digits_bm1684x_int8_sym_tpu.mlir,OUT/digits.bmodel \
        --dataset OUT/digits --postprocess_type topx
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.digits import SCALE, digits_arrays, write_image_folder  # noqa: E402


def build(torch):
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1, stride=2),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 10),
    )


def train(epochs: int, seed: int = 0):
    import torch

    torch.manual_seed(seed)
    images, labels = digits_arrays()
    x = torch.tensor(images[:, None].astype(np.float32) * np.float32(SCALE))
    y = torch.tensor(labels)
    train_idx = torch.arange(0, len(x), 2)
    net = build(torch)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(epochs):
        perm = train_idx[torch.randperm(len(train_idx))]
        for start in range(0, len(perm), 32):
            batch = perm[start : start + 32]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(net(x[batch]), y[batch])
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        hits = net(x).argmax(1) == y
    print(
        f"train accuracy {hits[0::2].float().mean():.4f}, held out {hits[1::2].float().mean():.4f}"
    )
    return net


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch", type=int, default=16, help="the ONNX model's static batch")
    args = parser.parse_args()
    import torch

    write_image_folder(args.out / "digits")
    cali = args.out / "cali"
    cali.mkdir(parents=True, exist_ok=True)
    for folder in sorted((args.out / "digits").iterdir()):
        for png in sorted(folder.glob("*.png"))[:3]:
            (cali / png.name).write_bytes(png.read_bytes())
    net = train(args.epochs)
    dummy = torch.zeros(args.batch, 1, 8, 8)
    onnx_path = args.out / "digits_cnn.onnx"
    torch.onnx.export(
        net,
        dummy,
        onnx_path,
        input_names=["x"],
        output_names=["logits"],
        opset_version=13,
        dynamo=False,
    )
    print(f"wrote {onnx_path} ({onnx_path.stat().st_size} bytes) and {args.out / 'digits'}")


if __name__ == "__main__":
    main()
