"""Shape subgraphs folded to constants (folding.py, fold_ops.py).

Each fold runs in a tiny model whose output is the shape computation itself
(x -> SHAPE -> op -> int32 output): tpuc's folded value must equal what
LiteRT computes for the same graph, at the file's shapes and with the
input resized (tpuc: `input_shapes`; LiteRT: resize_tensor_input). Then the
Keras Flatten pattern end to end, and the one-line refusals.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_tflite_bad_inputs import fails
from tflite_builder import INT32, Op, T, build

pytest.importorskip("ai_edge_litert")

from tpuc.frontends.tflite.converter import (  # noqa: E402
    TfliteConverter,
    needed_ops,
    resolve_input_shapes,
    scan_unsupported,
)
from tpuc.frontends.tflite.model import load_tflite  # noqa: E402
from tpuc.frontends.tflite.registry import load_converters  # noqa: E402
from tpuc.tools import model_transform  # noqa: E402

X = [2, 3, 4, 5]


def i32(*values) -> np.ndarray:
    return np.array(values, np.int32)


def scalar(value: int) -> np.ndarray:
    return np.array(value, np.int32)


def shape_model(ops: list[Op], consts: list[np.ndarray], outs: list[list[int]]) -> bytes:
    """x (X) -> SHAPE -> s (tensor 1); constants are tensors 2..; then one
    int32 tensor per output shape in `outs`, written by `ops` in order, each
    a graph output."""
    tensors = [T("x", X), T("s", [4], type=INT32)]
    tensors += [T(f"c{i}", list(c.shape), c) for i, c in enumerate(consts)]
    first = len(tensors)
    tensors += [T(f"y{i}", shape, type=INT32) for i, shape in enumerate(outs)]
    ops = [Op("SHAPE", [0], [1], ("ShapeOptions", {"OutType": INT32})), *ops]
    return build(tensors, ops, [0], list(range(first, first + len(outs))))


def folded(data: bytes, tmp_path, shape: list[int] | None = None) -> dict[str, np.ndarray]:
    """tpuc's constant value of every graph output."""
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    model = load_tflite(str(path))
    shapes = resolve_input_shapes(model, None if shape is None else [shape])
    ops = needed_ops(model, model.outputs)
    scan_unsupported(model, ops, load_converters())
    cv = TfliteConverter(model, trust_shapes=shape is None)
    cv.start(shapes)
    for op in ops:
        cv.convert(op)
    return {model.tensor(i).name: cv.consts[i] for i in model.outputs}


def litert(data: bytes, shape: list[int]) -> dict[str, np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_content=data)
    index = interp.get_input_details()[0]["index"]
    interp.resize_tensor_input(index, shape)
    interp.allocate_tensors()
    interp.set_tensor(index, np.zeros(shape, np.float32))
    interp.invoke()
    return {d["name"]: interp.get_tensor(d["index"]) for d in interp.get_output_details()}


def ss_opts(**masks) -> tuple[str, dict]:
    names = {"begin": "BeginMask", "end": "EndMask", "shrink_axis": "ShrinkAxisMask"}
    return ("StridedSliceOptions", {names[k]: v for k, v in masks.items()})


def binary(op: str, y: np.ndarray, act: int = 0) -> tuple:
    options = {"ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions", "DIV": "DivOptions"}
    opts = (options[op], {"FusedActivationFunction": act}) if op in options else None
    return ([Op(op, [2, 1], [3], opts)], [y], [[4]])  # y op shape


