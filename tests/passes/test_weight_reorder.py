"""weight-reorder (passes/weight_reorder.py): conv filters to [1, oc, ic/g,
kh·kw] with identical bytes, INT8 Conv2D/Deconv coefficients merged into
[1, oc, 1, 3] int32 = [bias, multiplier, rshift] (values checked by hand on a
written module, and against the lowered operands on a real network in INT8
with an int8 and a float epilogue), float modes untouched apart from the
filter, the store keeping only live weights, and the state checks."""

from __future__ import annotations

import numpy as np
import pytest
from final_models import lowered
from xdsl.dialects.builtin import IntegerType

from tpuc.base.errors import TpucError
from tpuc.dialects import top, tpu
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.ir.context import make_context
from tpuc.ir.core import main_function
from tpuc.ir.module_io import module_attr, parse_module
from tpuc.ir.weights import WeightStore, attach_weights, live_weights
from tpuc.passes.registry import get_pass

Q_IN = "!quant.uniform<i8:f32, 0.01>"
Q_OUT = "!quant.uniform<i8:f32, 0.02>"


def reorder(module, store: WeightStore | None = None):
    if store is not None:
        attach_weights(module, store)
    get_pass("weight-reorder")().apply(make_context(), module)
    module.verify()
    return module


def conv_ops(module) -> list:
    body = main_function(module).body.block.ops
    return [op for op in body if isinstance(op, tpu.Conv2DOp | tpu.DeconvOp)]


def weight_name(op, index: int) -> str:
    owner = op.operands[index].owner
    return "None" if isinstance(owner, top.NoneOp) else owner.names[0]


def conv_text(bias: str, bias_type: str, mult, shift, out: str = Q_OUT) -> str:
    """One INT8 1x1 conv over x[1,2,2,2] with 3 output channels; the filter
    and bias come from the weight file."""
    return f"""
builtin.module attributes {{module.state = "TPU_LOWERED"}} {{
  func.func @main(%arg0: tensor<1x2x2x2x{Q_IN}>) -> tensor<1x3x2x2x{out}> {{
    %x = "top.Input"(%arg0) {{name = "x"}} : (tensor<1x2x2x2x{Q_IN}>) -> tensor<1x2x2x2x{Q_IN}>
    %w = "top.Weight"() {{name = "w"}} : () -> tensor<3x2x1x1xsi8>
    {bias}
    %y = "tpu.Conv2D"(%x, %w, %b) {{name = "y", kernel_shape = [1, 1], multiplier = {mult}, rshift = {shift}}} : (tensor<1x2x2x2x{Q_IN}>, tensor<3x2x1x1xsi8>, {bias_type}) -> tensor<1x3x2x2x{out}>
    func.return %y : tensor<1x3x2x2x{out}>
  }}
}}
"""  # noqa: E501


FILTER = np.arange(-3, 3, dtype=np.int8).reshape(3, 2, 1, 1)


def test_per_channel_bias_multiplier_rshift_merged_by_channel():
    bias = '%b = "top.Weight"() {name = "b"} : () -> tensor<3xi32>'
    module = parse_module(conv_text(bias, "tensor<3xi32>", "[11, 22, 33]", "[1, 2, 3]"))
    store = WeightStore(w=FILTER, b=np.array([-100, 0, 2**31 - 1], np.int32))
    reorder(module, store)
    (conv,) = conv_ops(module)
    merged = store[weight_name(conv, 2)]
    assert weight_name(conv, 2) == "y_coeff_merged" and merged.dtype == np.int32
    assert merged.shape == (1, 3, 1, 3)
    assert merged.reshape(3, 3).tolist() == [[-100, 11, 1], [0, 22, 2], [2**31 - 1, 33, 3]]
    t = conv.operands[2].type
    assert isinstance(t.element_type, IntegerType) and t.get_shape() == (1, 3, 1, 3)
    assert conv.value("coeff_merged") is True
    assert conv.value("multiplier") == [11, 22, 33]  # kept for readers of the IR
    # filter: same int8 bytes, [1, oc, ic, kh*kw]
    filt = store[weight_name(conv, 1)]
    assert weight_name(conv, 1) == "y_filter_reordered"
    assert filt.shape == (1, 3, 2, 1) and filt.dtype == np.int8
    assert filt.tobytes() == FILTER.tobytes()
    assert set(store) == {"y_filter_reordered", "y_coeff_merged"}  # w and b erased


