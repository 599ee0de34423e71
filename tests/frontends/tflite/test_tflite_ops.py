"""The TFLite per-op suite: one-op float `.tflite` models built with the
`tflite` package's builders (tests/support/tflite_builder.py), each
transformed with model_transform.py (TOP against LiteRT, every tensor both
have) and deployed in F16 for bm1684x (the bmodel in the simulator bit-exact
against the TPU interpreter, the TPU interpreter against TOP)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from tflite_builder import Op, T, build, one_op

pytest.importorskip("ai_edge_litert")

from tpuc.tools import model_deploy, model_transform  # noqa: E402

RNG = np.random.default_rng(17)


def w(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def i32(*values):
    return np.array(values, np.int32)


def conv_opts(padding=0, stride=1, act=0, dilation=1, depth_multiplier=None):
    fields = {
        "Padding": padding,
        "StrideW": stride,
        "StrideH": stride,
        "FusedActivationFunction": act,
        "DilationWFactor": dilation,
        "DilationHFactor": dilation,
    }
    if depth_multiplier is None:
        return ("Conv2DOptions", fields)
    return ("DepthwiseConv2DOptions", {**fields, "DepthMultiplier": depth_multiplier})


def pool_opts(padding, k, stride, act=0):
    return (
        "Pool2DOptions",
        {
            "Padding": padding,
            "StrideW": stride,
            "StrideH": stride,
            "FilterWidth": k,
            "FilterHeight": k,
            "FusedActivationFunction": act,
        },
    )


X = [1, 8, 8, 4]
X9 = [1, 9, 9, 4]
# id -> (op, x shape, constants, options, extra keyword arguments of one_op)
CASES = {
    "conv_same_relu": ("CONV_2D", X, [w(6, 3, 3, 4), w(6)], conv_opts(0, 1, 1), {}),
    "conv_same_s2_odd_relu6": ("CONV_2D", X9, [w(6, 3, 3, 4), w(6)], conv_opts(0, 2, 3), {}),
    "conv_valid_dil2_tanh_ignored": (
        "CONV_2D",
        X9,
        [w(5, 3, 3, 4), w(5)],
        conv_opts(1, 1, 4, 2),
        {},
    ),
    "conv_grouped": ("CONV_2D", X, [w(6, 1, 1, 2), w(6)], conv_opts(1, 1, 0), {}),
    "depthwise_s2_m2_relu_n1": (
        "DEPTHWISE_CONV_2D",
        X9,
        [w(1, 3, 3, 8), w(8)],
        conv_opts(0, 2, 2, 1, 2),
        {},
    ),
    "depthwise_same_5x5": (
        "DEPTHWISE_CONV_2D",
        X,
        [w(1, 5, 5, 4), w(4)],
        conv_opts(0, 1, 0, 1, 1),
        {},
    ),
    "fully_connected_4d_relu": (
        "FULLY_CONNECTED",
        [1, 2, 2, 4],
        [w(5, 16), w(5)],
        ("FullyConnectedOptions", {"FusedActivationFunction": 1}),
        {},
    ),
    "fully_connected_keep_dims": (
        "FULLY_CONNECTED",
        [2, 3, 4],
        [w(5, 4), None],
        ("FullyConnectedOptions", {"KeepNumDims": True}),
        {},
    ),
    "add_broadcast_relu6": ("ADD", X, [w(4)], ("AddOptions", {"FusedActivationFunction": 3}), {}),
    "add_two_inputs": ("ADD", X, [], ("AddOptions", {}), {"extra_inputs": 1}),
    "sub_relu": ("SUB", X, [w(1, 1, 4)], ("SubOptions", {"FusedActivationFunction": 1}), {}),
    "mul": ("MUL", X, [w(8, 1, 1)], ("MulOptions", {}), {}),
    "div": ("DIV", X, [np.full([4], 1.7, np.float32)], ("DivOptions", {}), {}),
    "maximum": ("MAXIMUM", X, [w(4)], None, {}),
    "minimum": ("MINIMUM", X, [], None, {"extra_inputs": 1}),
    "avg_pool_same_s2": ("AVERAGE_POOL_2D", X9, [], pool_opts(0, 3, 2), {}),
    "avg_pool_valid": ("AVERAGE_POOL_2D", X, [], pool_opts(1, 2, 2), {}),
    "max_pool_same_s2_relu": ("MAX_POOL_2D", X9, [], pool_opts(0, 3, 2, 1), {}),
    "mean_hw_keep": ("MEAN", X, [i32(1, 2)], ("ReducerOptions", {"KeepDims": True}), {}),
    "mean_hw": ("MEAN", X, [i32(1, 2)], ("ReducerOptions", {"KeepDims": False}), {}),
    "mean_c": ("MEAN", X, [i32(3)], ("ReducerOptions", {"KeepDims": False}), {}),
    "reduce_max_w": ("REDUCE_MAX", X, [i32(2)], ("ReducerOptions", {"KeepDims": True}), {}),
    "reshape_to_3d": ("RESHAPE", X, [i32(1, 64, 4)], None, {}),
    "squeeze": ("SQUEEZE", [1, 1, 1, 8], [], None, {}),
    "softmax_4d": ("SOFTMAX", X, [], ("SoftmaxOptions", {"Beta": 1.0}), {}),
    "softmax_beta": ("SOFTMAX", [2, 10], [], ("SoftmaxOptions", {"Beta": 0.5}), {}),
    "logistic": ("LOGISTIC", X, [], None, {}),
    "tanh": ("TANH", X, [], None, {}),
    "hard_swish": ("HARD_SWISH", X, [], None, {}),
    "gelu_code_above_127": ("GELU", X, [], ("GeluOptions", {"Approximate": False}), {}),
    "relu": ("RELU", X, [], None, {}),
    "relu6": ("RELU6", X, [], None, {}),
    "relu_n1_to_1": ("RELU_N1_TO_1", X, [], None, {}),
    "leaky_relu": ("LEAKY_RELU", X, [], ("LeakyReluOptions", {"Alpha": 0.1}), {}),
    "prelu": ("PRELU", X, [w(1, 1, 4)], None, {}),
    "concat_channels": (
        "CONCATENATION",
        X,
        [w(1, 8, 8, 2)],
        ("ConcatenationOptions", {"Axis": 3}),
        {},
    ),
    "concat_w": (
        "CONCATENATION",
        X,
        [],
        ("ConcatenationOptions", {"Axis": -2}),
        {"extra_inputs": 1},
    ),
    "pad": ("PAD", X, [i32(0, 0, 1, 2, 2, 1, 0, 0).reshape(4, 2)], None, {}),
    "padv2": (
        "PADV2",
        X,
        [i32(0, 0, 1, 0, 0, 1, 0, 0).reshape(4, 2), np.array([-1.5], np.float32)],
        None,
        {},
    ),
    "resize_bilinear": ("RESIZE_BILINEAR", X, [i32(16, 12)], ("ResizeBilinearOptions", {}), {}),
    "resize_bilinear_half_pixel": (
        "RESIZE_BILINEAR",
        X,
        [i32(16, 16)],
        ("ResizeBilinearOptions", {"HalfPixelCenters": True}),
        {},
    ),
    "resize_bilinear_align": (
        "RESIZE_BILINEAR",
        X,
        [i32(15, 15)],
        ("ResizeBilinearOptions", {"AlignCorners": True}),
        {},
    ),
    "resize_nearest": (
        "RESIZE_NEAREST_NEIGHBOR",
        X,
        [i32(16, 12)],
        ("ResizeNearestNeighborOptions", {}),
        {},
    ),
    "resize_nearest_half_pixel": (
        "RESIZE_NEAREST_NEIGHBOR",
        X,
        [i32(12, 12)],
        ("ResizeNearestNeighborOptions", {"HalfPixelCenters": True}),
        {},
    ),
    "resize_nearest_align": (
        "RESIZE_NEAREST_NEIGHBOR",
        X,
        [i32(13, 13)],
        ("ResizeNearestNeighborOptions", {"AlignCorners": True}),
        {},
    ),
    "transpose": ("TRANSPOSE", X, [i32(0, 3, 1, 2)], None, {}),
    "strided_slice": (
        "STRIDED_SLICE",
        X,
        [i32(0, 1, 0, 1), i32(1, 7, 8, 4), i32(1, 2, 1, 2)],
        ("StridedSliceOptions", {"BeginMask": 4, "EndMask": 4}),
        {},
    ),
    "strided_slice_shrink": (
        "STRIDED_SLICE",
        X,
        [i32(0, 2, 0, 0), i32(1, 3, 8, 4), i32(1, 1, 1, 1)],
        ("StridedSliceOptions", {"ShrinkAxisMask": 2}),
        {},
    ),
    "slice": ("SLICE", X, [i32(0, 2, 1, 0), i32(-1, 4, 5, 3)], None, {"out": [1, 4, 5, 3]}),
    "split_channels": (
        "SPLIT",
        X,
        [i32(3)],
        ("SplitOptions", {"NumSplits": 2}),
        {"x_first": False, "outputs": 2},
    ),
    "split_v": (
        "SPLIT_V",
        X,
        [i32(3, -1), i32(2)],
        ("SplitVOptions", {"NumSplits": 2}),
        {"outputs": 2},
    ),
    "expand_dims": ("EXPAND_DIMS", [2, 3], [i32(1)], None, {}),
    "mirror_pad_reflect": (
        "MIRROR_PAD",
        X,
        [i32(0, 0, 1, 2, 2, 1, 0, 0).reshape(4, 2)],
        ("MirrorPadOptions", {"Mode": 0}),
        {},
    ),
    "sum_c_keep": ("SUM", X, [i32(-1)], ("ReducerOptions", {"KeepDims": True}), {}),
    "reduce_min_h": ("REDUCE_MIN", X, [i32(1)], ("ReducerOptions", {"KeepDims": False}), {}),
    "reduce_prod_w": (
        "REDUCE_PROD",
        [1, 4, 3, 2],
        [i32(2)],
        ("ReducerOptions", {"KeepDims": True}),
        {},
    ),
    "abs": ("ABS", X, [], None, {}),
    "neg": ("NEG", X, [], None, {}),
    "exp": ("EXP", X, [], None, {}),
    "floor": ("FLOOR", X, [], None, {}),
    "sin": ("SIN", X, [], None, {}),
    "cos": ("COS", X, [], None, {}),
    "relu_0_to_1": ("RELU_0_TO_1", X, [], None, {}),
    "log": ("LOG", X, [], None, {"positive": True}),
    "sqrt": ("SQRT", X, [], None, {"positive": True}),
    "rsqrt": ("RSQRT", X, [], None, {"positive": True}),
    "depth_to_space": (
        "DEPTH_TO_SPACE",
        [1, 4, 4, 8],
        [],
        ("DepthToSpaceOptions", {"BlockSize": 2}),
        {},
    ),
    "space_to_depth": ("SPACE_TO_DEPTH", X, [], ("SpaceToDepthOptions", {"BlockSize": 2}), {}),
}


def _litert_shapes(data: bytes, tmp_path) -> list[list[int]]:
    from ai_edge_litert.interpreter import Interpreter

    path = tmp_path / "probe.tflite"
    path.write_bytes(data)
    interp = Interpreter(model_path=str(path))
    interp.allocate_tensors()
    return [list(d["shape"]) for d in interp.get_output_details()]


def case_model(case: str, tmp_path) -> bytes:
    """Build the case; the output shapes come from a first LiteRT run."""
    op, x, consts, options, kwargs = CASES[case]
    kwargs = dict(kwargs)
    outputs = kwargs.pop("outputs", 1)
    kwargs.pop("positive", None)
    if "out" in kwargs:
        return one_op(op, x, kwargs.pop("out"), consts, options, **kwargs)
    if outputs == 1:
        probe = one_op(op, x, x, consts, options, **kwargs)
        return one_op(op, x, _litert_shapes(probe, tmp_path)[0], consts, options, **kwargs)
    return _multi_output(op, x, consts, options, outputs, tmp_path, kwargs.get("x_first", True))


def _multi_output(op, x, consts, options, outputs, tmp_path, x_first) -> bytes:
    def make(shapes):
        tensors = [T("x", x)] + [T(f"c{i}", list(c.shape), c) for i, c in enumerate(consts)]
        first = len(tensors)
        tensors += [T(f"y{i}", s) for i, s in enumerate(shapes)]
        outs = list(range(first, first + outputs))
        ins = [0, *range(1, first)] if x_first else [*range(1, first), 0]
        ops = [Op(op, ins, outs, options)]
        return build(tensors, ops, [0], outs)

    return make(_litert_shapes(make([[1]] * outputs), tmp_path))


def transform_and_deploy(data: bytes, tmp_path, name: str = "m", positive=False) -> None:
    """model_transform against LiteRT (strict tolerance), then F16 deploy
    bit-exact against the TPU interpreter."""
    from ai_edge_litert.interpreter import Interpreter

    path = tmp_path / f"{name}.tflite"
    path.write_bytes(data)
    interp = Interpreter(model_path=str(path))
    rng = np.random.default_rng(3)
    feed = {
        d["name"]: rng.standard_normal(d["shape"]).astype(np.float32)
        for d in interp.get_input_details()
    }
    if positive:  # LOG, SQRT, RSQRT
        feed = {k: np.abs(v) + 0.1 for k, v in feed.items()}
    np.savez(tmp_path / "in.npz", **feed)
    mlir = tmp_path / f"{name}.mlir"
    argv = [
        "--model_name",
        name,
        "--model_def",
        str(path),
        "--test_input",
        str(tmp_path / "in.npz"),
        "--mlir",
        str(mlir),
        "--tolerance",
        "0.99999,0.999",
    ]
    assert model_transform.run(argv) == 0
    argv = [
        "--mlir",
        str(mlir),
        "--chip",
        "bm1684x",
        "--quantize",
        "F16",
        "--test_input",
        str(tmp_path / f"{name}_in_f32.npz"),
        "--test_reference",
        str(tmp_path / f"{name}_top_outputs.npz"),
        "--tolerance",
        "0.99,0.9",
        "--model",
        str(tmp_path / f"{name}.bmodel"),
    ]
    assert model_deploy.run(argv) == 0  # fails unless bmodel == TPU interpreter bit for bit


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_op_against_litert_and_f16_deploy(case, tmp_path):
    positive = CASES[case][4].get("positive", False)
    transform_and_deploy(case_model(case, tmp_path), tmp_path, positive=positive)


def test_transpose_conv(tmp_path):
    """TRANSPOSE_CONV's operands are (output_shape, weights, x, bias)."""
    weights, bias = w(3, 3, 3, 4), w(3)
    for padding, out in ((0, [1, 16, 16, 3]), (1, [1, 17, 17, 3])):
        tensors = [
            T("x", X),
            T("shape", [4], i32(*out)),
            T("w", [3, 3, 3, 4], weights),
            T("b", [3], bias),
            T("y", out),
        ]
        opts = ("TransposeConvOptions", {"Padding": padding, "StrideW": 2, "StrideH": 2})
        data = build(tensors, [Op("TRANSPOSE_CONV", [1, 2, 0, 3], [4], opts)], [0], [4])
        transform_and_deploy(data, tmp_path, f"tconv{padding}")