# case -> (ops after SHAPE, constants, output shapes). Tensor 1 is the shape vector,
# constants start at 2, outputs follow the constants.
CASES = {
    "shape": ([Op("RESHAPE", [1, 2], [3])], [i32(4)], [[4]]),
    "strided_slice": ([Op("STRIDED_SLICE", [1, 2, 3, 4], [5], ss_opts())],
                      [i32(1), i32(3), i32(1)], [[2]]),
    "strided_slice_shrink": ([Op("STRIDED_SLICE", [1, 2, 3, 4], [5], ss_opts(shrink_axis=1))],
                             [i32(0), i32(1), i32(1)], [[]]),
    "strided_slice_masks_negative_stride": (
        [Op("STRIDED_SLICE", [1, 2, 3, 4], [5], ss_opts(begin=1, end=1))],
        [i32(0), i32(0), i32(-2)], [[2]]),
    "strided_slice_negative_begin": (
        [Op("STRIDED_SLICE", [1, 2, 3, 4], [5], ss_opts(end=1))],
        [i32(-3), i32(0), i32(1)], [[3]]),
    "slice": ([Op("SLICE", [1, 2, 3], [4])], [i32(1), i32(-1)], [[3]]),
    "pack": ([Op("STRIDED_SLICE", [1, 2, 3, 4], [6], ss_opts(shrink_axis=1)),
              Op("PACK", [6, 5], [7], ("PackOptions", {"ValuesCount": 2, "Axis": 0}))],
             [i32(0), i32(1), i32(1), scalar(-1)], [[], [2]]),
    "unpack": ([Op("UNPACK", [1], [2, 3, 4, 5], ("UnpackOptions", {"Num": 4, "Axis": 0}))],
               [], [[], [], [], []]),
    "gather": ([Op("GATHER", [1, 2], [3], ("GatherOptions", {"Axis": 0}))], [i32(3, 0, 0)],
               [[3]]),
    "gather_scalar_index": ([Op("GATHER", [1, 2], [3], ("GatherOptions", {"Axis": 0}))],
                            [scalar(2)], [[]]),
    "concatenation": ([Op("CONCATENATION", [2, 1, 2], [3], ("ConcatenationOptions", {"Axis": 0}))],
                      [i32(-1, 7)], [[8]]),
    "add": binary("ADD", i32(1, -2, 3, -40)),
    "add_relu": binary("ADD", i32(1, -2, 3, -40), act=1),
    "sub": binary("SUB", i32(9, 1, 4, -2)),
    "mul": binary("MUL", i32(2, -3, 1, 0)),
    "div_truncates": binary("DIV", i32(-3, 2, -3, 3)),
    "floor_div": binary("FLOOR_DIV", i32(-3, 2, -3, 3)),
    "floor_mod": binary("FLOOR_MOD", i32(-3, 2, -3, 3)),
    "maximum": binary("MAXIMUM", i32(3, 3, 3, 3)),
    "minimum": binary("MINIMUM", i32(3, 3, 3, 3)),
    "reduce_prod": (
        [Op("STRIDED_SLICE", [1, 2, 3, 4], [6], ss_opts(end=1)),
         Op("REDUCE_PROD", [6, 5], [7], ("ReducerOptions", {"KeepDims": False}))],
        [i32(1), i32(0), i32(1), i32(0)], [[3], []]),
    "sum_keep_dims": ([Op("SUM", [1, 2], [3], ("ReducerOptions", {"KeepDims": True}))],
                      [i32(0)], [[1]]),
    "expand_dims": ([Op("EXPAND_DIMS", [1, 2], [3])], [scalar(0)], [[1, 4]]),
    "squeeze": ([Op("EXPAND_DIMS", [1, 2], [3]), Op("SQUEEZE", [3], [4])], [scalar(1)],
                [[4, 1], [4]]),
    "fill": ([Op("FILL", [2, 3], [4])], [i32(2, 3), scalar(7)], [[2, 3]]),
    "range": ([Op("STRIDED_SLICE", [1, 2, 3, 4], [7], ss_opts(shrink_axis=1)),
               Op("RANGE", [5, 7, 6], [8])],
              [i32(1), i32(2), i32(1), scalar(0), scalar(1)], [[], [3]]),
    "transpose": ([Op("RESHAPE", [1, 2], [4]), Op("TRANSPOSE", [4, 3], [5])],
                  [i32(2, 2), i32(1, 0)], [[2, 2], [2, 2]]),
    "cast": ([Op("CAST", [1], [2])], [], [[4]]),
    "rank": ([Op("RANK", [0], [2])], [], [[]]),
}  # fmt: skip


