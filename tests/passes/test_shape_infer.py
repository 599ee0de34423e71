"""Shape rules against an independent reference: the output shapes of
onnxruntime one-node models (or numpy for TOP-only ops) with the same
attributes; plus error cases and the pass over a parsed module."""

from __future__ import annotations

from collections.abc import Sequence
from io import StringIO
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from xdsl.dialects.builtin import NoneType, TensorType, UnrankedTensorType, i32
from xdsl.ir import Block
from xdsl.parser import Parser
from xdsl.printer import Printer

from tpuc.base.errors import TpucError
from tpuc.dialects import top
from tpuc.dialects.base import tensor_type
from tpuc.ir.context import make_context
from tpuc.passes.shape_infer import ShapeInferPass, infer_op_shapes, shape_rule_of

RNG = np.random.default_rng(0)
OPSET = 18

# --- the two sides --------------------------------------------------------------------


def top_shapes(
    op_cls: type,
    shapes: Sequence[Sequence[int] | None],
    attrs: dict[str, Any] | None = None,
    results: int | None = None,
) -> list[tuple[int, ...]]:
    """Build `op_cls` on block arguments of the given shapes (None: a
    top.None operand), run its shape rule, return the result shapes."""
    block = Block(arg_types=[tensor_type(s) for s in shapes if s is not None])
    args = iter(block.args)
    operands = []
    for shape in shapes:
        if shape is None:
            operands.append(top.NoneOp.build(result_types=[NoneType()]).results[0])
        else:
            operands.append(next(args))
    names = [f"out{i}" for i in range(results)] if results else None
    op = op_cls.make(operands, "t", attrs or {}, result_names=names)
    infer_op_shapes(op)
    out = []
    for result in op.results:
        assert isinstance(result.type, TensorType), f"{result.type} not inferred"
        out.append(tuple(result.type.get_shape()))
    return out


