"""Shared helpers of the ONNX frontend tests: building small models with
onnx.helper, reading the converted module, and comparing it with
onnxruntime through the TOP interpreter."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation

RNG = np.random.default_rng(0)
F = TensorProto.FLOAT
INT_MAX = 2**63 - 1


def tensor(name: str, shape: Sequence[int | str] | None, dtype: int = F):
    return helper.make_tensor_value_info(name, dtype, shape)


def init(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def save(
    tmp_path: Path,
    nodes,
    inputs,
    outputs,
    inits=(),
    opset: int = 13,
    name: str = "m",
) -> str:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return str(path)


def body(module: ModuleOp) -> list[Operation]:
    func = next(iter(module.ops))
    return list(func.body.block.ops)


def ops(module: ModuleOp, kind: str) -> list[Operation]:
    return [op for op in body(module) if op.name == kind]


def kinds(module: ModuleOp) -> list[str]:
    return [op.name for op in body(module) if op.name not in ("top.Weight", "top.None")]


def attr(op: Operation, key: str):
    return op.value(key)  # type: ignore[attr-defined]


def all_static(module: ModuleOp) -> bool:
    for op in body(module):
        for r in op.results:
            if op.name != "top.None" and not isinstance(r.type, TensorType):
                return False
    return True


def assert_shape_rules_agree(module: ModuleOp) -> None:
    """The result types the frontend set (mostly from ONNX's own shape
    inference) are what tpuc's shape rules derive from the TOP attributes:
    a check of the attribute translation independent of the interpreter."""
    from tpuc.passes.shape_infer import infer_op_shapes

    for op in body(module):
        before = [r.type for r in op.results]
        infer_op_shapes(op)
        assert [r.type for r in op.results] == before, f"{op.name} {op.attributes.get('name')}"


def check_numerics(path: str, module: ModuleOp, weights, feeds=None, atol=1e-5) -> None:
    """Run the module with the TOP interpreter and compare with onnxruntime."""
    from tpuc.interp import top_interpreter as interp

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    if feeds is None:
        feeds = {
            i.name: RNG.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(
                np.float32
            )
            for i in sess.get_inputs()
        }
    want = sess.run(None, feeds)
    got = interp.run_top(module, weights, feeds)
    for out, ref in zip(sess.get_outputs(), want, strict=True):
        np.testing.assert_allclose(got[out.name], ref, rtol=1e-4, atol=atol, err_msg=out.name)
