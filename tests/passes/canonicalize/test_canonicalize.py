"""TOP canonicalize keeps results: small graphs with random weights are run
through a numpy reference written here (independent of tpuc.interp) before
and after the pass; the reference itself is checked against onnxruntime."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from xdsl.dialects.builtin import FunctionType, ModuleOp, NoneType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region, SSAValue

from tpuc.dialects import top
from tpuc.dialects.base import TensorOp, shape_of, tensor_type
from tpuc.ir.weights import WeightStore, attach_weights, live_weights, read_weight
from tpuc.passes.canonicalize import CanonicalizePass, canonicalize
from tpuc.passes.registry import get_pass

# --- building graphs ------------------------------------------------------------


class Graph:
    """A one-function TOP module under construction, weights in a store."""

    def __init__(self, *input_shapes: Sequence[int]):
        self.block = Block(arg_types=[tensor_type(s) for s in input_shapes])
        self.store = WeightStore()
        self.inputs = [
            self.add(top.InputOp.make([arg], f"in{i}", result_types=[arg.type]))
            for i, arg in enumerate(self.block.args)
        ]

    def add(self, op: TensorOp) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def weight(self, name: str, array: np.ndarray) -> SSAValue:
        self.store[name] = np.asarray(array, dtype=np.float32)
        op = top.WeightOp.make([], name, result_types=[tensor_type(array.shape)])
        return self.add(op)

    def none(self) -> SSAValue:
        op = top.NoneOp.build(result_types=[NoneType()])
        self.block.add_op(op)
        return op.output

    def op(self, cls, operands, name: str, out_shape, **attrs) -> SSAValue:
        return self.add(cls.make(list(operands), name, attrs, [tensor_type(out_shape)]))

    def module(self, *outputs: SSAValue) -> ModuleOp:
        self.block.add_op(ReturnOp(*outputs))
        signature = FunctionType.from_lists(
            [a.type for a in self.block.args], [o.type for o in outputs]
        )
        module = ModuleOp([FuncOp("main", signature, Region(self.block))])
        attach_weights(module, self.store)
        return module


# --- the numpy reference ------------------------------------------------------------

REFERENCE: dict[type, Callable] = {}


def ref(*classes):
    def register(fn):
        for cls in classes:
            REFERENCE[cls] = fn
        return fn

    return register


def conv2d(x, w, b, strides, pads, dilations, group):
    """Direct convolution by kernel position: einsum over channel groups."""
    n, ic = x.shape[:2]
    oc, icg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, group, oc // group, oh, ow))
    wg = w.reshape(group, oc // group, icg, kh, kw)
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, :, ky * dh : ky * dh + sh * (oh - 1) + 1 : sh]
            patch = patch[:, :, :, kx * dw : kx * dw + sw * (ow - 1) + 1 : sw]
            patch = patch.reshape(n, group, icg, oh, ow)
            out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, ky, kx])
    out = out.reshape(n, oc, oh, ow)
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def channel(v, rank):
    return v.reshape((1, -1) + (1,) * (rank - 2))


@ref(top.ConvOp)
def _conv(op, x, w, b):
    return conv2d(
        x,
        w,
        b,
        op.value("strides") or [1, 1],
        op.value("pads") or [0, 0, 0, 0],
        op.value("dilations") or [1, 1],
        op.value("group"),
    )


@ref(top.BatchNormOp)
def _bn(op, x, mean, var, gamma, beta):
    y = (x - channel(mean, x.ndim)) / np.sqrt(channel(var, x.ndim) + op.value("epsilon"))
    gamma = np.ones_like(mean) if gamma is None else gamma
    beta = np.zeros_like(mean) if beta is None else beta
    return y * channel(gamma, x.ndim) + channel(beta, x.ndim)


@ref(top.ScaleOp)
def _scale(op, x, s, b):
    y = x * channel(s, x.ndim)
    return y if b is None else y + channel(b, x.ndim)


def relu(x, limit):
    return np.clip(x, 0, limit) if limit is not None and limit >= 0 else np.maximum(x, 0)


REFERENCE[top.ReluOp] = lambda op, x: relu(x, op.value("relu_limit"))
REFERENCE[top.ClipOp] = lambda op, x: np.clip(x, op.value("min"), op.value("max"))
REFERENCE[top.SigmoidOp] = lambda op, x: 1 / (1 + np.exp(-x))
REFERENCE[top.MulConstOp] = lambda op, x: x * op.value("const_val")
REFERENCE[top.AddConstOp] = lambda op, x: x + op.value("const_val")
REFERENCE[top.MulOp] = lambda op, a, b: a * b
REFERENCE[top.AddOp] = lambda op, a, b: a + b
REFERENCE[top.PermuteOp] = lambda op, x: np.transpose(x, op.value("order"))
for _cls in (top.ReshapeOp, top.FlattenOp, top.SqueezeOp, top.UnsqueezeOp):
    REFERENCE[_cls] = lambda op, x: x.reshape(shape_of(op.results[0]))


def run_reference(module: ModuleOp, *inputs: np.ndarray) -> list[np.ndarray]:
    """Evaluate the function in float64, op by op."""
    func = next(op for op in module.walk() if isinstance(op, FuncOp))
    values: dict[SSAValue, np.ndarray | None] = dict(zip(func.body.block.args, inputs, strict=True))
    for op in func.body.block.ops:
        if isinstance(op, ReturnOp):
            return [values[v] for v in op.operands]
        if isinstance(op, top.InputOp):
            values[op.output] = values[op.input]
        elif isinstance(op, top.WeightOp):
            values[op.output] = read_weight(op).astype(np.float64)
        elif isinstance(op, top.NoneOp):
            values[op.output] = None
        else:
            y = REFERENCE[type(op)](op, *(values[v] for v in op.operands))
            if op.value("do_relu"):
                y = relu(y, op.value("relu_limit"))
            values[op.results[0]] = y
    raise AssertionError("no return")


def op_kinds(module: ModuleOp) -> list[str]:
    return [op.name for op in module.walk() if op.name.startswith("top.")]


def check_preserved(module: ModuleOp, *inputs: np.ndarray) -> list[np.ndarray]:
    """Canonicalize and compare against the result before; returns it."""
    before = run_reference(module, *inputs)
    canonicalize(module)
    module.verify()
    after = run_reference(module, *inputs)
    for b, a in zip(before, after, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    names = [n for op in module.walk() if isinstance(op, TensorOp) for n in op.names]
    assert len(names) == len(set(names)), "tensor names must stay unique"
    return before


# --- fusions --------------------------------------------------------------------


def conv_bn_relu(rng: np.random.Generator, group: int = 1, with_bias: bool = True):
    """Conv(3x3, stride 2, pad 1) -> BatchNorm -> Relu on a 1x4x7x7 input."""
    g = Graph((1, 4, 7, 7))
    w = rng.standard_normal((8, 4 // group, 3, 3))
    b = rng.standard_normal(8) if with_bias else None
    stats = {
        "mean": rng.standard_normal(8),
        "var": rng.uniform(0.5, 2.0, 8),
        "gamma": rng.standard_normal(8),
        "beta": rng.standard_normal(8),
    }
    conv_attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], group=group)
    bias = g.weight("b", b) if b is not None else g.none()
    conv = g.op(
        top.ConvOp, [g.inputs[0], g.weight("w", w), bias], "conv", (1, 8, 4, 4), **conv_attrs
    )
    bn_operands = [conv] + [g.weight(k, v) for k, v in stats.items()]
    bn = g.op(top.BatchNormOp, bn_operands, "bn", (1, 8, 4, 4), epsilon=1e-3)
    out = g.op(top.ReluOp, [bn], "relu", (1, 8, 4, 4))
    return g.module(out), g.store, (w, b, stats, conv_attrs)


def onnx_conv_bn_relu(w, b, stats, conv_attrs) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in stats.items()]
    inits.append(numpy_helper.from_array(w.astype(np.float32), "w"))
    conv_inputs = ["x", "w"]
    if b is not None:
        inits.append(numpy_helper.from_array(b.astype(np.float32), "b"))
        conv_inputs.append("b")
    nodes = [
        helper.make_node("Conv", conv_inputs, ["c"], **conv_attrs),
        helper.make_node(
            "BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["n"], epsilon=1e-3
        ),
        helper.make_node("Relu", ["n"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 7, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("group, with_bias", [(1, True), (2, False), (4, True)])
def test_conv_bn_relu_fuses_into_one_conv(group: int, with_bias: bool):
    rng = np.random.default_rng(group)
    module, store, params = conv_bn_relu(rng, group, with_bias)
    x = rng.standard_normal((1, 4, 7, 7))
    before = check_preserved(module, x)
    session = ort.InferenceSession(onnx_conv_bn_relu(*params).SerializeToString())
    (expected,) = session.run(None, {"x": x.astype(np.float32)})
    np.testing.assert_allclose(before[0], expected, rtol=1e-4, atol=1e-4)
    assert op_kinds(module) == ["top.Input", "top.Weight", "top.Weight", "top.Conv"]
    conv = next(op for op in module.walk() if isinstance(op, top.ConvOp))
    assert conv.tensor_name.data == "relu" and conv.value("do_relu")
    assert sorted(live_weights(module, store)) == ["bn_bias", "bn_filter"]


def test_conv_mul_add_clip_fold_into_conv():
    """Conv -> Mul [C,1,1] -> Add [1,C,1,1] -> Clip(0, 6): one Conv with ReLU6."""
    rng = np.random.default_rng(7)
    g = Graph((2, 3, 5, 5))
    shape = (2, 4, 5, 5)
    conv = g.op(
        top.ConvOp,
        [g.inputs[0], g.weight("w", rng.standard_normal((4, 3, 1, 1))), g.none()],
        "conv",
        shape,
        kernel_shape=[1, 1],
    )
    mul = g.op(top.MulOp, [conv, g.weight("m", rng.standard_normal((4, 1, 1)))], "mul", shape)
    add = g.op(top.AddOp, [g.weight("a", rng.standard_normal((1, 4, 1, 1))), mul], "add", shape)
    out = g.op(top.ClipOp, [add], "clip", shape, min=0.0, max=6.0)
    module = g.module(out)
    check_preserved(module, 3 * rng.standard_normal((2, 3, 5, 5)))
    assert op_kinds(module) == ["top.Input", "top.Weight", "top.Weight", "top.Conv"]
    conv_op = next(op for op in module.walk() if isinstance(op, top.ConvOp))
    assert conv_op.value("relu_limit") == 6.0 and conv_op.tensor_name.data == "clip"


def test_scalar_constants_and_chains():
    """Mul/Add by one-element weights -> MulConst/AddConst -> merged -> into Conv."""
    rng = np.random.default_rng(3)
    g = Graph((1, 2, 4, 4))
    shape = (1, 2, 4, 4)
    conv = g.op(
        top.ConvOp,
        [
            g.inputs[0],
            g.weight("w", rng.standard_normal((2, 2, 3, 3))),
            g.weight("b", rng.standard_normal(2)),
        ],
        "conv",
        shape,
        kernel_shape=[3, 3],
        pads=[1, 1, 1, 1],
    )
    a = g.op(top.MulOp, [conv, g.weight("two", np.array([2.0]))], "m1", shape)
    b = g.op(top.MulConstOp, [a], "m2", shape, const_val=-0.5)
    c = g.op(top.AddOp, [b, g.weight("k", np.array([[0.25]]))], "a1", shape)
    d = g.op(top.AddConstOp, [c], "a2", shape, const_val=1.0)
    module = g.module(d)
    check_preserved(module, rng.standard_normal(shape))
    assert op_kinds(module) == ["top.Input", "top.Weight", "top.Weight", "top.Conv"]


def test_batchnorm_without_conv_becomes_scale():
    rng = np.random.default_rng(5)
    g = Graph((2, 3, 4))
    stats = [
        rng.standard_normal(3),
        rng.uniform(0.5, 2, 3),
        rng.standard_normal(3),
        rng.standard_normal(3),
    ]
    x = g.op(top.SigmoidOp, [g.inputs[0]], "sig", (2, 3, 4))
    bn = g.op(
        top.BatchNormOp,
        [x] + [g.weight(f"s{i}", s) for i, s in enumerate(stats)],
        "bn",
        (2, 3, 4),
        do_relu=True,
    )
    module = g.module(bn)
    check_preserved(module, rng.standard_normal((2, 3, 4)))
    assert "top.Scale" in op_kinds(module) and "top.BatchNorm" not in op_kinds(module)


def onnx_bn_mul_add_relu(stats, m, a) -> onnx.ModelProto:
    """densenet121's export: Sigmoid, BatchNormalization, Mul [C,1,1], Add [C,1,1], Relu."""
    names = ("gamma", "beta", "mean", "var")
    inits = [
        numpy_helper.from_array(np.asarray(v, np.float32), k)
        for k, v in zip(names, stats, strict=True)
    ]
    inits += [
        numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in (("m", m), ("a", a))
    ]
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("BatchNormalization", ["s", *names], ["n"], epsilon=1e-5),
        helper.make_node("Mul", ["n", "m"], ["p"]),
        helper.make_node("Add", ["p", "a"], ["q"]),
        helper.make_node("Relu", ["q"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_batchnorm_mul_add_relu_become_one_scale():
    """BatchNorm -> Mul [C,1,1] -> Add [C,1,1] -> Relu (not after a Conv) is
    one Scale with the ReLU, named like the last op, as TPU-MLIR folds it."""
    rng = np.random.default_rng(11)
    shape = (1, 6, 3, 3)
    stats = [rng.standard_normal(6), rng.standard_normal(6)]
    stats += [rng.standard_normal(6), rng.uniform(0.5, 2, 6)]
    m, a = rng.standard_normal((6, 1, 1)), rng.standard_normal((6, 1, 1))
    g = Graph(shape)
    x = g.op(top.SigmoidOp, [g.inputs[0]], "sig", shape)
    gamma, beta, mean, var = (g.weight(f"s{i}", s) for i, s in enumerate(stats))
    bn = g.op(top.BatchNormOp, [x, mean, var, gamma, beta], "bn", shape, epsilon=1e-5)
    mul = g.op(top.MulOp, [bn, g.weight("m", m)], "mul", shape)
    add = g.op(top.AddOp, [mul, g.weight("a", a)], "add", shape)
    out = g.op(top.ReluOp, [add], "relu", shape)
    module = g.module(out)
    x_in = 3 * rng.standard_normal(shape)
    before = check_preserved(module, x_in)
    session = ort.InferenceSession(onnx_bn_mul_add_relu(stats, m, a).SerializeToString())
    (expected,) = session.run(None, {"x": x_in.astype(np.float32)})
    np.testing.assert_allclose(before[0], expected, rtol=1e-5, atol=1e-5)
    assert op_kinds(module) == ["top.Input", "top.Sigmoid", "top.Weight", "top.Weight", "top.Scale"]
    scale = next(op for op in module.walk() if isinstance(op, top.ScaleOp))
    assert scale.tensor_name.data == "relu" and scale.value("do_relu")


def test_scale_consts_fold_and_shared_scale_stays():
    """Scale -> MulConst -> AddConst fold into the Scale; a Scale that a second
    op also reads, or one with a fused ReLU, takes nothing more."""
    rng = np.random.default_rng(12)
    shape = (2, 4, 5)
    g = Graph(shape)
    x = g.op(top.SigmoidOp, [g.inputs[0]], "sig", shape)
    s = g.op(top.ScaleOp, [x, g.weight("s", rng.standard_normal((1, 4, 1))), g.none()], "sc", shape)
    k = g.op(top.MulConstOp, [s], "k", shape, const_val=-1.5)
    folded = g.op(top.AddConstOp, [k], "folded", shape, const_val=0.25)
    r = g.op(
        top.ScaleOp,
        [
            x,
            g.weight("r", rng.standard_normal((4, 1))),
            g.weight("rb", rng.standard_normal((4, 1))),
        ],
        "relu_scale",
        shape,
        do_relu=True,
    )
    after_relu = g.op(top.MulConstOp, [r], "after_relu", shape, const_val=2.0)
    shared = g.op(
        top.ScaleOp, [x, g.weight("t", rng.standard_normal((4, 1))), g.none()], "sh", shape
    )
    kept = g.op(top.AddConstOp, [shared], "kept", shape, const_val=1.0)
    module = g.module(folded, after_relu, kept, shared)
    check_preserved(module, rng.standard_normal(shape))
    kinds = op_kinds(module)
    assert kinds.count("top.Scale") == 3 and kinds.count("top.AddConst") == 1
    assert kinds.count("top.MulConst") == 1


def test_shared_and_returned_tensors_are_kept():
    """A filter shared with another Conv is never changed in place, and a Conv
    whose output is returned keeps it (its ReLU is not fused)."""
    rng = np.random.default_rng(11)
    g = Graph((1, 2, 3, 3))
    shape = (1, 2, 3, 3)
    w = g.weight("w", rng.standard_normal((2, 2, 1, 1)))
    c1 = g.op(top.ConvOp, [g.inputs[0], w, g.none()], "c1", shape, kernel_shape=[1, 1])
    m1 = g.op(top.MulConstOp, [c1], "m1", shape, const_val=3.0)
    c2 = g.op(top.ConvOp, [g.inputs[0], w, g.none()], "c2", shape, kernel_shape=[1, 1])
    r2 = g.op(top.ReluOp, [c2], "r2", shape)
    module = g.module(m1, c2, r2)
    check_preserved(module, rng.standard_normal(shape))
    names = {op.tensor_name.data: op for op in module.walk() if isinstance(op, TensorOp)}
    assert {"m1", "c2", "r2", "w"} <= set(names)
    assert not names["c2"].value("do_relu")
    assert names["c2"].operands[1].op is names["w"]


def test_reshape_chain_and_identities():
    rng = np.random.default_rng(13)
    g = Graph((1, 2, 3, 4))
    p = g.op(top.PermuteOp, [g.inputs[0]], "perm", (1, 2, 3, 4), order=[0, 1, 2, 3])
    f = g.op(top.FlattenOp, [p], "flat", (1, 24), start_dim=1)
    s = g.op(top.SqueezeOp, [f], "sq", (24,), axes=[0])
    u = g.op(top.UnsqueezeOp, [s], "unsq", (24, 1), axes=[-1])
    r = g.op(top.ReshapeOp, [u], "r", (4, 6), shape=[4, -1])
    same = g.op(top.ReshapeOp, [r], "same", (4, 6), shape=[4, 6])
    out = g.op(top.SigmoidOp, [same], "sig", (4, 6))
    module = g.module(out)
    check_preserved(module, rng.standard_normal((1, 2, 3, 4)))
    assert op_kinds(module) == ["top.Input", "top.Reshape", "top.Sigmoid"]


def test_idempotent_and_registered():
    rng = np.random.default_rng(1)
    module, _, _ = conv_bn_relu(rng)
    assert get_pass("canonicalize") is CanonicalizePass
    CanonicalizePass().apply(None, module)  # type: ignore[arg-type]
    text = str(module)
    assert canonicalize(module) is False
    assert str(module) == text


def test_opt_bad_file_prints_one_error_line(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text('module {\n  %0 = "top.Relu"(\n}\n')
    proc = subprocess.run(
        [sys.executable, "-m", "tpuc.tools.opt", str(bad), "-p", "canonicalize"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "bad.mlir" in lines[0]
    assert proc.stdout == ""
