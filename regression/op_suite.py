"""The per-op suite (TPU-MLIR's test_onnx.py): every ONNX op the frontend
supports, as a one-node model with seeded random data, goes through
model_transform.py, run_calibration.py and model_deploy.py in each mode,
and model_deploy's own check compares the TPU interpreter with TOP.

`python regression/op_suite.py [--ops Conv,Add] [--modes F16,INT8]` prints a
table; tests/regression/test_op_suite.py runs the whole suite in CI (small shapes).
`--codegen native` deploys each case to the chip's own command streams instead
(every op a global layer) and model_deploy's check runs them in the vendor
runtime against the TPU interpreter (INT8 bit for bit).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tpuc.base.errors import TpucError

SEED = 0
SAMPLES = 4  # calibration samples per op

MODES: dict[str, list[str]] = {
    "F32": ["--quantize", "F32"],
    "F16": ["--quantize", "F16"],
    "BF16": ["--quantize", "BF16"],
    "INT8": ["--quantize", "INT8"],
    "INT8_ASYM": ["--quantize", "INT8", "--asymmetric"],
}
TOLERANCE = {
    "F32": "0.99999,0.999",
    "F16": "0.999,0.97",
    "BF16": "0.99,0.9",
    "INT8": "0.99,0.85",
    "INT8_ASYM": "0.99,0.85",
}
"""Per mode `--tolerance cos,euclid` of TPU vs TOP; cases may loosen INT8."""


@dataclass
class Case:
    """One ONNX node. `inputs`: name -> shape (a graph input, random data) or
    array (an initializer). `low`/`high` bound the random inputs."""

    op: str
    inputs: dict
    attrs: dict = field(default_factory=dict)
    outputs: int = 1
    opset: int = 13
    low: float = -2.0
    high: float = 2.0
    int8_tolerance: str | None = None  # ops whose INT8 result is coarse by nature
    out_types: tuple[int, ...] = ()  # ONNX element types of the outputs (default float)
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or self.op


def _w(*shape: int, seed: int = 1, scale: float = 0.5) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


X = [1, 4, 6, 6]  # the default activation: NCHW, small
COARSE = "0.95,0.6"
INT64, BOOL = (
    TensorProto.INT64,
    TensorProto.BOOL,
)  # ops that INT8 quantizes into few distinct outputs

CASES: list[Case] = [
    Case("Conv", {"x": X, "w": _w(8, 4, 3, 3), "b": _w(8)}, {"pads": [1, 1, 1, 1]}),
    Case("Conv", {"x": X, "w": _w(4, 1, 3, 3)}, {"group": 4, "strides": [2, 2]}, label="DWConv"),
    Case("Conv", {"x": [1, 4, 9], "w": _w(6, 4, 3)}, {"dilations": [2]}, label="Conv1d"),
    Case("ConvTranspose", {"x": X, "w": _w(4, 3, 3, 3)}, {"strides": [2, 2]}),
    Case("MatMul", {"a": [2, 3, 8], "b": _w(8, 5)}),
    Case("MatMul", {"a": [2, 3, 8], "b": [2, 8, 5]}, label="MatMul2"),
    Case("Gemm", {"a": [3, 8], "b": _w(5, 8), "c": _w(5)}, {"transB": 1}),
    Case("AveragePool", {"x": X}, {"kernel_shape": [2, 2], "strides": [2, 2]}),
    Case("AveragePool", {"x": X}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, label="AvgPad"),
    Case("MaxPool", {"x": X}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    Case("GlobalAveragePool", {"x": X}),
    Case("GlobalMaxPool", {"x": X}),
    Case("BatchNormalization",
         {"x": X, "s": _w(4) + 1, "b": _w(4), "m": _w(4), "v": np.abs(_w(4)) + 0.5}),
    Case("InstanceNormalization", {"x": X, "s": _w(4) + 1, "b": _w(4)}),
    Case("GroupNormalization", {"x": X, "s": _w(4) + 1, "b": _w(4)}, {"num_groups": 2},
         opset=21),
    Case("LayerNormalization", {"x": [2, 3, 8], "s": _w(8) + 1, "b": _w(8)}, {"axis": -1},
         opset=17),
    Case("LRN", {"x": X}, {"size": 3}),
    Case("Add", {"x": X, "y": X}),
    Case("Add", {"x": X, "y": _w(4, 1, 1)}, label="AddConst"),
    Case("Sub", {"x": X, "y": X}),
    Case("Mul", {"x": X, "y": X}),
    Case("Mul", {"x": X, "y": np.array(0.7, np.float32)}, label="MulConst"),
    Case("Div", {"x": X, "y": X}, low=0.5, high=2.0),
    Case("Sum", {"x": X, "y": X, "z": X}),
    Case("Mean", {"x": X, "y": X}),
    Case("Max", {"x": X, "y": X}),
    Case("Min", {"x": X, "y": X}),
    Case("Pow", {"x": X, "y": np.array(2.0, np.float32)}),
    Case("Neg", {"x": X}),
    Case("Relu", {"x": X}),
    Case("LeakyRelu", {"x": X}, {"alpha": 0.2}),
    Case("PRelu", {"x": X, "s": _w(4, 1, 1)}),
    Case("Sigmoid", {"x": X}),
    Case("HardSigmoid", {"x": X}),
    Case("HardSwish", {"x": X}, opset=14),
    Case("Tanh", {"x": X}),
    Case("Exp", {"x": X}),
    Case("Log", {"x": X}, low=0.1, high=4.0),
    Case("Sqrt", {"x": X}, low=0.0, high=4.0),
    Case("Reciprocal", {"x": X}, low=0.5, high=4.0),
    Case("Abs", {"x": X}),
    Case("Erf", {"x": X}),
    Case("Elu", {"x": X}),
    Case("Softplus", {"x": X}),
    Case("Mish", {"x": X}, opset=18),
    Case("Gelu", {"x": X}, opset=20),
    Case("Sin", {"x": X}),
    Case("Cos", {"x": X}),
    Case("Floor", {"x": X}, int8_tolerance=COARSE),
    Case("Ceil", {"x": X}, int8_tolerance=COARSE),
    Case("Round", {"x": X}, int8_tolerance=COARSE),
    Case("Sign", {"x": X}, int8_tolerance=COARSE),
    Case("Clip", {"x": X, "lo": np.array(-0.5, np.float32), "hi": np.array(1.0, np.float32)}),
    Case("Softmax", {"x": [2, 3, 8]}, {"axis": -1}),
    Case("LogSoftmax", {"x": [2, 3, 8]}, {"axis": -1}),
    Case("Concat", {"x": X, "y": X}, {"axis": 1}),
    Case("Split", {"x": X}, {"axis": 1}, outputs=2),
    Case("Slice", {"x": X, "s": _i64(1, 1), "e": _i64(5, 3), "a": _i64(2, 1)}),
    Case("Reshape", {"x": X, "s": _i64(1, -1)}),
    Case("Flatten", {"x": X}),
    Case("Transpose", {"x": X}, {"perm": [0, 2, 3, 1]}),
    Case("Squeeze", {"x": [1, 4, 1, 6], "a": _i64(2)}),
    Case("Unsqueeze", {"x": [4, 6], "a": _i64(0)}),
    Case("DepthToSpace", {"x": X}, {"blocksize": 2}),
    Case("SpaceToDepth", {"x": X}, {"blocksize": 2}),
    Case("Pad", {"x": X, "p": _i64(0, 0, 1, 2, 0, 0, 2, 1), "v": np.array(0.5, np.float32)}),
    Case("Tile", {"x": X, "r": _i64(1, 2, 1, 1)}),
    Case("Expand", {"x": [4, 1], "s": _i64(2, 4, 3)}),
    Case("Gather", {"x": [5, 6], "i": _i64(4, 0, 2)}, {"axis": 0}),
    Case("Resize", {"x": X, "r": np.zeros(0, np.float32), "s": np.array([1, 1, 2, 2], np.float32)},
         {"mode": "nearest"}, label="ResizeNearest"),
    Case("Resize", {"x": X, "r": np.zeros(0, np.float32), "s": np.array([1, 1, 2, 2], np.float32)},
         {"mode": "linear"}, label="ResizeLinear"),
    Case("ReduceMean", {"x": X, "a": _i64(2, 3)}, {"keepdims": 1}, opset=18),
    Case("ReduceSum", {"x": X, "a": _i64(1)}, {"keepdims": 0}),
    Case("ReduceMax", {"x": X, "a": _i64(1)}, {"keepdims": 1}, opset=18),
    Case("ReduceMin", {"x": X, "a": _i64(3)}, {"keepdims": 1}, opset=18),
    Case("ReduceL2", {"x": X}, {"axes": [2, 3]}),
    Case("ReduceProd", {"x": X}, {"axes": [3]}, low=0.5, high=1.5),
    Case("ArgMax", {"x": [3, 8]}, {"axis": 1}, int8_tolerance=COARSE, out_types=(INT64,)),
    Case("TopK", {"x": [3, 8], "k": _i64(2)}, {"axis": 1}, outputs=2, int8_tolerance=COARSE,
         out_types=(TensorProto.FLOAT, INT64)),
    Case("Where", {"c": np.array([[True, False, True]]), "x": [2, 3], "y": [2, 3]}),
    Case("Greater", {"x": [2, 8], "y": [2, 8]}, int8_tolerance=COARSE, out_types=(BOOL,)),
    Case("Equal", {"x": np.array([1.0, 2.0, 3.0], np.float32), "y": [3]}, int8_tolerance=COARSE,
         out_types=(BOOL,)),
    Case("LSTM", {"x": [3, 1, 4], "w": _w(1, 20, 4), "r": _w(1, 20, 5)}, {"hidden_size": 5},
         outputs=3),
    Case("GRU", {"x": [3, 1, 4], "w": _w(1, 15, 4), "r": _w(1, 15, 5)}, {"hidden_size": 5},
         outputs=2),
]  # fmt: skip


def build_model(case: Case, path: Path) -> dict[str, list[int]]:
    """Write the case's ONNX model; return its graph inputs' shapes."""
    runtime = {k: v for k, v in case.inputs.items() if isinstance(v, list)}
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in case.inputs.items()
             if not isinstance(v, list)]  # fmt: skip
    outputs = [f"out{i}" for i in range(case.outputs)]
    types = case.out_types or (TensorProto.FLOAT,) * case.outputs
    node = helper.make_node(case.op, list(case.inputs), outputs, name=case.name, **case.attrs)
    graph = helper.make_graph(
        [node],
        case.name,
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in runtime.items()],
        [helper.make_tensor_value_info(o, t, None) for o, t in zip(outputs, types, strict=True)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model)
    onnx.save(model, str(path))
    return runtime


def write_samples(case: Case, shapes: dict[str, list[int]], folder: Path, count: int) -> None:
    """Seeded uniform samples in [low, high], one npz per sample."""
    rng = np.random.default_rng(SEED)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        arrays = {
            k: rng.uniform(case.low, case.high, s).astype(np.float32) for k, s in shapes.items()
        }
        np.savez(folder / f"sample_{i}.npz", **arrays)


@dataclass
class Outcome:
    case: str
    mode: str
    ok: bool
    seconds: float
    message: str = ""


def _tool(run, argv: list[str]) -> tuple[int, str]:
    """Run a tool's `run(argv)` in-process; exit code and what it printed."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            code = run(argv)
        except SystemExit as exc:  # argparse errors
            code = int(exc.code or 0)
        except TpucError as exc:  # what the tool's main() would print
            print(f"error: {exc}")
            code = 1
    return code, buffer.getvalue()