def ort_shapes(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    attrs: dict[str, Any] | None = None,
    outputs: int = 1,
    opset: int = OPSET,
) -> list[tuple[int, ...]]:
    """Output shapes of a one-node ONNX model run by onnxruntime; None inputs
    are omitted optional inputs."""
    names = ["" if x is None else f"x{i}" for i, x in enumerate(inputs)]
    graph_inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
        for n, x in zip(names, inputs, strict=True)
        if x is not None
    ]
    out_names = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op_type, names, out_names, **(attrs or {}))
    graph_outputs = [onnx.ValueInfoProto(name=n) for n in out_names]
    graph = helper.make_graph([node], "g", graph_inputs, graph_outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    feeds = {n: x for n, x in zip(names, inputs, strict=True) if x is not None}
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    return [tuple(y.shape) for y in session.run(None, feeds)]


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def i64(values: Sequence[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def check(top_side: list[tuple[int, ...]], reference: list[tuple[int, ...]]) -> None:
    assert top_side == [tuple(s) for s in reference]


# --- convolution, pooling, matmul ------------------------------------------------------

CONV_CASES = [
    # input, filter, pads, strides, dilations, group
    ((1, 3, 32, 32), (16, 3, 3, 3), [1, 1, 1, 1], [1, 1], [1, 1], 1),
    ((2, 4, 17, 15), (8, 2, 3, 5), [0, 2, 1, 0], [2, 3], [1, 1], 2),
    ((1, 8, 20, 20), (8, 1, 3, 3), [2, 2, 2, 2], [1, 1], [2, 2], 8),
    ((1, 3, 10, 9), (6, 3, 4, 2), [0, 0, 0, 0], [3, 2], [2, 3], 1),
    ((1, 2, 11), (4, 2, 3), [1, 0], [2], [1], 1),
    ((1, 2, 5, 6, 7), (3, 2, 2, 3, 2), [0, 1, 1, 1, 0, 0], [1, 2, 2], [1, 1, 2], 1),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv(case):
    shape, weight, pads, strides, dilations, group = case
    attrs = dict(pads=pads, strides=strides, dilations=dilations, group=group)
    got = top_shapes(
        top.ConvOp, [shape, weight, (weight[0],)], attrs | {"kernel_shape": weight[2:]}
    )
    check(got, ort_shapes("Conv", [f32(*shape), f32(*weight), f32(weight[0])], attrs))


DECONV_CASES = [
    # input, filter, pads, strides, dilations, group, output_padding
    ((1, 4, 8, 8), (4, 3, 3, 3), [1, 1, 1, 1], [2, 2], [1, 1], 1, [1, 1]),
    ((1, 4, 5, 7), (4, 2, 4, 3), [0, 1, 2, 0], [3, 2], [1, 2], 2, [0, 1]),
    ((2, 3, 9), (3, 5, 2), [0, 0], [1], [1], 1, [0]),
]


@pytest.mark.parametrize("case", DECONV_CASES, ids=str)
def test_deconv(case):
    shape, weight, pads, strides, dilations, group, output_padding = case
    attrs = dict(pads=pads, strides=strides, dilations=dilations, group=group)
    attrs["output_padding"] = output_padding
    got = top_shapes(top.DeconvOp, [shape, weight, None], attrs)
    check(got, ort_shapes("ConvTranspose", [f32(*shape), f32(*weight)], attrs))


POOL_CASES = [
    # input, kernel, pads, strides, ceil_mode
    ((1, 3, 32, 32), [2, 2], [0, 0, 0, 0], [2, 2], 0),
    ((1, 3, 7, 9), [3, 2], [1, 0, 1, 1], [2, 2], 1),
    ((1, 2, 6, 6), [2, 2], [0, 0, 1, 1], [4, 4], 1),  # last window would start in the pad
    ((1, 2, 5, 5), [3, 3], [1, 1, 1, 1], [2, 2], 1),
    ((2, 1, 13), [4], [1, 2], [3], 1),
    ((1, 2, 5, 6, 7), [2, 3, 2], [0, 0, 1, 1, 1, 0], [2, 2, 3], 0),
]


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_pool(case, op_type):
    shape, kernel, pads, strides, ceil_mode = case
    attrs = dict(kernel_shape=kernel, pads=pads, strides=strides, ceil_mode=ceil_mode)
    op_cls = top.MaxPoolOp if op_type == "MaxPool" else top.AvgPoolOp
    got = top_shapes(op_cls, [shape], attrs | {"ceil_mode": bool(ceil_mode)})
    check(got, ort_shapes(op_type, [f32(*shape)], attrs))


MATMUL_CASES = [
    ((3, 4), (4, 5)),
    ((2, 3, 4), (4, 5)),
    ((4,), (4, 5)),
    ((2, 3, 4), (4,)),
    ((4,), (4,)),
    ((2, 1, 3, 4), (5, 4, 6)),
    ((7, 1, 3, 4), (1, 2, 4, 6)),
]


@pytest.mark.parametrize("case", MATMUL_CASES, ids=str)
def test_matmul(case):
    left, right = case
    got = top_shapes(top.MatMulOp, [left, right, None])
    check(got, ort_shapes("MatMul", [f32(*left), f32(*right)]))


def test_matmul_right_transpose_and_bias():
    got = top_shapes(top.MatMulOp, [(2, 3, 4), (5, 4), (5,)], {"right_transpose": True})
    assert got == [np.matmul(f32(2, 3, 4), f32(5, 4).T).shape]
    got = top_shapes(top.MatMulOp, [(2, 3, 4), (2, 6, 4), None], {"right_transpose": True})
    assert got == [np.matmul(f32(2, 3, 4), f32(2, 6, 4).swapaxes(-1, -2)).shape]


# --- elementwise ---------------------------------------------------------------------

BROADCAST_CASES = [
    ((2, 3, 4), (4,)),
    ((2, 1, 4), (3, 1)),
    ((1,), (5, 1, 2)),
    ((), (2, 2)),
]


@pytest.mark.parametrize("case", BROADCAST_CASES, ids=str)
@pytest.mark.parametrize(
    "op_cls, op_type",
    [
        (top.SubOp, "Sub"),
        (top.DivOp, "Div"),
        (top.PowTensorOp, "Pow"),
        (top.CompareOp, "Less"),
        (top.MulOp, "Mul"),
    ],
)
def test_binary_broadcast(case, op_cls, op_type):
    got = top_shapes(op_cls, list(case))
    check(got, ort_shapes(op_type, [f32(*s) for s in case]))


@pytest.mark.parametrize(
    "op_cls, op_type", [(top.AddOp, "Sum"), (top.MaxOp, "Max"), (top.MinOp, "Min")]
)
def test_variadic_broadcast(op_cls, op_type):
    shapes = [(3, 1, 5), (4, 1), (1, 4, 5)]
    check(top_shapes(op_cls, shapes), ort_shapes(op_type, [f32(*s) for s in shapes]))


def test_where_and_prelu():
    cond = RNG.standard_normal((4, 1)) > 0
    got = top_shapes(top.WhereOp, [(4, 1), (1, 3), (2, 1, 1)])
    check(got, ort_shapes("Where", [cond, f32(1, 3), f32(2, 1, 1)]))
    got = top_shapes(top.PReluOp, [(2, 3, 4, 5), (3, 1, 1)])
    check(got, ort_shapes("PRelu", [f32(2, 3, 4, 5), f32(3, 1, 1)]))


@pytest.mark.parametrize(
    "op_cls", [top.ReluOp, top.SigmoidOp, top.CastOp, top.ClipOp, top.MulConstOp, top.LRNOp]
)
def test_same_shape(op_cls):
    assert top_shapes(op_cls, [(2, 3, 4)]) == [(2, 3, 4)]


def test_normalizations():
    shape = (2, 6, 4, 5)
    got = top_shapes(top.LayerNormOp, [shape, (4, 5), (4, 5)], {"axis": -2})
    check(got, ort_shapes("LayerNormalization", [f32(*shape), f32(4, 5), f32(4, 5)], {"axis": -2}))
    got = top_shapes(top.InstanceNormOp, [shape, (6,), (6,)])
    check(got, ort_shapes("InstanceNormalization", [f32(*shape), f32(6), f32(6)]))
    got = top_shapes(top.BatchNormOp, [shape, (6,), (6,), (6,), (6,)])
    check(got, ort_shapes("BatchNormalization", [f32(*shape), *[f32(6)] * 4]))
    got = top_shapes(top.GroupNormOp, [shape, (6,), (6,)], {"num_groups": 3})
    reference = ort_shapes(
        "GroupNormalization", [f32(*shape), f32(6), f32(6)], {"num_groups": 3}, opset=21
    )
    check(got, reference)
    assert top_shapes(top.ScaleOp, [shape, (1, 6, 1, 1), None]) == [shape]
    got = top_shapes(top.SoftmaxOp, [shape], {"axis": -1})
    check(got, ort_shapes("Softmax", [f32(*shape)], {"axis": -1}))


# --- data movement ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, target",
    [((2, 3, 4), [6, -1]), ((2, 3, 4), [-1]), ((24,), [2, 3, 4]), ((1, 6), [1, -1, 2, 1])],
)
def test_reshape(shape, target):
    got = top_shapes(top.ReshapeOp, [shape], {"shape": target})
    check(got, ort_shapes("Reshape", [f32(*shape), i64(target)]))


@pytest.mark.parametrize("start, end", [(1, -1), (0, 1), (-2, -1), (2, 2), (0, -1)])
def test_flatten(start, end):
    x = f32(2, 3, 4, 5)
    got = top_shapes(top.FlattenOp, [x.shape], {"start_dim": start, "end_dim": end})
    end_index = end % x.ndim
    start_index = start % x.ndim
    expected = x.shape[:start_index] + (-1,) + x.shape[end_index + 1 :]
    assert got == [x.reshape(expected).shape]


@pytest.mark.parametrize("axes", [[1], [-1, 1], None])
def test_squeeze(axes):
    x = f32(3, 1, 4, 1)
    got = top_shapes(top.SqueezeOp, [x.shape], {"axes": axes})
    check(got, ort_shapes("Squeeze", [x] + ([] if axes is None else [i64(axes)])))


@pytest.mark.parametrize("axes", [[0], [-1], [1, 3], [0, -1, 2]])
def test_unsqueeze(axes):
    x = f32(3, 4)
    got = top_shapes(top.UnsqueezeOp, [x.shape], {"axes": axes})
    check(got, ort_shapes("Unsqueeze", [x, i64(axes)]))


def test_permute():
    x = f32(2, 3, 4, 5)
    got = top_shapes(top.PermuteOp, [x.shape], {"order": [0, 2, 3, 1]})
    check(got, ort_shapes("Transpose", [x], {"perm": [0, 2, 3, 1]}))


def test_slice_matches_numpy():
    """Random full-rank slices, negative and out-of-range bounds and steps."""
    for _ in range(200):
        shape = tuple(int(d) for d in RNG.integers(1, 7, size=RNG.integers(1, 4)))
        x = np.zeros(shape)
        offset = [int(v) for v in RNG.integers(-8, 8, size=len(shape))]
        ends = [int(v) for v in RNG.integers(-8, 8, size=len(shape))]
        steps = [int(v) for v in RNG.choice([-3, -2, -1, 1, 2, 3], size=len(shape))]
        got = top_shapes(top.SliceOp, [shape], {"offset": offset, "ends": ends, "steps": steps})
        index = tuple(slice(b, e, s) for b, e, s in zip(offset, ends, steps, strict=True))
        assert got == [x[index].shape], (shape, offset, ends, steps)


def test_slice_matches_onnx():
    x = f32(5, 6, 7)
    offset, ends, steps = [4, 0, -1], [-6, 100, -8], [-2, 3, -1]
    int_min = -(2**63)
    got = top_shapes(top.SliceOp, [x.shape], {"offset": offset, "ends": ends, "steps": steps})
    onnx_ends = [int_min, 100, int_min]  # ONNX spells "to the start" with INT64_MIN
    check(got, ort_shapes("Slice", [x, i64(offset), i64(onnx_ends), i64([0, 1, 2]), i64(steps)]))


def test_split_and_concat():
    x = f32(2, 10, 3)
    got = top_shapes(top.SplitOp, [x.shape], {"axis": 1, "split_size": [3, 5, 2]}, results=3)
    check(got, ort_shapes("Split", [x, i64([3, 5, 2])], {"axis": 1}, outputs=3))
    got = top_shapes(top.SplitOp, [x.shape], {"axis": -2}, results=4)
    check(got, ort_shapes("Split", [x], {"axis": -2, "num_outputs": 4}, outputs=4))
    parts = [f32(2, 1, 3), f32(2, 4, 3)]
    got = top_shapes(top.ConcatOp, [p.shape for p in parts], {"axis": -2})
    check(got, ort_shapes("Concat", parts, {"axis": -2}))


def test_pad_tile_expand():
    x = f32(2, 3, 4)
    paddings = [0, 1, -1, 1, 2, 0]
    got = top_shapes(top.PadOp, [x.shape], {"paddings": paddings})
    check(got, ort_shapes("Pad", [x, i64(paddings)]))
    got = top_shapes(top.TileOp, [x.shape], {"tile": [2, 1, 3]})
    check(got, ort_shapes("Tile", [x, i64([2, 1, 3])]))
    for target in ([3, 1, 1], [5, 2, 1, 4], [1]):
        y = f32(3, 1)
        got = top_shapes(top.ExpandOp, [y.shape], {"shape": target})
        check(got, ort_shapes("Expand", [y, i64(target)]))


@pytest.mark.parametrize("axis, indices", [(0, [[0, 1], [2, 0]]), (1, 2), (-1, [3, 0, 1])])
def test_gather(axis, indices):
    x = f32(3, 4, 5)
    index = i64(indices)
    got = top_shapes(top.GatherOp, [x.shape, index.shape], {"axis": axis})
    check(got, ort_shapes("Gather", [x, index], {"axis": axis}))


@pytest.mark.parametrize("axes, keepdims", [([1], 1), ([0, -1], 0), (None, 0), (None, 1)])
def test_reduce(axes, keepdims):
    x = f32(2, 3, 4)
    got = top_shapes(top.ReduceOp, [x.shape], {"axes": axes, "keepdims": bool(keepdims)})
    inputs = [x] + ([] if axes is None else [i64(axes)])
    check(got, ort_shapes("ReduceMean", inputs, {"keepdims": keepdims}))


@pytest.mark.parametrize("axis, keepdims", [(1, 1), (-1, 0)])
def test_arg_and_topk(axis, keepdims):
    x = f32(2, 5, 4)
    got = top_shapes(top.ArgOp, [x.shape], {"axis": axis, "keepdims": bool(keepdims)})
    check(got, ort_shapes("ArgMax", [x], {"axis": axis, "keepdims": keepdims}))
    got = top_shapes(top.TopKOp, [x.shape], {"axis": axis, "K": 3})
    check(got, ort_shapes("TopK", [x, i64([3])], {"axis": axis}, outputs=2))


def test_depth2space_both_directions():
    x = f32(1, 12, 3, 4)
    got = top_shapes(top.Depth2SpaceOp, [x.shape], {"block_h": 2, "block_w": 2, "is_CRD": True})
    check(got, ort_shapes("DepthToSpace", [x], {"blocksize": 2, "mode": "CRD"}))
    y = f32(1, 3, 6, 4)
    got = top_shapes(
        top.Depth2SpaceOp, [y.shape], {"block_h": 2, "block_w": 2, "is_inversed": True}
    )
    check(got, ort_shapes("SpaceToDepth", [y], {"blocksize": 2}))


def test_upsample_and_interp():
    x = f32(1, 3, 4, 5)
    got = top_shapes(top.UpsampleOp, [x.shape], {"scale_h": 2, "scale_w": 3})
    assert got == [x.repeat(2, axis=2).repeat(3, axis=3).shape]
    got = top_shapes(top.InterpOp, [x.shape], {"target_shape": [7, 9], "mode": "linear"})
    sizes = i64([1, 3, 7, 9])
    check(got, ort_shapes("Resize", [x, None, None, sizes], {"mode": "linear"}))


@pytest.mark.parametrize("op_type", ["LSTM", "GRU"])
@pytest.mark.parametrize(
    "bidirectional, batch_first", [(False, False), (True, False), (True, True)]
)
def test_recurrent(op_type, bidirectional, batch_first):
    seq, batch, size, hidden = 5, 2, 3, 4
    gates = 4 if op_type == "LSTM" else 3
    dirs = 2 if bidirectional else 1
    x = f32(seq, batch, size)
    w, r = f32(dirs, gates * hidden, size), f32(dirs, gates * hidden, hidden)
    b = f32(dirs, 2 * gates * hidden)
    outputs = 3 if op_type == "LSTM" else 2
    attrs = {"hidden_size": hidden, "direction": "bidirectional" if bidirectional else "forward"}
    reference = ort_shapes(op_type, [x, w, r, b], attrs, outputs=outputs)
    if batch_first:
        # onnxruntime has no layout 1 recurrent kernels, and onnx's reference
        # evaluator runs a bidirectional one only from onnx 1.23 on; ONNX
        # defines layout 1 as layout 0 with batch and sequence (X, Y) or
        # batch and direction (Y_h, Y_c) swapped
        x = x.transpose(1, 0, 2)
        reference = [(y[2], y[0], y[1], y[3]) for y in reference[:1]] + [
            (y[1], y[0], y[2]) for y in reference[1:]
        ]
    op_cls = top.LSTMOp if op_type == "LSTM" else top.GRUOp
    operands = [x.shape, w.shape, r.shape, b.shape, None] + ([None] if op_type == "LSTM" else [])
    top_attrs = {"hidden_size": hidden, "bidirectional": bidirectional, "batch_first": batch_first}
    check(top_shapes(op_cls, operands, top_attrs), reference)


# --- coverage, errors, types -------------------------------------------------------------


def test_every_top_op_has_a_rule():
    missing = [op.name for op in top.TOP_OPS if shape_rule_of(op) is None]
    assert missing == ["top.Weight", "top.None"]


@pytest.mark.parametrize(
    "op_cls, shapes, attrs, message",
    [
        (top.ConvOp, [(1, 3, 8, 8), (4, 2, 3, 3), None], {}, "input has 3 channels"),
        (top.ConvOp, [(1, 4, 2, 2), (4, 4, 3, 3), None], {}, "larger than the padded input"),
        (top.AddOp, [(2, 3), (4, 3)], {}, "do not broadcast"),
        (top.ReshapeOp, [(2, 3, 4)], {"shape": [5, -1]}, "cannot reshape"),
        (top.ReshapeOp, [(2, 3, 4)], {"shape": [2, 3, 5]}, "cannot reshape"),
        (top.MatMulOp, [(2, 3), (4, 5), None], {}, "cannot multiply"),
        (top.SqueezeOp, [(2, 3)], {"axes": [1]}, "size is not 1"),
        (top.ConcatOp, [(2, 3), (3, 3)], {"axis": 1}, "differ off the concat axis"),
        (top.TopKOp, [(2, 3)], {"K": 4}, "K 4 out of range"),
        (top.PermuteOp, [(2, 3)], {"order": [0, 0]}, "not a permutation"),
        (top.MaxPoolOp, [(1, 1, 2, 2)], {"kernel_shape": [3, 3]}, "larger than the padded"),
        (top.SoftmaxOp, [(2, 3)], {"axis": 2}, "axis 2 out of range"),
    ],
)
def test_errors_name_op_and_tensor(op_cls, shapes, attrs, message):
    with pytest.raises(TpucError) as info:
        top_shapes(op_cls, shapes, attrs)
    text = str(info.value)
    assert text.startswith(f"shape-infer: {op_cls.name} 't': ")
    assert message in text
    assert "\n" not in text


def test_unranked_operand_leaves_result_unranked():
    block = Block(arg_types=[tensor_type(None)])
    op = top.ReluOp.make([block.args[0]], "r")
    infer_op_shapes(op)
    assert isinstance(op.results[0].type, UnrankedTensorType)


def test_existing_element_type_is_kept():
    block = Block(arg_types=[tensor_type([2, 3])])
    op = top.CastOp.make([block.args[0]], "c", {"to": "INT32"}, [UnrankedTensorType(i32)])
    infer_op_shapes(op)
    assert op.results[0].type == TensorType(i32, [2, 3])


MODULE = """
builtin.module attributes {module.name = "m", module.state = "TOP_F32"} {
  func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<*xf32> {
    %0 = "top.Input"(%arg0) {name = "in"} : (tensor<1x3x8x8xf32>) -> tensor<*xf32>
    %1 = "top.Weight"() {name = "w"} : () -> tensor<4x3x3x3xf32>
    %2 = "top.None"() : () -> none
    %3 = "top.Conv"(%0, %1, %2) {name = "conv", kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : (tensor<*xf32>, tensor<4x3x3x3xf32>, none) -> tensor<*xf32>
    %4 = "top.Reshape"(%3) {name = "flat", shape = [1, -1]} : (tensor<*xf32>) -> tensor<*xf32>
    func.return %4 : tensor<*xf32>
  }
}
"""  # noqa: E501


def test_pass_fills_types_and_function_type():
    module = Parser(make_context(), MODULE).parse_module()
    ShapeInferPass().apply(make_context(), module)
    module.verify()
    text = StringIO()
    Printer(stream=text).print_op(module)
    printed = text.getvalue()
    assert "-> tensor<1x4x4x4xf32>" in printed
    assert "func.func @main(%arg0: tensor<1x3x8x8xf32>) -> tensor<1x64xf32>" in printed
    assert "tensor<*xf32>" not in printed


def test_pass_reports_bad_reshape():
    bad = MODULE.replace("shape = [1, -1]", "shape = [1, 60]")
    module = Parser(make_context(), bad).parse_module()
    with pytest.raises(TpucError, match=r"top.Reshape 'flat': cannot reshape \[1, 4, 4, 4\]"):
        ShapeInferPass().apply(make_context(), module)


def test_input_takes_its_operand_type():
    block = Block(arg_types=[TensorType(i32, [1, 7])])
    op = top.InputOp.make([block.args[0]], "ids")
    infer_op_shapes(op)
    assert op.results[0].type == TensorType(i32, [1, 7])
