#!/usr/bin/env python3
"""The MediaPipe float `.tflite` models through tpuc, against LiteRT.

Reads the 14 `.tflite` files inside the `mediapipe==0.10.21` wheel (the
last with models; Apache-2.0), downloaded with `pip download --no-deps`
into a cache outside the repository (mediapipe is never imported and no
model file is committed). For every model LiteRT can run:

1. model_transform.py on a real image (skimage.data's astronaut when
   scikit-image is installed, else tpuc's cat.png) resized to the model's
   input and scaled to [-1, 1]; TOP against LiteRT tensor by tensor;
2. the cosine of every output and of every comparable intermediate
   (tensors both have; TOP's NCHW ones against LiteRT's transposed);
3. run_calibration.py on a few real images (seeded crops and flips);
4. model_deploy.py F16 and INT8 for bm1684x: the TPU interpreter against
   TOP and the bmodel in the simulator bit-exact against the interpreter.

    python regression/tflite_mediapipe.py [--cache /tmp/mp] [--work DIR]
        [--models face_detection_short_range,iris_landmark] [--modes F16,INT8]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

WHEEL = "mediapipe==0.10.21"
# INT8 accuracy is reported (the cosine column), not gated: the deploy's own
# check is then only the bit-exact bmodel-vs-interpreter one
TOLERANCE = {"F16": "0.99,0.9", "INT8": "-1,-10"}
F16_MAX = 65504.0
CALI_SAMPLES = 6


def wheel_path(cache: Path) -> Path:
    found = sorted(cache.glob("mediapipe-0.10.21-*.whl"))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", WHEEL, "-d", str(cache)]
    subprocess.run(cmd, check=True)
    return sorted(cache.glob("mediapipe-0.10.21-*.whl"))[0]


def extract_models(wheel: Path, into: Path) -> list[Path]:
    into.mkdir(parents=True, exist_ok=True)
    out = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            if name.endswith(".tflite"):
                path = into / Path(name).name
                path.write_bytes(z.read(name))
                out.append(path)
    return out


def base_images() -> list[np.ndarray]:
    """RGB uint8 images: scikit-image's samples, else tpuc's cat."""
    try:
        from skimage import data

        return [data.astronaut(), data.chelsea(), data.coffee(), data.rocket()]
    except ImportError:
        from PIL import Image

        cat = Path(__file__).resolve().parents[1] / "tpuc" / "data" / "cat.png"
        return [np.asarray(Image.open(cat).convert("RGB"))]


def sample(image: np.ndarray, shape, rng: np.random.Generator | None) -> np.ndarray:
    """A [1, H, W, 3] float32 sample in [-1, 1]; with `rng` a seeded crop
    and flip of the image."""
    from PIL import Image

    _, h, w, _ = shape
    img = image
    if rng is not None:
        ih, iw = img.shape[:2]
        ch, cw = int(ih * rng.uniform(0.6, 1.0)), int(iw * rng.uniform(0.6, 1.0))
        y, x = rng.integers(0, ih - ch + 1), rng.integers(0, iw - cw + 1)
        img = img[y : y + ch, x : x + cw]
        if rng.random() < 0.5:
            img = img[:, ::-1]
    resized = np.asarray(Image.fromarray(np.ascontiguousarray(img)).resize((w, h)), np.float32)
    return (resized / 127.5 - 1.0)[None]


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    denom = np.linalg.norm(a) * np.linalg.norm(b)
    return 1.0 if denom == 0 and np.array_equal(a, b) else float(a @ b / max(denom, 1e-300))


def tool(name: str, argv: list[str], log: Path) -> int:
    with log.open("a") as out:
        out.write(f"$ {name} {' '.join(argv)}\n")
        out.flush()
        return subprocess.run(
            [sys.executable, "-m", f"tpuc.tools.{name}", *argv], stdout=out, stderr=out
        ).returncode


def last_error(log: Path) -> str:
    lines = [ln for ln in log.read_text().splitlines() if ln.startswith("error:")]
    return lines[-1][7:][:90] if lines else "see log"


def run_model(path: Path, work: Path, modes: list[str]) -> dict:
    from tpuc.frontends.tflite import convert_tflite
    from tpuc.frontends.tflite.reference import run_tflite

    name = path.stem
    row: dict = {"model": name}
    d = work / name
    d.mkdir(parents=True, exist_ok=True)
    log = d / "log.txt"
    log.write_text("")
    from ai_edge_litert.interpreter import Interpreter

    try:
        details = Interpreter(model_path=str(path)).get_input_details()
        Interpreter(model_path=str(path)).allocate_tensors()
    except Exception as exc:  # LiteRT cannot run it: listed, not converted
        row["skip"] = f"LiteRT: {str(exc).splitlines()[0][:70]}"
        return row
    images = base_images()
    feed = {dd["name"]: sample(images[0], dd["shape"], None) for dd in details}
    np.savez(d / "in.npz", **feed)
    start = time.perf_counter()
    argv = [
        "--model_name",
        name,
        "--model_def",
        str(path),
        "--test_input",
        str(d / "in.npz"),
        "--mlir",
        str(d / f"{name}.mlir"),
        "--tolerance",
        "0.99999,0.99",
    ]
    row["transform"] = tool("model_transform", argv, log) == 0
    row["transform_s"] = time.perf_counter() - start
    if not row["transform"]:
        row["skip"] = f"transform: {last_error(log)}"
        return row
    _, _, keys, _ = convert_tflite(str(path), name)
    top = dict(np.load(d / f"{name}_top_outputs.npz"))
    ref = run_tflite(str(path), feed, keys={k: v for k, v in keys.items() if k in top})
    outputs = set(_output_names(d / f"{name}.mlir"))
    cos = {k: cosine(top[k], ref[k]) for k in ref if top[k].shape == ref[k].shape}
    row["out_cos"] = min(cos[k] for k in outputs if k in cos)
    row["mid_cos"] = min(cos.values())
    row["compared"] = len(cos)
    rng = np.random.default_rng(0)
    cali = d / "cali"
    cali.mkdir(exist_ok=True)
    for i in range(CALI_SAMPLES):
        img = images[i % len(images)]
        feed_i = {dd["name"]: sample(img, dd["shape"], rng) for dd in details}
        np.savez(cali / f"s{i}.npz", **feed_i)
    table = d / f"{name}_cali_table"
    if "INT8" in modes:
        argv = [
            str(d / f"{name}.mlir"),
            "--dataset",
            str(cali),
            "-o",
            str(table),
            "--tune_num",
            "0",
        ]
        if tool("run_calibration", argv, log) != 0:
            row["INT8"] = f"calibration: {last_error(log)}"
    for mode in modes:
        if mode in row:
            continue
        row[mode] = deploy(name, d, mode, table, log, top, outputs)
    return row


def _output_names(mlir: Path) -> list[str]:
    from tpuc.ir.core import output_names
    from tpuc.ir.module_io import load_module

    module, _ = load_module(mlir)
    return output_names(module)


def with_consumers(mlir: Path, names: list[str]) -> list[str]:
    """`names` and the ops that read them (a float16 input would overflow)."""
    if not names:
        return []
    from tpuc.ir.core import body_ops, main_function
    from tpuc.ir.module_io import load_module

    module, _ = load_module(mlir)
    wanted, out = set(names), dict.fromkeys(names)
    for op in body_ops(main_function(module).body.block):
        if (getattr(op, "names", None) or [None])[0] not in wanted:
            continue
        for result in op.results:
            for use in result.uses:
                user_names = getattr(use.operation, "names", None)
                if user_names:
                    out[user_names[0]] = None
    return list(out)


def deploy(name, d: Path, mode: str, table: Path, log: Path, top, outputs) -> str:
    bmodel = d / f"{name}_{mode.lower()}.bmodel"
    argv = [
        "--mlir",
        str(d / f"{name}.mlir"),
        "--chip",
        "bm1684x",
        "--quantize",
        mode,
        "--test_input",
        str(d / f"{name}_in_f32.npz"),
        "--test_reference",
        str(d / f"{name}_top_outputs.npz"),
        f"--tolerance={TOLERANCE[mode]}",
        "--model",
        str(bmodel),
    ]
    note = ""
    if mode == "F16":
        # activations past float16's range (palm_detection_full's depthwise
        # outputs reach 4e5) stay F32: a qtable, as a user would write it
        big = [k for k, v in top.items() if v.size and float(np.abs(v).max()) > F16_MAX / 2]
        big = with_consumers(d / f"{name}.mlir", big)
        if big:
            qtable = d / f"{name}_f16_qtable"
            qtable.write_text("".join(f"{k} F32\n" for k in big))
            argv += ["--quantize_table", str(qtable)]
            note = f"; {len(big)} layers F32"
    if mode == "INT8":
        argv += ["--calibration_table", str(table)]
        # a one-value output (a presence score far from the threshold, say)
        # has no meaningful cosine: compared by value in the table instead
        single = [k for k in outputs if k in top and top[k].size == 1]
        if single:
            argv += ["--excepts", ",".join(single)]
    start = time.perf_counter()
    if tool("model_deploy", argv, log) != 0:
        return f"FAIL ({last_error(log)})"
    seconds = time.perf_counter() - start
    found = sorted(d.glob(f"{name}_bm1684x_{mode.lower()}*_tpu_outputs.npz"))
    tpu = dict(np.load(found[-1])) if found else {}
    cos = [cosine(tpu[k], top[k]) for k in outputs if k in tpu and k in top and top[k].size > 1]
    shown = f"{min(cos):.5f}" if cos else "?"
    scalars = "".join(
        f"; {k} {float(tpu[k].reshape(-1)[0]):.3g} vs {float(top[k].reshape(-1)[0]):.3g}"
        for k in outputs
        if k in tpu and k in top and top[k].size == 1
    )
    return f"bit-exact, cos {shown}{scalars}{note}, {seconds:.0f}s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "mp"))
    parser.add_argument("--work", default=None)
    parser.add_argument("--models", default="")
    parser.add_argument("--modes", default="F16,INT8")
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="tpuc_mediapipe_"))
    models = extract_models(wheel_path(Path(args.cache)), work / "models")
    wanted = [m for m in args.models.split(",") if m]
    if wanted:
        models = [m for m in models if m.stem in wanted]
    modes = [m for m in args.modes.split(",") if m]
    rows = []
    print(
        "| model | min cos outputs | min cos all tensors | tensors compared | "
        + " | ".join(f"{m} (bm1684x)" for m in modes)
        + " |"
    )
    print("|---|---|---|---|" + "---|" * len(modes))
    for path in models:
        row = run_model(path, work, modes)
        rows.append(row)
        print(line(row, modes), flush=True)
    print(f"work folder: {work}")
    bad = [
        r
        for r in rows
        if "skip" not in r
        and (
            r.get("out_cos", 0) < 0.99999
            or any(not str(r.get(m, "")).startswith("bit-exact") for m in modes)
        )
    ]
    return 1 if bad else 0


def line(row: dict, modes: list[str]) -> str:
    if "skip" in row:
        return f"| {row['model']} | skipped: {row['skip']} |"
    cells = [
        row["model"],
        f"{row['out_cos']:.9f}",
        f"{row['mid_cos']:.9f}",
        str(row["compared"]),
    ] + [str(row.get(m, "")) for m in modes]
    return "| " + " | ".join(cells) + " |"


if __name__ == "__main__":
    sys.exit(main())