def prepare(case: Case, work: Path) -> tuple[Path, Path, Path, Path] | Outcome:
    """Transform and calibrate once per case: (mlir, input npz, top outputs, table)."""
    from tpuc.tools import model_transform, run_calibration

    work.mkdir(parents=True, exist_ok=True)
    model = work / f"{case.name}.onnx"
    shapes = build_model(case, model)
    write_samples(case, shapes, work / "cali", SAMPLES + 1)
    test_input = work / "cali" / "sample_0.npz"
    mlir, top = work / f"{case.name}.mlir", work / f"{case.name}_top_outputs.npz"
    code, text = _tool(model_transform.run, [
        "--model_name", case.name, "--model_def", str(model), "--test_input", str(test_input),
        "--test_result", str(top), "--mlir", str(mlir),
    ])  # fmt: skip
    if code:
        return Outcome(case.name, "transform", False, 0.0, _last_error(text))
    table = work / f"{case.name}_cali_table"
    code, text = _tool(run_calibration.run, [
        str(mlir), "--dataset", str(work / "cali"), "--cali_method", "max", "--tune_num", "0",
        "-o", str(table),
    ])  # fmt: skip
    if code:
        return Outcome(case.name, "calibration", False, 0.0, _last_error(text))
    return mlir, test_input, top, table


