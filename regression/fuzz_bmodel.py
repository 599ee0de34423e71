#!/usr/bin/env python3
"""Seeded byte mutations of an INT8 and an F16 bmodel through the reader and
the simulator (issue 16, item 1): every damaged file must fail with one
line (TpucError) or run to outputs identical to the original's.

Two kinds of case:
- `raw`: 1-4 random byte edits anywhere in the file (bit flips, random or
  extreme bytes, 32-bit words set to interesting values, a byte inserted or
  deleted). The header digest catches almost all of them.
- `resigned`: the decoded model's command streams, tensor fields or counts
  are edited and the file is written again with fresh digests, so the
  semantic checks (`tpuc.target.bmodel.validate`, `tpuc.target.runtime.validate`) are what
  must catch them; a changed output is allowed here (the edit may be a
  legitimate different model, e.g. another scale), a crash is not.

Each case runs in a worker process with a memory limit (RLIMIT_DATA) and a
time limit; a worker that overruns is killed and counted as a hang.
Prints, per model and kind: clean errors, identical runs, changed-output
runs, uncaught exceptions, hangs/over-memory; exit 1 if any case of the
raw kind changed outputs, or any case crashed or hung.

    python regression/fuzz_bmodel.py [--cases 20000] [--resigned 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import select
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUTCOMES = ("error", "identical", "changed", "exception", "hang")
INTERESTING = (0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)
LIMIT_SECONDS = 5.0
LIMIT_BYTES = 1 << 30


# --- the models -------------------------------------------------------------------------------


def build_models(work: Path) -> dict[str, Path]:
    """The tiny CNN (tests/support/tiny_cnn.py) deployed INT8 and F16 in
    `work` -> {"INT8": bmodel, "F16": bmodel}; `work/in.npz` is the input."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from tiny_cnn import cnn_model, transform_and_calibrate

    from tpuc.tools import model_deploy

    paths = {m: work / f"cnn_{m.lower()}.bmodel" for m in ("INT8", "F16")}
    if all(p.is_file() for p in paths.values()):
        return paths
    cnn_model(work / "cnn.onnx")
    transform_and_calibrate(work, "cnn", (1, 3, 8, 8), seed=1, samples=4)
    for mode, path in paths.items():
        argv = ["--mlir", str(work / "cnn.mlir"), "--chip", "bm1684x", "--quantize", mode]
        argv += ["--model", str(path), "--test_input", str(work / "cnn_in_f32.npz")]
        if mode == "INT8":
            argv += ["--calibration_table", str(work / "cnn_cali_table")]
        if model_deploy.run(argv) != 0:
            raise SystemExit(f"model_deploy {mode} failed")
    return paths


# --- mutations --------------------------------------------------------------------------------


def mutate_raw(data: bytes, rng: random.Random) -> bytes:
    """1-4 random edits of the file's bytes."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(6)
        at = rng.randrange(len(out))
        if kind == 0:
            out[at] ^= 1 << rng.randrange(8)
        elif kind == 1:
            out[at] = rng.randrange(256)
        elif kind == 2:
            out[at] = rng.choice((0x00, 0xFF, 0x7F, 0x80))
        elif kind == 3 and at + 4 <= len(out):
            out[at : at + 4] = rng.choice(INTERESTING).to_bytes(4, "little")
        elif kind == 4:
            out.insert(at, rng.randrange(256))
        else:
            del out[at]
    return bytes(out)


def _edit_bytes(data: bytes, rng: random.Random) -> bytes:
    return mutate_raw(data, rng) if data else data


def mutate_resigned(data: bytes, rng: random.Random) -> bytes:
    """One edit of the decoded model, written again with valid digests."""
    from tpuc.target.bmodel import read_bmodel, write_bmodel

    model = read_bmodel(data, "original")
    param = model.nets[0].parameters[0]
    subnet = rng.choice(param.subnets)
    target = rng.randrange(7)
    if target <= 2 and subnet.cmd_groups:  # the commands themselves
        group = rng.choice(subnet.cmd_groups)
        field = "bdc" if group.bdc and (not group.gdma or rng.random() < 0.7) else "gdma"
        edited = _edit_bytes(getattr(group, field), rng)
        setattr(group, field, edited)
        if rng.random() < 0.8:  # keep the byte count coherent most of the time
            setattr(group, f"{field}_cmd_byte", len(edited))
    elif target == 3 and subnet.cmd_groups:
        group = rng.choice(subnet.cmd_groups)
        name = rng.choice(("bdc_num", "gdma_num", "bdc_cmd_byte", "gdma_cmd_byte"))
        setattr(group, name, rng.choice((0, 1, getattr(group, name) + rng.choice((-1, 1)))))
    elif target == 4:
        tensors = param.inputs + param.outputs + subnet.inputs + subnet.outputs
        t = rng.choice(tensors)
        name = rng.choice(("shape", "device_addr", "size", "scale", "zero_point"))
        if name == "shape" and t.shape:
            dims = list(t.shape)
            dims[rng.randrange(len(dims))] = rng.choice((0, 1, 2, dims[0] + 1, 1 << 20))
            t.shape = tuple(dims)
        elif name != "shape":
            value = getattr(t, name)
            new = rng.choice((0, value + 1, value - 1, value * 2, -1 if name != "size" else 1))
            setattr(t, name, type(value)(new) if name != "device_addr" else max(0, int(new)))
    elif target == 5:
        which = rng.choice(("inputs", "outputs", "subnets", "next_ids"))
        owner = subnet if which == "next_ids" else param
        setattr(owner, which, [])
    else:
        param.ctx_size = rng.choice((0, param.ctx_size // 2, param.ctx_size * 2))
    return write_bmodel(model)


def case_bytes(original: bytes, kind: str, seed: int, index: int) -> bytes:
    rng = random.Random(f"{seed}:{kind}:{index}")
    if kind == "raw":
        return mutate_raw(original, rng)
    try:
        return mutate_resigned(original, rng)
    except Exception:  # noqa: BLE001 - the writer refused the edit: use it raw
        return mutate_raw(original, rng)


# --- one case ---------------------------------------------------------------------------------


def run_bytes(data: bytes, inputs: dict) -> tuple[str, dict | str]:
    """("error", message) or ("ok", outputs) or ("exception", traceback line)."""
    from tpuc.base.errors import TpucError
    from tpuc.target.bmodel import read_bmodel
    from tpuc.target.runtime.program import Program

    try:
        program = Program(read_bmodel(data, "fuzz.bmodel"), "fuzz.bmodel", threads=1)
        return "ok", program.run(inputs)
    except TpucError as exc:
        text = str(exc)
        if "\n" in text or not text.startswith("fuzz.bmodel"):
            return "exception", f"TpucError without one line naming the file: {text!r}"
        return "error", text
    except MemoryError:
        return "hang", "MemoryError"
    except Exception as exc:  # noqa: BLE001 - what the fuzzing looks for
        return "exception", f"{type(exc).__name__}: {exc}"


def classify(data: bytes, inputs: dict, reference: dict) -> tuple[str, str]:
    status, value = run_bytes(data, inputs)
    if status != "ok":
        return status, value if isinstance(value, str) else ""
    same = set(value) == set(reference) and all(
        np.asarray(value[k]).tobytes() == np.asarray(reference[k]).tobytes() for k in reference
    )
    return ("identical", "") if same else ("changed", "outputs differ")


# --- worker process with limits ---------------------------------------------------------------


def worker(spec: str) -> None:
    """Read case indices on stdin, answer one JSON line each."""
    config = json.loads(spec)
    limit_memory(config["limit_bytes"])
    original = Path(config["bmodel"]).read_bytes()
    inputs = dict(np.load(config["inputs"]))
    status, reference = run_bytes(original, inputs)
    assert status == "ok", reference
    for line in sys.stdin:
        index = int(line)
        data = case_bytes(original, config["kind"], config["seed"], index)
        outcome, detail = classify(data, inputs, reference)
        print(json.dumps({"case": index, "outcome": outcome, "detail": detail[:300]}), flush=True)


def limit_memory(limit_bytes: int) -> None:
    """At most `limit_bytes` more data memory for this process (numpy's
    arrays included): a larger allocation raises MemoryError."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (usage + limit_bytes, hard))


