"""tpuc-demo: the quick start on the example shipped with the package, end to end.

In a working directory, on tinycnn.onnx with a photo of a cat as test input:
1. model_transform.py -> tinycnn.mlir (TOP); model_runner.py runs the ONNX
   model in onnxruntime for the reference;
2. run_calibration.py on a few images made from the photo (flips, crops,
   brightness) -> tinycnn_cali_table;
3. model_deploy.py INT8 -> the TPU module and the bmodel;
4. model_runner.py runs the bmodel in tpuc's device simulator.
After each stage it prints the similarity of the network's outputs with the
previous stage's: TOP against onnxruntime, TPU INT8 against TOP, the bmodel
against the TPU interpreter (expected bit-identical) and, end to end,
against onnxruntime. The tools' own output goes to tpuc_demo.log there
(--verbose shows it).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator, Mapping
from importlib import resources
from pathlib import Path

import numpy as np

from tpuc.base.errors import TpucError, run_cli

NAME = "tinycnn"
LOG = "tpuc_demo.log"
STAGES = 4


def example_file(name: str) -> Path:
    """Path of a file shipped in tpuc/data."""
    path = Path(str(resources.files("tpuc") / "data" / name))
    if not path.is_file():
        raise TpucError(f"the example file {name} is missing from the installed package")
    return path


def transform_argv(workdir: Path) -> list[str]:
    """model_transform.py flags for the example: RGB pixels scaled to [0, 1]."""
    return [
        "--model_name", NAME,
        "--model_def", str(example_file(f"{NAME}.onnx")),
        "--input_shapes", "[[1,3,64,64]]",
        "--pixel_format", "rgb",
        "--mean", "0,0,0",
        "--scale", "0.00392156862745098,0.00392156862745098,0.00392156862745098",
        "--test_input", str(example_file("cat.png")),
        "--test_result", str(workdir / f"{NAME}_top_outputs.npz"),
        "--mlir", str(workdir / f"{NAME}.mlir"),
    ]  # fmt: skip


def calibration_images(folder: Path) -> list[Path]:
    """Variants of the example photo, enough for a calibration demo: the
    photo, its mirror image, four corner crops, a center crop, darker and
    brighter copies (each at the photo's size)."""
    from PIL import Image, ImageEnhance

    folder.mkdir(parents=True, exist_ok=True)
    photo = Image.open(example_file("cat.png")).convert("RGB")
    w, h = photo.size
    cw, ch = w * 3 // 4, h * 3 // 4
    corners = [(0, 0), (w - cw, 0), (0, h - ch), (w - cw, h - ch), ((w - cw) // 2, (h - ch) // 2)]
    variants = {
        "photo": photo,
        "mirror": photo.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
        **{
            f"crop{i}": photo.crop((x, y, x + cw, y + ch)).resize((w, h), Image.Resampling.BILINEAR)
            for i, (x, y) in enumerate(corners)
        },
        "dark": ImageEnhance.Brightness(photo).enhance(0.7),
        "bright": ImageEnhance.Brightness(photo).enhance(1.3),
    }
    paths = []
    for name, image in variants.items():
        paths.append(folder / f"{name}.png")
        image.save(paths[-1])
    return paths


def deploy_prefix(chip: str) -> str:
    from tpuc.workflow.deploy import deploy_prefix as prefix

    return prefix(NAME, chip, "INT8", False)


def deploy_argv(workdir: Path, chip: str) -> list[str]:
    return [
        "--mlir", str(workdir / f"{NAME}.mlir"),
        "--chip", chip,
        "--quantize", "INT8",
        "--calibration_table", str(workdir / f"{NAME}_cali_table"),
        "--test_input", str(workdir / f"{NAME}_in_f32.npz"),
        "--test_reference", str(workdir / f"{NAME}_top_outputs.npz"),
        "--model", str(workdir / f"{deploy_prefix(chip)}.bmodel"),
    ]  # fmt: skip


def runner_argv(workdir: Path, model: Path, output: Path) -> list[str]:
    return ["--input", str(workdir / f"{NAME}_in_f32.npz"), "--model", str(model),
            "--output", str(output)]  # fmt: skip


# --- similarity -------------------------------------------------------------------------------


def identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit, as float32 (the values every npz here holds)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def similarity_lines(
    what: str, values: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray],
    names: list[str], bitwise: bool = False,
) -> tuple[list[str], bool]:  # fmt: skip
    """One line per output: cosine (and with `bitwise`, whether identical);
    and whether every output was identical."""
    from tpuc.base.compare import cosine_similarity

    lines, same = [], True
    for name in names:
        if name not in values or name not in reference:
            raise TpucError(f"{what}: output '{name}' is missing from the results")
        a, b = np.asarray(values[name], np.float32), np.asarray(reference[name], np.float32)
        line = f"      {what:34} '{name}': cosine {cosine_similarity(a, b):.6f}"
        if bitwise:
            same &= identical(a, b)
            line += ", bit-identical" if identical(a, b) else ", NOT bit-identical"
        lines.append(line)
    return lines, same


def load(path: Path) -> dict[str, np.ndarray]:
    from tpuc.base.files import load_npz

    return dict(load_npz(path))


# --- running the tools --------------------------------------------------------------------------


class Tools:
    """Runs the tools in this process, their output to the log (or shown)."""

    def __init__(self, log: Path, verbose: bool):
        self.log, self.verbose = log, verbose
        log.write_text("")

    @contextlib.contextmanager
    def _output(self) -> Iterator[None]:
        if self.verbose:
            yield
            return
        with (
            self.log.open("a") as out,
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(out),
        ):
            yield

    def run(self, tool: str, run: Callable[[list[str]], int], argv: list[str]) -> None:
        if not self.verbose:
            with self.log.open("a") as out:
                out.write(f"$ {tool} {' '.join(argv)}\n")
        try:
            with self._output():
                code = run(argv)
        except TpucError as exc:
            raise TpucError(f"{tool}: {exc}{self._see()}") from None
        except SystemExit as exc:  # argparse rejected a flag
            code = exc.code if isinstance(exc.code, int) else 2
        if code:
            raise TpucError(f"{tool} failed (exit status {code}){self._see()}")

    def _see(self) -> str:
        return "" if self.verbose else f" (tool output in {self.log})"


def stage(number: int, text: str) -> None:
    print(f"[{number}/{STAGES}] {text}", flush=True)


def show(lines: list[str]) -> None:
    for line in lines:
        print(line)


def demo(workdir: Path, chip: str, verbose: bool) -> int:
    from tpuc.tools import model_deploy, model_runner, model_transform, run_calibration

    workdir.mkdir(parents=True, exist_ok=True)
    tools = Tools(workdir / LOG, verbose)
    where = "" if verbose else f"; tool output in {workdir / LOG}"
    print(f"tpuc-demo: {NAME}.onnx -> {chip} INT8 bmodel, files in {workdir}/{where}")

    stage(1, f"model_transform.py: {NAME}.onnx -> {NAME}.mlir (TOP); onnxruntime for reference")
    tools.run("model_transform.py", model_transform.run, transform_argv(workdir))
    ort_path = workdir / f"{NAME}_onnx_outputs.npz"
    onnx_file = example_file(f"{NAME}.onnx")
    tools.run("model_runner.py", model_runner.run, runner_argv(workdir, onnx_file, ort_path))
    ort = load(ort_path)
    names = list(ort)
    top = load(workdir / f"{NAME}_top_outputs.npz")
    show(similarity_lines("TOP interpreter vs onnxruntime", top, ort, names)[0])

    images = calibration_images(workdir / "cali")
    stage(2, f"run_calibration.py: {len(images)} images made from cat.png -> {NAME}_cali_table")
    table = str(workdir / f"{NAME}_cali_table")
    argv = [str(workdir / f"{NAME}.mlir"), "--dataset", str(images[0].parent), "-o", table]
    tools.run("run_calibration.py", run_calibration.run, argv)

    prefix = deploy_prefix(chip)
    bmodel = workdir / f"{prefix}.bmodel"
    stage(3, f"model_deploy.py: INT8 for {chip} -> {prefix}_tpu.mlir, {bmodel.name}")
    tools.run("model_deploy.py", model_deploy.run, deploy_argv(workdir, chip))
    tpu = load(workdir / f"{prefix}_tpu_outputs.npz")
    show(similarity_lines("TPU INT8 interpreter vs TOP", tpu, top, names)[0])

    out_path = workdir / f"{NAME}_bmodel_outputs.npz"
    stage(4, f"model_runner.py: {bmodel.name} ({bmodel.stat().st_size:,} bytes) in the device "
             f"simulator -> {out_path.name}")  # fmt: skip
    tools.run("model_runner.py", model_runner.run, runner_argv(workdir, bmodel, out_path))
    outputs = load(out_path)
    lines, same = similarity_lines("bmodel vs TPU interpreter", outputs, tpu, names, True)
    show(lines + similarity_lines("bmodel vs onnxruntime (end to end)", outputs, ort, names)[0])
    if not same:
        raise TpucError(f"the bmodel's outputs differ from the TPU interpreter's ({out_path})")
    print(f"tpuc-demo: done; the bmodel is {bmodel}")
    return 0


def _main(argv: list[str] | None = None) -> int:
    from tpuc.target.chips import CHIPS

    parser = argparse.ArgumentParser(prog="tpuc-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("tpuc_demo"),
                        help="where the outputs go (default: ./tpuc_demo)")  # fmt: skip
    parser.add_argument("--chip", default="bm1684x", type=str.lower, choices=list(CHIPS),
                        metavar="CHIP",
                        help=f"target chip: {', '.join(CHIPS)} (default bm1684x)")  # fmt: skip
    parser.add_argument("--verbose", action="store_true", help="show the tools' own output")
    args = parser.parse_args(argv)
    if args.workdir.exists() and not args.workdir.is_dir():
        raise TpucError(f"--workdir {args.workdir}: is a file, not a folder")
    return demo(args.workdir, args.chip, args.verbose)


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: _main(argv))


if __name__ == "__main__":
    main()
