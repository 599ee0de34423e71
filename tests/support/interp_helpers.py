"""Shared helpers of the kernel tests: build a TOP op on dummy operands, run
the same computation as a one-node ONNX model in onnxruntime, compare."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper
from xdsl.dialects.builtin import NoneType

from tpuc.dialects import top
from tpuc.dialects.base import tensor_type
from tpuc.interp.top_ops import KERNELS

OPSET = 18
RNG = np.random.default_rng(1234)


def rand(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def make_op(
    cls,
    n_operands: int,
    attrs: Mapping | None = None,
    none: Sequence[int] = (),
    result_names: Sequence[str] | None = None,
):
    """A TOP op whose operands are dummy `top.Weight` results (`top.None` at
    the positions in `none`)."""
    operands = []
    for i in range(n_operands):
        if i in none:
            operands.append(top.NoneOp.build(result_types=[NoneType()]).output)
        else:
            operands.append(
                top.WeightOp.make([], f"arg{i}", result_types=[tensor_type([1])]).output
            )
    return cls.make(operands, "out", attrs or {}, result_names=result_names)


def run_kernel(
    cls,
    args: Sequence[np.ndarray | None],
    attrs: Mapping | None = None,
    result_names: Sequence[str] | None = None,
):
    none = [i for i, a in enumerate(args) if a is None]
    op = make_op(cls, len(args), attrs, none, result_names)
    return KERNELS[cls](op, list(args))


def run_ort(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    attrs: Mapping | None = None,
    n_outputs: int = 1,
    opset: int = OPSET,
    domain: str = "",
    output_types: Sequence[int] | None = None,
) -> list[np.ndarray]:
    """Outputs of a one-node ONNX model; None inputs become empty names and
    integer arrays keep their dtype."""
    names, infos, feeds = [], [], {}
    for i, x in enumerate(inputs):
        if x is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        x = np.asarray(x)
        infos.append(
            helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape)
            )
        )
        feeds[name] = x
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, domain=domain or None, **(attrs or {}))
    types = output_types or [TensorProto.FLOAT] * n_outputs
    graph = helper.make_graph(
        [node],
        "one_node",
        infos,
        [helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, types, strict=True)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def assert_close(ours: np.ndarray, ref: np.ndarray, rtol: float = 1e-5) -> None:
    """Same shape; max abs diff within rtol of the reference's magnitude."""
    ref = np.asarray(ref).astype(np.float32)
    assert ours.dtype == np.float32, ours.dtype
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    scale = max(1.0, float(np.abs(ref).max())) if ref.size else 1.0
    err = float(np.abs(ours.astype(np.float64) - ref).max()) if ref.size else 0.0
    assert err <= rtol * scale, f"max abs diff {err:.3g} > {rtol * scale:.3g}"