def test_no_bias_and_per_tensor_requant_are_repeated():
    none = '%b = "top.None"() : () -> none'
    module = parse_module(conv_text(none, "none", "[1234567]", "[-2]"))
    store = WeightStore(w=FILTER)
    reorder(module, store)
    (conv,) = conv_ops(module)
    assert store["y_coeff_merged"].reshape(3, 3).tolist() == [[0, 1234567, -2]] * 3


def test_float_epilogue_is_merged_too():
    """Quantized input, f32 result: the multipliers dequantize instead."""
    bias = '%b = "top.Weight"() {name = "b"} : () -> tensor<3xi32>'
    text = conv_text(bias, "tensor<3xi32>", "[5]", "[40]", out="f32")
    module = parse_module(text)
    store = WeightStore(w=FILTER, b=np.array([7, 8, 9], np.int32))
    reorder(module, store)
    assert store["y_coeff_merged"].reshape(3, 3).tolist() == [[7, 5, 40], [8, 5, 40], [9, 5, 40]]


def test_bad_coefficients_fail_with_one_line():
    bias = '%b = "top.Weight"() {name = "b"} : () -> tensor<3xi32>'
    module = parse_module(conv_text(bias, "tensor<3xi32>", "[1, 2]", "[0]"))
    with pytest.raises(TpucError, match="tpu.Conv2D 'y': multiplier has 2 values for 3 channels"):
        reorder(module, WeightStore(w=FILTER, b=np.zeros(3, np.int32)))
    module = parse_module(conv_text(bias, "tensor<3xi32>", "[1]", "[0]"))
    with pytest.raises(TpucError, match="weight 'b' has no data"):
        reorder(module, WeightStore(w=FILTER))


def test_states():
    none = '%b = "top.None"() : () -> none'
    text = conv_text(none, "none", "[1]", "[0]")
    for state, message in (
        ("TOP_F32", "needs TPU_LOWERED; run convert-top-to-tpu"),
        ("TPU_DIVIDED", "needs TPU_LOWERED; it has already gone past this step"),
    ):
        module = parse_module(text.replace("TPU_LOWERED", state))
        with pytest.raises(
            TpucError, match=f"weight-reorder: module is in state {state}, {message}"
        ):
            reorder(module, WeightStore(w=FILTER))
    module = parse_module(text.replace('attributes {module.state = "TPU_LOWERED"} ', ""))
    reorder(module, WeightStore(w=FILTER))  # a snippet without a state
    assert module_attr(module, "state") == "TPU_REORDERED"


# --- real networks --------------------------------------------------------------------------


@pytest.mark.parametrize("chip", ["bm1684x", "cv183x"])
def test_lowered_int8_network(tmp_path, chip):
    module, store, _ = lowered(tmp_path, chip, "INT8")
    replaced = {weight_name(c, i) for c in conv_ops(module) for i in (1, 2)} - {"None"}
    before = {}
    for conv in conv_ops(module):
        bias = None if isinstance(conv.operands[2].owner, top.NoneOp) else weight_name(conv, 2)
        before[conv.names[0]] = (
            store[weight_name(conv, 1)].copy(),
            None if bias is None else store[bias].copy(),
            conv.value("multiplier"),
            conv.value("rshift"),
            conv.results[0].type.element_type,
        )
    reorder(module, store)
    assert module_attr(module, "state") == "TPU_REORDERED"
    float_epilogue = 0
    for conv in conv_ops(module):
        filt, bias, mult, shift, out = before[conv.names[0]]
        oc = filt.shape[0]
        new_filter = store[weight_name(conv, 1)]
        assert new_filter.shape == (1, oc, filt.shape[1], filt.shape[2] * filt.shape[3])
        assert new_filter.tobytes() == filt.tobytes() and new_filter.dtype == filt.dtype
        merged = store[weight_name(conv, 2)].reshape(oc, 3)
        expected_bias = np.zeros(oc) if bias is None else bias
        np.testing.assert_array_equal(merged[:, 0], expected_bias)
        np.testing.assert_array_equal(merged[:, 1], np.broadcast_to(mult, oc))
        np.testing.assert_array_equal(merged[:, 2], np.broadcast_to(shift, oc))
        float_epilogue += not isinstance(out, UniformQuantizedType)
    # bm1684x: c2, read by TopK in f32, and c3: its Add follows the Reshape
    # into the f32 Softmax (an elementwise op read only by float layers is
    # float itself, passes/lowering/convert.py)
    assert float_epilogue == (2 if chip == "bm1684x" else 0)
    assert not replaced & set(store)
    assert not replaced & set(live_weights(module, store))