@pytest.mark.parametrize("shape", [None, [3, 7, 4, 5]], ids=["file_shapes", "resized"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fold_equals_litert(case, shape, tmp_path):
    ops, consts, outs = CASES[case]
    data = shape_model(ops, consts, outs)
    got = folded(data, tmp_path, shape)
    want = litert(data, shape or X)
    assert got.keys() == want.keys()
    for name, value in want.items():
        assert got[name].dtype == value.dtype, (name, got[name].dtype, value.dtype)
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def flatten_model(batch: int = 1) -> bytes:
    """Keras' Flatten on a dynamic batch, then a Dense:
    x [batch,4,4,3] -> SHAPE -> STRIDED_SLICE(0, shrink) -> PACK(b, -1) ->
    RESHAPE -> FULLY_CONNECTED (48 -> 5) -> y. TFLiteConverter stores a
    dynamic batch as 1 (batch=1); other writers store -1."""
    rng = np.random.default_rng(3)
    tensors = [
        T("x", [batch, 4, 4, 3]),
        T("shape", [4], type=INT32),
        T("begin", [1], i32(0)),
        T("end", [1], i32(1)),
        T("strides", [1], i32(1)),
        T("batch", [], type=INT32),
        T("minus_one", [], scalar(-1)),
        T("new_shape", [2], type=INT32),
        T("flat", [batch, 48]),
        T("w", [5, 48], rng.standard_normal((5, 48)).astype(np.float32)),
        T("b", [5], rng.standard_normal(5).astype(np.float32)),
        T("y", [batch, 5]),
    ]
    ops = [
        Op("SHAPE", [0], [1], ("ShapeOptions", {"OutType": INT32})),
        Op("STRIDED_SLICE", [1, 2, 3, 4], [5], ss_opts(shrink_axis=1)),
        Op("PACK", [5, 6], [7], ("PackOptions", {"ValuesCount": 2, "Axis": 0})),
        Op("RESHAPE", [0, 7], [8]),
        Op("FULLY_CONNECTED", [8, 9, 10], [11]),
    ]
    return build(tensors, ops, [0], [11])


@pytest.mark.parametrize("shape", [None, [3, 4, 4, 3]], ids=["file_shapes", "batch_3"])
def test_flatten_on_a_dynamic_batch_matches_litert(shape, tmp_path):
    """The shape subgraph folds (batch from --input_shapes, else the
    file's 1); TOP matches LiteRT on every tensor both have."""
    path = tmp_path / "m.tflite"
    path.write_bytes(flatten_model())
    x = np.random.default_rng(0).standard_normal(shape or [1, 4, 4, 3]).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    argv = ["--model_name", "m", "--model_def", str(path), "--test_input",
            str(tmp_path / "in.npz"), "--mlir", str(tmp_path / "m.mlir"),
            "--tolerance", "0.99999,0.999"]  # fmt: skip
    if shape is not None:
        argv += ["--input_shapes", str([shape]).replace(" ", "")]
    assert model_transform.run(argv) == 0
    mlir = (tmp_path / "m.mlir").read_text()
    rows = (shape or [1])[0]
    assert f"tensor<{rows}x5xf32>" in mlir
    assert "SHAPE" not in mlir and "new_shape" not in mlir  # folded away, no weight left


@pytest.mark.parametrize("shape, rows", [(None, 1), ([2, 4, 4, 3], 2)])
def test_batch_stored_as_minus_one_is_one_unless_given(shape, rows, tmp_path):
    path = tmp_path / "m.tflite"
    path.write_bytes(flatten_model(batch=-1))
    argv = ["--model_name", "m", "--model_def", str(path), "--mlir", str(tmp_path / "m.mlir")]
    if shape is not None:
        argv += ["--input_shapes", str([shape]).replace(" ", "")]
    assert model_transform.run(argv) == 0
    mlir = (tmp_path / "m.mlir").read_text()
    assert f"tensor<{rows}x4x4x3xf32>" in mlir and f"tensor<{rows}x5xf32>" in mlir
    assert "-1x" not in mlir


def test_shape_computation_on_data_is_named(tmp_path, capsys):
    """PACK of activations is a shape op tpuc only folds: the op and the
    input that is not known are named."""
    tensors = [T("x", [2]), T("y", [2, 2])]
    ops = [Op("PACK", [0, 0], [1], ("PackOptions", {"ValuesCount": 2, "Axis": 0}))]
    fails(tmp_path, capsys, build(tensors, ops, [0], [1]), "#0 PACK ('y')",
          "a shape computation tpuc cannot fold", "input 'x'")  # fmt: skip


def test_fold_it_cannot_evaluate_is_named(tmp_path, capsys):
    """A GATHER with batch_dims on constants: the op, its tensor and why."""
    tensors = [T("x", [1, 2]), T("p", [2, 3], np.arange(6, dtype=np.int32).reshape(2, 3)),
               T("i", [2, 1], np.zeros((2, 1), np.int32)), T("g", [2, 1], type=INT32),
               T("y", [1, 2])]  # fmt: skip
    ops = [Op("GATHER", [1, 2], [3], ("GatherOptions", {"Axis": 1, "BatchDims": 1})),
           Op("RESHAPE", [0, 3], [4])]  # fmt: skip
    fails(tmp_path, capsys, build(tensors, ops, [0], [4]), "#0 GATHER ('g')",
          "cannot fold it: batch_dims is not supported")  # fmt: skip
