"""tpuc-demo: the quick start on the example shipped with the package.

Runs `model_transform.py` on tinycnn.onnx with a photo of a cat as test
input, in a fresh working directory, and prints the comparison of every TOP
tensor against onnxruntime. Later pipeline stages join here as they land.
"""

from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from tpuc.errors import TpucError, run_cli


def example_file(name: str) -> Path:
    """Path of a file shipped in tpuc/data."""
    path = Path(str(resources.files("tpuc") / "data" / name))
    if not path.is_file():
        raise TpucError(f"the example file {name} is missing from the installed package")
    return path


def transform_argv(workdir: Path) -> list[str]:
    """model_transform.py flags for the example: RGB pixels scaled to [0, 1]."""
    return [
        "--model_name", "tinycnn",
        "--model_def", str(example_file("tinycnn.onnx")),
        "--input_shapes", "[[1,3,64,64]]",
        "--pixel_format", "rgb",
        "--mean", "0,0,0",
        "--scale", "0.00392156862745098,0.00392156862745098,0.00392156862745098",
        "--test_input", str(example_file("cat.png")),
        "--test_result", str(workdir / "tinycnn_top_outputs.npz"),
        "--mlir", str(workdir / "tinycnn.mlir"),
    ]  # fmt: skip


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tpuc-demo", description=__doc__)
    parser.add_argument("--workdir", type=Path, default=Path("tpuc_demo"),
                        help="where the outputs go (default: ./tpuc_demo)")  # fmt: skip
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    from tpuc.tools import model_transform

    print(f"tpuc-demo: model_transform.py on the example CNN, outputs in {args.workdir}/")
    code = model_transform.run(transform_argv(args.workdir))
    if not code:
        print(f"tpuc-demo: done; see {args.workdir}/tinycnn.mlir")
    return code or 0


def main(argv: list[str] | None = None) -> None:
    run_cli(lambda: _main(argv))


if __name__ == "__main__":
    main()
