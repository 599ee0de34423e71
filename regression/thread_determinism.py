#!/usr/bin/env python3
"""Every file of two pipelines is byte-identical on 1, 2 and 4 threads
(issue 16, item 6).

For each thread count N, in a fresh process with OMP_NUM_THREADS=N,
OPENBLAS_NUM_THREADS=N and TPUC_THREADS=N (SOURCE_DATE_EPOCH fixed, this
checkout first on PYTHONPATH),
in the same working folder (paths inside files stay equal):
- the demo (`tpuc-demo`: transform, calibration, INT8 deploy, model_runner);
- a residual CNN (tests/support/resblock.py): model_transform,
  run_calibration, model_deploy INT8/F16/BF16/F32 with test input and
  reference, run_qtable, model_runner on the TOP, TPU and bmodel files.
The folder is then moved aside, and the runs' files are compared byte for
byte (logs excluded: they hold wall times). Prints one line per differing
file and a summary; exit 1 if anything differs.

    python regression/thread_determinism.py [--work DIR] [--threads 1,2,4]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_SUFFIXES = (".log",)
MODES = ("INT8", "F16", "BF16", "F32")


def pipeline_commands(work: Path) -> list[list[str]]:
    """The tools' command lines, run in `work` one after the other."""
    rb = work / "rb"
    py = sys.executable
    make = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from pathlib import Path; import numpy as np;"
        "from resblock import SHAPE, resblock_model;"
        "w = Path(sys.argv[2]); resblock_model(w / 'rb.onnx');"
        "rng = np.random.default_rng(3);"
        "np.savez(w / 'in.npz', x=rng.standard_normal(SHAPE).astype(np.float32));"
        "(w / 'samples').mkdir();"
        "[np.save(w / 'samples' / f's{i}.npy', rng.standard_normal(SHAPE).astype(np.float32))"
        " for i in range(4)]"
    )
    cmds = [
        ["tpuc-demo", "--workdir", str(work / "demo")],
        [py, "-c", make, str(ROOT / "tests" / "support"), str(rb)],
        ["model_transform.py", "--model_name", "rb", "--model_def", str(rb / "rb.onnx"),
         "--test_input", str(rb / "in.npz"), "--test_result", str(rb / "rb_top_outputs.npz"),
         "--mlir", str(rb / "rb.mlir")],
        ["run_calibration.py", str(rb / "rb.mlir"), "--dataset", str(rb / "samples"),
         "-o", str(rb / "rb_cali_table")],
        ["run_qtable.py", str(rb / "rb.mlir"), "--dataset", str(rb / "samples"),
         "--calibration_table", str(rb / "rb_cali_table"), "--chip", "bm1684x",
         "--expected_cos", "0.9999", "--loss_table", str(rb / "full_loss_table.txt"),
         "-o", str(rb / "rb_qtable")],
        ["model_runner.py", "--input", str(rb / "in.npz"), "--model", str(rb / "rb.mlir"),
         "--output", str(rb / "rb_top_run.npz"), "--dump_all_tensors"],
    ]  # fmt: skip
    for mode in MODES:
        bmodel = rb / f"rb_{mode.lower()}.bmodel"
        deploy = ["model_deploy.py", "--mlir", str(rb / "rb.mlir"), "--chip", "bm1684x",
                  "--quantize", mode, "--test_input", str(rb / "rb_in_f32.npz"),
                  "--test_reference", str(rb / "rb_top_outputs.npz"), "--tolerance", "0.8,0.5",
                  "--model", str(bmodel)]  # fmt: skip
        if mode == "INT8":
            deploy += ["--calibration_table", str(rb / "rb_cali_table")]
        cmds.append(deploy)
        out = rb / f"rb_{mode.lower()}_run.npz"
        cmds.append(["model_runner.py", "--input", str(rb / "in.npz"), "--model", str(bmodel),
                     "--output", str(out)])  # fmt: skip
    return cmds


def run_pipeline(work: Path, threads: int) -> None:
    """All commands in a fresh `work`, with every thread setting = threads."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "rb").mkdir(parents=True)
    env = dict(os.environ, SOURCE_DATE_EPOCH="0", TPUC_THREADS=str(threads))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    for cmd in pipeline_commands(work):
        done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"threads={threads}: {cmd[0]} failed:\n{done.stdout}{done.stderr}")
    for tpu in sorted((work / "rb").glob("rb_*_tpu.mlir")):
        out = tpu.with_name(tpu.stem + "_run.npz")
        cmd = ["model_runner.py", "--input", str(work / "rb" / "in.npz"), "--model", str(tpu),
               "--output", str(out), "--dump_all_tensors"]  # fmt: skip
        subprocess.run(cmd, cwd=work, env=env, check=True, capture_output=True)


def digests(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file but the logs."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(SKIP_SUFFIXES)
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/tpuc_thread_determinism")
    parser.add_argument("--threads", default="1,2,4")
    args = parser.parse_args()
    base = Path(args.work)
    counts = [int(t) for t in args.threads.split(",")]
    runs: dict[int, dict[str, str]] = {}
    for threads in counts:
        work = base / "work"
        run_pipeline(work, threads)
        kept = base / f"threads{threads}"
        shutil.rmtree(kept, ignore_errors=True)
        work.rename(kept)
        runs[threads] = digests(kept)
        print(f"threads={threads}: {len(runs[threads])} files")
    first = runs[counts[0]]
    differ = 0
    for threads in counts[1:]:
        for name in sorted(set(first) | set(runs[threads])):
            if first.get(name) != runs[threads].get(name):
                differ += 1
                print(f"DIFFERS threads={counts[0]} vs {threads}: {name}")
    print(f"{len(first)} files compared across threads {args.threads}: {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
