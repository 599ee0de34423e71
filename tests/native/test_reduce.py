"""Native rules of the reduce family (tpu.Reduce, tpu.Arg): one-node ONNX
models go through tpuc (INT8 calibrated on their own input, F32/F16/BF16),
native codegen and the vendor runtime; INT8 outputs must equal the TPU
interpreter's bit for bit, float outputs reach a cosine of 0.99999."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import matches, native_vs_interp
from onnx import TensorProto, helper

RNG = np.random.default_rng(3)
INPUTS = {
    "x": RNG.standard_normal([2, 8, 6, 10]).astype(np.float32),
    # sums past 16 bits: 1024 values near 127 per channel
    "big": (RNG.integers(90, 128, [1, 16, 32, 32]) * 0.05).astype(np.float32),
    "pos": RNG.uniform(0.7, 1.3, [1, 4, 6, 6]).astype(np.float32),
}


def graph_of(names: list[str]) -> tuple[list, list, list, dict]:
    """One node per case of CASES named, each its own output:
    (nodes, outputs, initializers, feeds)."""
    nodes, outputs, inits, used = [], [], [], set()
    for name in names:
        op_type, x, out_shape, axes, attrs = CASES[name]
        inputs = [x]
        used.add(x)
        if axes is not None:  # ReduceSum's axes input (opset 13)
            inputs.append(f"{name}_axes")
            inits.append((inputs[-1], np.asarray(axes, np.int64)))
        nodes.append(helper.make_node(op_type, inputs, [name], **attrs))
        out_type = TensorProto.INT64 if op_type.startswith("Arg") else TensorProto.FLOAT
        outputs.append(helper.make_tensor_value_info(name, out_type, out_shape))
    feeds = {k: v for k, v in INPUTS.items() if k in used}
    return nodes, outputs, inits, feeds


CASES = {
    # output name: (op, input, output shape, axes input (ReduceSum), attributes)
    "sum_hw_big": ("ReduceSum", "big", [1, 16, 1, 1], [2, 3], {"keepdims": 1}),
    "sum_c": ("ReduceSum", "x", [2, 6, 10], [1], {"keepdims": 0}),
    "sum_all": ("ReduceSum", "x", [], None, {"keepdims": 0}),
    "mean_hw": ("ReduceMean", "x", [2, 8, 1, 1], None, {"axes": [2, 3], "keepdims": 1}),
    "mean_c_w": ("ReduceMean", "x", [2, 1, 6, 1], None, {"axes": [1, 3], "keepdims": 1}),
    "max_c": ("ReduceMax", "x", [2, 6, 10], None, {"axes": [1], "keepdims": 0}),
    "min_c_w": ("ReduceMin", "x", [2, 6], None, {"axes": [1, 3], "keepdims": 0}),
    "l2_hw": ("ReduceL2", "x", [2, 8, 1, 1], None, {"axes": [2, 3], "keepdims": 1}),
    "prod_h": ("ReduceProd", "pos", [1, 4, 1, 6], None, {"axes": [2], "keepdims": 1}),
    # innermost, 6 long: the chip's product is wrong there, transposed first
    "prod_w": ("ReduceProd", "pos", [1, 4, 6, 1], None, {"axes": [3], "keepdims": 1}),
    "argmax_c": ("ArgMax", "x", [2, 1, 6, 10], None, {"axis": 1, "keepdims": 1}),
    "argmin_w": ("ArgMin", "x", [2, 8, 6], None, {"axis": 3, "keepdims": 0}),
}  # fmt: skip
INTEGER = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin")  # bit-exact in INT8
MODES = {
    "INT8": ["sum_hw_big", "sum_c", "sum_all", "mean_hw", "mean_c_w", "max_c", "min_c_w",
             "argmax_c", "prod_w"],
    "INT8_ASYM": ["sum_hw_big", "mean_c_w", "max_c"],
    "F32": list(CASES),
    "F16": ["sum_c", "mean_c_w", "max_c", "l2_hw", "prod_w", "argmin_w"],
    "BF16": ["sum_c", "mean_c_w", "min_c_w", "l2_hw", "prod_h", "argmin_w"],
}  # fmt: skip


@pytest.mark.parametrize("mode", list(MODES))
def test_reductions(tmp_path, mode):
    """Every case of the mode in one model (one compile, one run)."""
    names = MODES[mode]
    nodes, outputs, inits, feeds = graph_of(names)
    lowered = "INT8" if mode == "INT8_ASYM" else mode
    asymmetric = mode == "INT8_ASYM"
    got, expected, kinds, _ = native_vs_interp(
        tmp_path, nodes, feeds, outputs, lowered, inits, opset=13, asymmetric=asymmetric
    )
    assert "tpu.Reduce" in kinds
    for name in names:
        op_type = CASES[name][0]
        exact = op_type.startswith("Arg") or (lowered == "INT8" and op_type in INTEGER)
        matches({name: got[name]}, {name: expected[name]}, "INT8" if exact else "F32")
