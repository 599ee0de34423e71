"""Reduce, Arg and TopK kernels against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from interp_helpers import assert_close, rand, run_kernel, run_ort
from onnx import TensorProto

from tpuc.dialects import top

X = rand(2, 3, 4, 5, low=0.1, high=2.0)

MODES = top.ReduceOp.MODES


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([-1, 2], 0), ([], 1)])
def test_reduce(mode, axes, keepdims):
    inputs = [X, np.array(axes, np.int64)] if axes else [X]
    ref = run_ort(mode, inputs, dict(keepdims=keepdims))[0]
    ours = run_kernel(top.ReduceOp, [X], dict(mode=mode, axes=axes, keepdims=bool(keepdims)))
    assert_close(ours, ref)


@pytest.mark.parametrize("mode", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_arg(mode, last, keepdims):
    x = np.round(rand(3, 6, 4) * 2).astype(np.float32)  # ties on purpose
    attrs = dict(axis=1, keepdims=keepdims, select_last_index=last)
    ref = run_ort(mode, [x], attrs, output_types=[TensorProto.INT64])[0]
    ours = run_kernel(
        top.ArgOp,
        [x],
        dict(attrs, mode=mode, keepdims=bool(keepdims), select_last_index=bool(last)),
    )
    assert_close(ours, ref)


@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis", [-1, 1])
def test_topk(largest, axis):
    x = np.round(rand(3, 7, 6) * 3).astype(np.float32)  # ties on purpose
    k = 4
    values, indices = run_ort(
        "TopK",
        [x, np.array([k], np.int64)],
        dict(axis=axis, largest=largest),
        n_outputs=2,
        output_types=[TensorProto.FLOAT, TensorProto.INT64],
    )
    ours_v, ours_i = run_kernel(top.TopKOp, [x], dict(axis=axis, K=k, largest=bool(largest)))
    assert_close(ours_v, values)
    assert_close(ours_i, indices)


def test_every_reduce_mode_has_a_kernel():
    from tpuc.interp.top_ops.reduce import REDUCE

    assert set(REDUCE) == set(top.ReduceOp.MODES)