def test_lowered_float_network_reshapes_filters_only(tmp_path):
    module, store, _ = lowered(tmp_path, "bm1684x", "F16")
    biases = {c.names[0]: c.operands[2] for c in conv_ops(module)}
    filters = {c.names[0]: store[weight_name(c, 1)].copy() for c in conv_ops(module)}
    replaced = {weight_name(c, 1) for c in conv_ops(module)}
    reorder(module, store)
    for conv in conv_ops(module):
        assert conv.value("coeff_merged") is None
        assert conv.operands[2] is biases[conv.names[0]]
        filt = filters[conv.names[0]]
        new = store[weight_name(conv, 1)]
        assert new.dtype == np.float16 and new.tobytes() == filt.tobytes()
        assert new.shape == (1, filt.shape[0], filt.shape[1], filt.shape[2] * filt.shape[3])
    assert not replaced & set(store)


def matmul_text(mult: str, shift: str) -> str:
    """One INT8 matmul x[2,4] @ w[4,3] (+ bias b[3]) with the given requant."""
    return f"""
builtin.module attributes {{module.state = "TPU_LOWERED"}} {{
  func.func @main(%arg0: tensor<2x4x{Q_IN}>) -> tensor<2x3x{Q_OUT}> {{
    %x = "top.Input"(%arg0) {{name = "x"}} : (tensor<2x4x{Q_IN}>) -> tensor<2x4x{Q_IN}>
    %w = "top.Weight"() {{name = "w"}} : () -> tensor<4x3xsi8>
    %b = "top.Weight"() {{name = "b"}} : () -> tensor<3xi32>
    %y = "tpu.MatMul"(%x, %w, %b) {{name = "y", multiplier = {mult}, rshift = {shift}}} : (tensor<2x4x{Q_IN}>, tensor<4x3xsi8>, tensor<3xi32>) -> tensor<2x3x{Q_OUT}>
    func.return %y : tensor<2x3x{Q_OUT}>
  }}
}}
"""  # noqa: E501


def test_matmul_per_column_requant_merged_per_tensor_left_alone():
    weights = {"w": np.ones((4, 3), np.int8), "b": np.array([5, 6, 7], np.int32)}
    store = WeightStore(**weights)
    module = reorder(parse_module(matmul_text("[11, 22, 33]", "[1, 2, 3]")), store)
    (mm,) = [op for op in main_function(module).body.block.ops if isinstance(op, tpu.MatMulOp)]
    assert weight_name(mm, 2) == "y_coeff_merged" and mm.value("coeff_merged") is True
    assert store["y_coeff_merged"].reshape(3, 3).tolist() == [[5, 11, 1], [6, 22, 2], [7, 33, 3]]
    module = reorder(parse_module(matmul_text("[11]", "[1]")), WeightStore(**weights))
    (mm,) = [op for op in main_function(module).body.block.ops if isinstance(op, tpu.MatMulOp)]
    assert weight_name(mm, 2) == "b" and mm.value("coeff_merged") is None