def test_mediapipe_transpose_conv_bias(tmp_path):
    """MediaPipe's custom Convolution2DTransposeBias (raw padding/stride
    options); LiteRT runs it in its XNNPACK delegate."""
    tensors = [
        T("x", X),
        T("w", [3, 2, 2, 4], w(3, 2, 2, 4)),
        T("b", [3], w(3)),
        T("y", [1, 16, 16, 3]),
    ]
    op = Op(
        "CUSTOM",
        [0, 1, 2],
        [3],
        custom="Convolution2DTransposeBias",
        custom_options=struct.pack("<iii", 1, 2, 2),
    )
    transform_and_deploy(build(tensors, [op], [0], [3]), tmp_path)


def test_fp16_weights_behind_dequantize(tmp_path):
    """fp16 weight storage: DEQUANTIZE of a FLOAT16 constant folds to f32."""
    w16 = w(6, 3, 3, 4).astype(np.float16)
    tensors = [
        T("x", X),
        T("w16", [6, 3, 3, 4], w16),
        T("w", [6, 3, 3, 4]),
        T("b", [6], w(6)),
        T("y", [1, 8, 8, 6]),
    ]
    ops = [Op("DEQUANTIZE", [1], [2]), Op("CONV_2D", [0, 2, 3], [4], conv_opts(0, 1, 1))]
    transform_and_deploy(build(tensors, ops, [0], [4], deprecated_codes_only=True), tmp_path)
