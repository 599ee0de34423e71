#!/usr/bin/env python3
"""Every artifact of every anchor model, hashed: proof that a change kept behaviour.

For each model: model_transform.py (the anchor's real-image test input),
run_calibration.py (kl, the 20 real-image samples, --tune_num 5), then
model_deploy.py per (chip, mode) — TPU-vs-TOP verification and the bmodel
run in the simulator included. Every file written (the .mlir files, weight
and output npz, calibration table, bmodel, tensor locations) is hashed into a
manifest; logs are not. Run it once before a refactoring and once after, on
the same --work path, then compare the two manifests:

    python regression/snapshot.py --anchors DIR --work /tmp/snap -o before.json
    ... change the code ...
    python regression/snapshot.py --anchors DIR --work /tmp/snap -o after.json
    python regression/snapshot.py --compare before.json after.json

SOURCE_DATE_EPOCH is fixed so the bmodel's `time` field and table comments
do not depend on the clock. The tools are run with this interpreter
(`python -m tpuc.tools.…`, from the work folder so that a checkout in the
current directory is not picked up), so a manifest describes the tpuc
installed in that interpreter.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_zoo import ANCHORS, anchor_model  # noqa: E402
from run_deploy import TARGETS  # noqa: E402

MODELS = ("smallcnn", "resblock", "resnet50", "squeezenet", "inception_v1", "shufflenet",
          "densenet121", "ppocr_det", "ppocr_cls", "ppocr_rec")  # fmt: skip
SKIPPED_SUFFIXES = (".txt", ".log")


def run(module: str, argv: list[str], log: Path) -> int:
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
    with log.open("a") as out:
        out.write(f"$ {module} {' '.join(argv)}\n")
        out.flush()
        return subprocess.run(
            [sys.executable, "-m", module, *argv], stdout=out, stderr=out, env=env, cwd=log.parent
        ).returncode


def build(name: str, anchors: Path, work: Path, targets: list[str]) -> dict[str, int]:
    """All tools on one model; the exit code of each step."""
    model = anchor_model(name, anchors)
    work.mkdir(parents=True, exist_ok=True)
    log = work / "log.txt"
    log.write_text("")
    mlir, table = work / f"{name}.mlir", work / f"{name}_cali_table"
    codes = {
        "transform": run("tpuc.tools.model_transform", [
            "--model_name", name, "--model_def", str(model.onnx_path),
            "--test_input", str(model.test_input),
            "--test_result", str(work / f"{name}_top_outputs.npz"), "--mlir", str(mlir)], log),
    }  # fmt: skip
    codes["calibration"] = run("tpuc.tools.run_calibration", [
        str(mlir), "--dataset", str(model.test_input.parent / "cali"), "--cali_method", "kl",
        "--tune_num", "5", "-o", str(table)], log)  # fmt: skip
    for target in targets:
        chip, mode = target.split(":")
        quantize = ["--quantize", "INT8", "--asymmetric"] if mode == "INT8_ASYM" else [
            "--quantize", mode]  # fmt: skip
        out = work / f"{chip}_{mode.lower()}"
        out.mkdir(exist_ok=True)
        codes[target] = run("tpuc.tools.model_deploy", [
            "--mlir", str(mlir), "--chip", chip, *quantize, "--calibration_table", str(table),
            "--test_input", str(work / f"{name}_in_f32.npz"),
            "--test_reference", str(work / f"{name}_top_outputs.npz"),
            "--tolerance", "0,0", "--model", str(out / f"{name}.bmodel")], log)  # fmt: skip
    return codes


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest(work: Path) -> dict[str, str]:
    files = sorted(p for p in work.rglob("*") if p.is_file() and p.suffix not in SKIPPED_SUFFIXES)
    return {str(p.relative_to(work)): digest(p) for p in files}


def compare(before: Path, after: Path) -> int:
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    # Only the models AFTER ran (a quick check may run a few of them).
    models = {key.split(":")[0] for key in b["codes"]}
    a["files"] = {k: v for k, v in a["files"].items() if k.split("/")[0] in models}
    a["codes"] = {k: v for k, v in a["codes"].items() if k.split(":")[0] in models}
    same = [k for k in a["files"] if b["files"].get(k) == a["files"][k]]
    changed = sorted(k for k in a["files"] if k in b["files"] and k not in same)
    missing = sorted(set(a["files"]) - set(b["files"]))
    added = sorted(set(b["files"]) - set(a["files"]))
    for label, keys in (("CHANGED", changed), ("MISSING", missing), ("NEW", added)):
        for key in keys:
            print(f"{label:8} {key}")
    codes = [k for k in a["codes"] if a["codes"][k] != b["codes"].get(k)]
    for key in codes:
        print(f"EXIT     {key}: {a['codes'][key]} -> {b['codes'].get(key)}")
    print(f"{len(same)} of {len(a['files'])} files byte-identical; {len(changed)} changed, "
          f"{len(missing)} missing, {len(added)} new; {len(codes)} exit codes differ")  # fmt: skip
    return 0 if not (changed or missing or added or codes) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--anchors", type=Path, default=ANCHORS)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tpuc-snapshot"))
    parser.add_argument("-o", "--output", type=Path, help="the manifest (json)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.output is None:
        parser.error("-o/--output is required unless --compare is given")
    result: dict = {"files": {}, "codes": {}}
    for name in args.models.split(","):
        start = time.perf_counter()
        codes = build(name, args.anchors, args.work / name, args.targets.split(","))
        files = manifest(args.work / name)
        result["files"].update({f"{name}/{k}": v for k, v in files.items()})
        result["codes"].update({f"{name}:{k}": v for k, v in codes.items()})
        failed = ", ".join(k for k, v in codes.items() if v)
        seconds = time.perf_counter() - start
        note = f"  non-zero exit: {failed}" if failed else ""
        print(f"{name:12} {len(files):3} files {seconds:6.1f}s{note}", flush=True)
    args.output.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