class Worker:
    """A worker process (`script --worker CONFIG`) answering one JSON line
    per case index it reads."""

    def __init__(self, config: dict, script: str = __file__):
        self.config, self.script = config, script
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = dict(os.environ, TPUC_THREADS="1", OMP_NUM_THREADS="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        cmd = [sys.executable, self.script, "--worker", json.dumps(self.config)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, bufsize=1
        )

    def run(self, index: int, timeout: float) -> dict:
        """The case's outcome; a worker that does not answer in time (or
        dies) is replaced and the case counted as a hang."""
        if self.proc is None:
            self.start()
            timeout += 60  # the first answer includes start-up and the reference run
        self.proc.stdin.write(f"{index}\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.stop()
            return {"case": index, "outcome": "hang", "detail": f"no answer in {timeout:.0f} s"}
        return json.loads(line)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def campaign(bmodel: Path, inputs: Path, kind: str, cases: int, seed: int) -> Counter:
    config = dict(bmodel=str(bmodel), inputs=str(inputs), kind=kind, seed=seed)
    config["limit_bytes"] = LIMIT_BYTES
    pool = Worker(config)
    counts: Counter = Counter()
    start = time.time()
    try:
        for index in range(cases):
            result = pool.run(index, LIMIT_SECONDS)
            counts[result["outcome"]] += 1
            bad = result["outcome"] in ("exception", "hang") or (
                kind == "raw" and result["outcome"] == "changed"
            )
            if bad:
                print(
                    f"  {bmodel.name} {kind} case {index}: {result['outcome']}: {result['detail']}"
                )
    finally:
        pool.stop()
    rate = cases / max(1e-9, time.time() - start)
    print(f"{bmodel.name} {kind}: {cases} cases ({rate:.0f}/s): " + counts_line(counts))
    return counts


def counts_line(counts: Counter) -> str:
    names = {
        "error": "clean errors",
        "identical": "identical runs",
        "changed": "changed-output runs",
        "exception": "uncaught exceptions",
        "hang": "hangs/over-limit",
    }
    return ", ".join(f"{counts.get(k, 0)} {names[k]}" for k in OUTCOMES)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20000, help="raw mutations per bmodel")
    parser.add_argument("--resigned", type=int, default=2000, help="re-signed edits per bmodel")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", default=None, help="folder for the models (default: a temp one)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return 0
    work = Path(args.work or tempfile.mkdtemp(prefix="tpuc_fuzz_bmodel_"))
    work.mkdir(parents=True, exist_ok=True)
    models = build_models(work)
    failed = False
    for path in models.values():
        for kind, cases in (("raw", args.cases), ("resigned", args.resigned)):
            counts = campaign(path, work / "in.npz", kind, cases, args.seed)
            failed |= bool(counts["exception"] or counts["hang"])
            failed |= kind == "raw" and bool(counts["changed"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
