#!/usr/bin/env python3
"""model_deploy.py on the anchor models in every mode, against onnxruntime.

For each model: model_transform.py (with the anchor's real-image test
input), run_calibration.py (kl, the 20 real-image samples, --tune_num 5),
then model_deploy.py per (chip, mode) with its TPU-vs-TOP verification. The
table shows whether deploy passed and each final output's cosine against
onnxruntime FP32 on the same input, next to tpu-mlir 1.30.2's INT8 cosine
(shared/anchors/SUMMARY.md).

    python regression/run_deploy.py [--models resnet50,ppocr_rec]
        [--targets bm1684x:INT8,cv183x:BF16] [--cali_method mse] [--work DIR] [--reuse]

--cali_method picks run_calibration.py's threshold method (default kl, as
TPU-MLIR; each method keeps its own table, `<name>_cali_table[_<method>]`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_zoo import ANCHORS, CACHE, anchor_model  # noqa: E402

MODELS = ("resnet50", "ppocr_det", "ppocr_cls", "ppocr_rec")
TARGETS = (
    "bm1684x:INT8",
    "bm1684x:INT8_ASYM",
    "bm1684x:F16",
    "bm1684x:BF16",
    "bm1684x:F32",
    "cv183x:INT8",
    "cv183x:BF16",
)
TPU_MLIR_INT8_COS = {"resnet50": 0.9436, "ppocr_det": 0.9718, "ppocr_cls": 0.99998,
                     "ppocr_rec": 0.8909}  # fmt: skip
TOLERANCE = {"F32": "0.99999,0.999", "F16": "0.99,0.9", "BF16": "0.99,0.85",
             "INT8": "0.8,0.5", "INT8_ASYM": "0.8,0.5"}  # fmt: skip


def tool(module: str, argv: list[str], log: Path) -> tuple[int, float]:
    start = time.perf_counter()
    with log.open("a") as out:
        out.write(f"$ {module} {' '.join(argv)}\n")
        out.flush()
        code = subprocess.run(
            [sys.executable, "-m", module, *argv], stdout=out, stderr=out
        ).returncode
    return code, time.perf_counter() - start


def prepare(
    model, work: Path, reuse: bool, log: Path, method: str = "kl"
) -> tuple[Path, Path, Path]:
    """Transform and calibrate (skipped with --reuse when the files exist)."""
    mlir = work / f"{model.name}.mlir"
    top = work / f"{model.name}_top_outputs.npz"
    table = work / (f"{model.name}_cali_table" + ("" if method == "kl" else f"_{method}"))
    if not (reuse and mlir.exists() and top.exists()):
        code, _ = tool("tpuc.tools.model_transform", [
            "--model_name", model.name, "--model_def", str(model.onnx_path),
            "--test_input", str(model.test_input), "--test_result", str(top),
            "--mlir", str(mlir)], log)  # fmt: skip
        if code:
            raise SystemExit(f"model_transform failed for {model.name}; see {log}")
    if not (reuse and table.exists()):
        code, seconds = tool("tpuc.tools.run_calibration", [
            str(mlir), "--dataset", str(model.test_input.parent / "cali"),
            "--cali_method", method, "--tune_num", "5", "-o", str(table)], log)  # fmt: skip
        if code:
            raise SystemExit(f"run_calibration failed for {model.name}; see {log}")
        print(f"{model.name}: calibration {seconds:.1f} s")
    return mlir, work / f"{model.name}_in_f32.npz", table


def onnx_outputs(model, inputs: Path) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(model.onnx_path), providers=["CPUExecutionProvider"])
    feed = dict(np.load(inputs))
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feed), strict=True))


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def deploy(model, files, target: str, work: Path, log: Path) -> dict:
    mlir, inputs, table = files
    chip, mode = target.split(":")
    quantize = (
        ["--quantize", "INT8", "--asymmetric"] if mode == "INT8_ASYM" else ["--quantize", mode]
    )
    out = work / f"{chip}_{mode.lower()}"
    out.mkdir(exist_ok=True)
    argv = ["--mlir", str(mlir), "--chip", chip, *quantize, "--calibration_table", str(table),
            "--test_input", str(inputs), "--test_reference",
            str(work / f"{model.name}_top_outputs.npz"), "--tolerance", TOLERANCE[mode],
            "--model", str(out / f"{model.name}.bmodel")]  # fmt: skip
    code, seconds = tool("tpuc.tools.model_deploy", argv, log)
    found = sorted(out.glob("*_tpu_outputs.npz"))
    return {"target": target, "ok": code == 0, "seconds": seconds,
            "outputs": dict(np.load(found[0])) if found else {}}  # fmt: skip


def report(model, rows: list[dict], reference: dict[str, np.ndarray]) -> bool:
    ok = True
    for row in rows:
        cosines = [cosine(row["outputs"][name], ref) for name, ref in reference.items()
                   if name in row["outputs"]]  # fmt: skip
        shown = " ".join(f"{c:.6f}" for c in cosines) or "-"
        mode = row["target"].split(":")[1]
        note = ""
        if mode == "INT8" and row["target"].startswith("bm1684x") and cosines:
            theirs = TPU_MLIR_INT8_COS.get(model.name)
            if theirs is not None:
                note = f"(tpu-mlir {theirs}; {'beats' if min(cosines) >= theirs else 'BELOW'})"
                ok &= min(cosines) >= theirs
        ok &= row["ok"]
        verdict = "PASS" if row["ok"] else "FAIL"
        print(f"{model.name:10} {row['target']:18} {verdict} {row['seconds']:6.1f}s "
              f"cos vs ORT {shown} {note}")  # fmt: skip
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--anchors", type=Path, default=ANCHORS)
    parser.add_argument("--work", type=Path, default=CACHE / "deploy")
    parser.add_argument("--reuse", action="store_true", help="keep transform/calibration files")
    parser.add_argument("--cali_method", default="kl", help="run_calibration.py threshold method")
    args = parser.parse_args(argv)
    ok = True
    for name in args.models.split(","):
        model = anchor_model(name, args.anchors)
        work = args.work / name
        work.mkdir(parents=True, exist_ok=True)
        log = work / "log.txt"
        files = prepare(model, work, args.reuse, log, args.cali_method)
        reference = onnx_outputs(model, files[1])
        rows = [deploy(model, files, t, work, log) for t in args.targets.split(",")]
        ok &= report(model, rows, reference)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
