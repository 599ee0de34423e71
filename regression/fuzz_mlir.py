#!/usr/bin/env python3
"""Seeded mutations of .mlir files through tpuc-opt, model_runner and
model_deploy (issue 16, item 2): no input may hang a tool or end in a
traceback; each one ends with exit 0 or with one `error:` line.

The files: the tiny CNN's TOP module (tests/support/tiny_cnn.py, with its
weights) and its lowered TPU module. A case is 1-3 text edits: a character
deleted, duplicated or replaced by one MLIR gives meaning to (quotes,
braces, `%`, `x`, digits...), a number changed, a line deleted or
duplicated, the text cut short, or an undecodable byte. Every tool runs in
a worker process (`main(argv)` in-process, so a case costs no interpreter
start-up) with a memory limit, and the worker is killed after the time
limit (counted as a hang). Prints, per tool: exit 0, clean errors,
tracebacks, hangs/over-limit; exit 1 on any traceback or hang.

    python regression/fuzz_mlir.py [--cases 3000] [--seed 0] [--tools opt,runner,deploy]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_bmodel import LIMIT_BYTES, Worker, limit_memory  # noqa: E402

TOOLS = ("opt", "runner", "deploy")
LIMIT_SECONDS = {"opt": 5.0, "runner": 5.0, "deploy": 20.0}
SIGNIFICANT = '"%{}()<>[]:=,.x0123456789-@#^!' + "\n "
OUTCOMES = ("ok", "error", "traceback", "hang")


def build_inputs(work: Path) -> dict[str, Path]:
    """The tiny CNN transformed, calibrated and deployed INT8 in `work`:
    {"top": cnn.mlir, "tpu": the INT8 TPU module}."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    top = work / "cnn.mlir"
    if not top.is_file():
        from tiny_cnn import cnn_model, transform_and_calibrate

        from tpuc.tools import model_deploy

        cnn_model(work / "cnn.onnx")
        transform_and_calibrate(work, "cnn", (1, 3, 8, 8), seed=1, samples=4)
        argv = ["--mlir", str(top), "--chip", "bm1684x", "--quantize", "INT8"]
        argv += ["--calibration_table", str(work / "cnn_cali_table")]
        argv += ["--model", str(work / "cnn_int8.bmodel")]
        if model_deploy.run(argv) != 0:
            raise SystemExit("model_deploy INT8 failed")
    return {"top": top, "tpu": next(work.glob("cnn_bm1684x_int8*_tpu.mlir"))}


def mutate(text: bytes, rng: random.Random) -> bytes:
    """1-3 edits of the text."""
    out = bytearray(text)
    for _ in range(rng.randint(1, 3)):
        if not out:
            break
        kind = rng.randrange(8)
        at = rng.randrange(len(out))
        if kind == 0:
            del out[at]
        elif kind == 1:
            out.insert(at, out[at])
        elif kind == 2:
            out[at] = ord(rng.choice(SIGNIFICANT))
        elif kind == 3:
            out = bytearray(_change_number(bytes(out), rng))
        elif kind == 4 or kind == 5:
            lines = bytes(out).split(b"\n")
            i = rng.randrange(len(lines))
            if kind == 4:
                del lines[i]
            else:
                lines.insert(i, lines[i])
            out = bytearray(b"\n".join(lines))
        elif kind == 6:
            out = out[: rng.randrange(len(out))]
        else:
            out[at] = rng.choice((0x00, 0x80, 0xFF, 0xC3))
    return bytes(out)


def _change_number(text: bytes, rng: random.Random) -> bytes:
    numbers = list(re.finditer(rb"\d+", text))
    if not numbers:
        return text
    m = rng.choice(numbers)
    value = rng.choice((b"0", b"1", b"2", b"3", b"7", b"64", b"65535", b"4294967297", b"99999999"))
    return text[: m.start()] + value + text[m.end() :]


def tool_argv(tool: str, path: Path, work: Path, rng: random.Random) -> tuple[object, list[str]]:
    """The tool's main and its arguments on the mutated file `path`."""
    if tool == "opt":
        from tpuc.tools import opt

        return opt.main, [str(path), "-o", str(work / "fuzz_out.mlir")]
    if tool == "runner":
        from tpuc.tools import model_runner

        argv = ["--input", str(work / "in.npz"), "--model", str(path)]
        return model_runner.main, [*argv, "--output", str(work / "fuzz_out.npz")]
    from tpuc.tools import model_deploy

    mode = rng.choice(("INT8", "F16"))
    argv = ["--mlir", str(path), "--chip", "bm1684x", "--quantize", mode]
    argv += ["--model", str(work / "fuzz_out.bmodel")]
    if mode == "INT8":
        argv += ["--calibration_table", str(work / "cnn_cali_table")]
    return model_deploy.main, argv


def run_tool(main, argv: list[str]) -> tuple[str, str]:
    """("ok" | "error" | "traceback", detail): a tool's main in-process."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except MemoryError:
        return "hang", "MemoryError"
    except BaseException as exc:  # noqa: BLE001 - what the fuzzing looks for
        lines = traceback.format_exception(exc)
        return "traceback", "".join(lines[-3:])[-600:]
    text = err.getvalue()
    if "Traceback" in text:
        return "traceback", text[-600:]
    if code == 0:
        return "ok", ""
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    if len(errors) != 1:
        return "traceback", f"exit {code} without one error line: {text[-600:]!r}"
    return "error", errors[0]


def case(config: dict, index: int) -> dict:
    rng = random.Random(f"{config['seed']}:{config['tool']}:{index}")
    work = Path(config["work"])
    source = Path(config["inputs"][rng.choice(sorted(config["inputs"]))])
    if config["tool"] == "deploy":  # lowering starts from TOP
        source = Path(config["inputs"]["top"])
    path = source.with_name("fuzz.mlir")  # beside the original: its weight file resolves
    path.write_bytes(mutate(source.read_bytes(), rng))
    main, argv = tool_argv(config["tool"], path, work, rng)
    outcome, detail = run_tool(main, argv)
    return {"case": index, "outcome": outcome, "detail": detail[:600]}


def worker(spec: str) -> None:
    config = json.loads(spec)
    limit_memory(config["limit_bytes"])
    for line in sys.stdin:
        print(json.dumps(case(config, int(line))), flush=True)


def campaign(work: Path, inputs: dict[str, Path], tool: str, cases: int, seed: int) -> Counter:
    config = dict(work=str(work), inputs={k: str(v) for k, v in inputs.items()}, tool=tool)
    config.update(seed=seed, limit_bytes=LIMIT_BYTES)
    pool = Worker(config, script=__file__)
    counts: Counter = Counter()
    start = time.time()
    try:
        for index in range(cases):
            result = pool.run(index, LIMIT_SECONDS[tool])
            counts[result["outcome"]] += 1
            if result["outcome"] in ("traceback", "hang"):
                print(f"  {tool} case {index}: {result['outcome']}: {result['detail']}")
    finally:
        pool.stop()
    seconds = time.time() - start
    line = ", ".join(f"{counts.get(k, 0)} {k}" for k in OUTCOMES)
    print(f"{tool}: {cases} cases in {seconds:.0f} s: {line}", flush=True)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=3000, help="mutations per tool")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--work", default=None)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return 0
    work = Path(args.work or tempfile.mkdtemp(prefix="tpuc_fuzz_mlir_"))
    work.mkdir(parents=True, exist_ok=True)
    inputs = build_inputs(work)
    bad = 0
    for tool in args.tools.split(","):
        counts = campaign(work, inputs, tool, args.cases, args.seed)
        bad += counts["traceback"] + counts["hang"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
