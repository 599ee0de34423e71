"""Native rules of the resize, gather and group-norm families (Interp from a
linear Resize, Gather, InstanceNorm, GroupNorm): one-node ONNX models go
through tpuc (INT8 calibrated on their own input, F32/F16/BF16), native
codegen and the vendor runtime; INT8 outputs must equal the TPU
interpreter's bit for bit, float outputs reach a cosine of 0.99999."""

from __future__ import annotations

import numpy as np
import pytest
from native_models import native_vs_interp, within
from onnx import helper

import tpuc.passes.native.groupnorm  # noqa: F401  (registers its rules until rules.py lists it)

X = (np.random.default_rng(0).standard_normal([1, 4, 6, 6]) * 2).astype(np.float32)
G = np.random.default_rng(1).standard_normal([5, 6]).astype(np.float32)
C4 = np.random.default_rng(2).standard_normal(4).astype(np.float32)


def node(op_type, inputs, **attrs):
    """The one node of a case, its output y."""
    return helper.make_node(op_type, inputs, ["y"], **attrs)


E = np.zeros(0, np.float32)
I3 = np.random.default_rng(3).standard_normal([5, 6, 7]).astype(np.float32)


def resize(coord: str, size) -> tuple:
    out = (1, 4, *size)
    return (
        node("Resize", ["x", "r", "", "s"], mode="linear", coordinate_transformation_mode=coord),
        {"x": X}, out, [("r", E), ("s", np.array(out, np.int64))], 14, "tpu.Interp",
    )  # fmt: skip


CASES = {
    # name: (node, inputs, output shape, initializers, opset, TPU op, modes)
    "instance_norm": (
        node("InstanceNormalization", ["x", "s", "b"]), {"x": X}, X.shape,
        [("s", C4 + 1), ("b", C4)], 14, "tpu.InstanceNorm", ("INT8", "BF16"),
    ),
    "group_norm_per_group": (  # opset 18: one weight per group
        node("GroupNormalization", ["x", "s", "b"], num_groups=2), {"x": X}, X.shape,
        [("s", np.array([0.5, 2], np.float32)), ("b", np.array([0.1, -1], np.float32))], 18,
        "tpu.GroupNorm", ("F16", "BF16"),
    ),
    "gather": (
        node("Gather", ["x", "i"], axis=1), {"x": I3}, (5, 2, 2, 7),
        [("i", np.array([[5, -1], [0, 2]], np.int64))], 14, "tpu.Gather", ("INT8", "F32"),
    ),
    "resize_half_pixel": (*resize("half_pixel", (9, 4)), ("BF16",)),
    "resize_align_corners": (*resize("align_corners", (3, 5)), ("INT8",)),
    "resize_asymmetric": (*resize("asymmetric", (12, 12)), ("F32",)),
}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "mode"), [(name, mode) for name, case in CASES.items() for mode in case[-1]]
)
def test_native_matches_interpreter(tmp_path, name, mode):
    onnx_node, feeds, out_shape, inits, opset, kind, _ = CASES[name]
    got, expected, kinds, bound = native_vs_interp(
        tmp_path, [onnx_node], feeds, {"y": out_shape}, mode, inits, opset
    )
    assert kind in kinds
    within(got, expected, bound)  # model_deploy's check: INT8 bit for bit, F32 islands cosine