def deploy(
    case: Case, files: tuple[Path, Path, Path, Path], mode: str, chip: str, codegen: str = "tpuc"
) -> Outcome:
    from tpuc.tools import model_deploy

    mlir, test_input, top, table = files
    tolerance = TOLERANCE[mode]
    if mode.startswith("INT8") and case.int8_tolerance:
        tolerance = case.int8_tolerance
    out = mlir.parent / mode.lower()
    out.mkdir(exist_ok=True)
    argv = [
        "--mlir", str(mlir), "--chip", chip, *MODES[mode], "--calibration_table", str(table),
        "--test_input", str(test_input), "--test_reference", str(top),
        "--tolerance", tolerance, "--model", str(out / f"{case.name}.bmodel"),
    ]  # fmt: skip
    if codegen != "tpuc":
        argv += ["--codegen", codegen, "--disable_layer_group"]
    start = time.perf_counter()
    code, text = _tool(model_deploy.run, argv)
    seconds = time.perf_counter() - start
    return Outcome(case.name, mode, code == 0, seconds, "" if code == 0 else _last_error(text))


def _last_error(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error")]
    return (errors or lines or ["(no output)"])[-1]


def run_case(
    case: Case, work: Path, modes: list[str], chip: str = "bm1684x", codegen: str = "tpuc"
) -> list[Outcome]:
    files = prepare(case, work / case.name)
    if isinstance(files, Outcome):
        return [files]
    return [deploy(case, files, mode, chip, codegen) for mode in modes]


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated case names (default: all)")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--chip", default="bm1684x")
    parser.add_argument("--codegen", default="tpuc", choices=("tpuc", "native"))
    args = parser.parse_args(argv)
    wanted = set(args.ops.split(",")) if args.ops else None
    cases = [c for c in CASES if wanted is None or c.name in wanted]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            modes = args.modes.split(",")
            for outcome in run_case(case, Path(tmp), modes, args.chip, args.codegen):
                failures += not outcome.ok
                verdict = "PASS" if outcome.ok else "FAIL"
                print(f"{outcome.case:18} {outcome.mode:10} {verdict} {outcome.seconds:6.2f}s "
                      f"{outcome.message}")  # fmt: skip
    print(f"{failures} failure(s) in {len(cases)} op(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
