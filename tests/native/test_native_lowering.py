"""Lowering as TPU-MLIR lowers it, for the native target, run in the vendor
runtime with layer groups on, INT8 bit for bit against tpuc's TPU
interpreter (the float references: onnxruntime in model_transform's check):

- an INT8 conv that only a float layer (LRN) reads: with the native
  deploy's `float_epilogue=False` it requantizes to int8 and a Cast
  dequantizes (TPU-MLIR's form; the conv then fits a layer group), instead
  of tpuc's int32 accumulator dequantized in two more DDR passes;
- densenet121's BatchNorm, Mul, Add, Relu after a Concat: one Scale after
  canonicalize, one depthwise 1x1 conv in INT8 (no Add);
- a squeezenet fire module: the two expand convs, which only the Concat
  reads, requantize straight to the Concat's scale (a plain copy);
- an fc with an i8 result per column (a function output: INT8 models
  return int8), M = 1 and M = 4 rows, and one read by a Softmax, which
  keeps the float epilogue;
- inception_v1's head pool (7x7, pads [0, 0, 1, 1], over 6x6, padding not
  counted): one window over the whole input, an INT8 global pool.
"""

from __future__ import annotations

import numpy as np
import pytest
from native_models import check, transformed
from onnx import helper, numpy_helper


def init(rng, name: str, shape, scale: float = 0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)


@pytest.fixture(scope="module")
def lrn_model(tmp_path_factory):
    """Conv 3x3 + Relu, LRN (float in INT8), Conv 1x1."""
    work = tmp_path_factory.mktemp("native_lrn")
    rng = np.random.default_rng(5)
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c1"], ["r1"]),
        node("LRN", ["r1"], ["n"], size=5, alpha=1e-4, beta=0.75, bias=1.0),
        node("Conv", ["n", "W2"], ["y"], kernel_shape=[1, 1]),
    ]
    inits = [init(rng, "W1", (24, 8, 3, 3)), init(rng, "B1", (24,), 1.0)]
    inits.append(init(rng, "W2", (16, 24, 1, 1)))
    return work, *transformed(work, "lrn", nodes, [("x", [1, 8, 16, 16])], ["y"], inits)


@pytest.fixture(scope="module")
def bn_model(tmp_path_factory):
    """Conv, Concat with the input, BatchNorm, Mul, Add, Relu, Conv 1x1."""
    work = tmp_path_factory.mktemp("native_bn_scale")
    rng = np.random.default_rng(6)
    node = helper.make_node
    c = 24
    nodes = [
        node("Conv", ["x", "W1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Concat", ["x", "c1"], ["cat"], axis=1),
        node("BatchNormalization", ["cat", "g", "b", "m", "v"], ["bn"], epsilon=1e-5),
        node("Mul", ["bn", "k"], ["mul"]),
        node("Add", ["mul", "a"], ["add"]),
        node("Relu", ["add"], ["r"]),
        node("Conv", ["r", "W2"], ["y"], kernel_shape=[1, 1]),
    ]
    inits = [init(rng, "W1", (16, 8, 3, 3)), init(rng, "W2", (12, c, 1, 1))]
    inits += [init(rng, "g", (c,), 1.0), init(rng, "b", (c,), 1.0), init(rng, "m", (c,), 1.0)]
    inits.append(numpy_helper.from_array(rng.uniform(0.5, 2, c).astype("f4"), "v"))
    inits += [init(rng, "k", (c, 1, 1), 1.0), init(rng, "a", (c, 1, 1), 1.0)]
    return work, *transformed(work, "bn", nodes, [("x", [1, 8, 12, 12])], ["y"], inits)


@pytest.fixture(scope="module")
def fire_model(tmp_path_factory):
    """Squeeze 1x1, expand 1x1 and 3x3 (ReLUs), Concat, Conv 1x1."""
    work = tmp_path_factory.mktemp("native_fire")
    rng = np.random.default_rng(7)
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1"], ["s"], kernel_shape=[1, 1]),
        node("Relu", ["s"], ["rs"]),
        node("Conv", ["rs", "W2"], ["e1"], kernel_shape=[1, 1]),
        node("Relu", ["e1"], ["re1"]),
        node("Conv", ["rs", "W3"], ["e3"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["e3"], ["re3"]),
        node("Concat", ["re1", "re3"], ["cat"], axis=1),
        node("Conv", ["cat", "W4"], ["y"], kernel_shape=[1, 1]),
    ]
    inits = [init(rng, "W1", (8, 16, 1, 1)), init(rng, "W2", (16, 8, 1, 1), 0.6)]
    inits += [init(rng, "W3", (16, 8, 3, 3)), init(rng, "W4", (10, 32, 1, 1))]
    return work, *transformed(work, "fire", nodes, [("x", [1, 16, 20, 20])], ["y"], inits)


def run_grouped(work, mlir: str, table: str, vendor, float_epilogue: bool):
    """(native outputs, interpreter outputs, lowered module, names of the
    grouped ops, model_deploy's check bound: None is bit for bit) in
    INT8 with layer groups planned on the vendor's cycles (model_deploy's
    native path)."""
    from tpuc.dialects.tpu.group import GroupOp
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.module_io import load_module
    from tpuc.ir.weights import WeightStore
    from tpuc.passes.native.emit import generate_native
    from tpuc.target.vendor.run import run_native
    from tpuc.tools.deploy_native import check_kind, finalize_grouped
    from tpuc.workflow.deploy import lower

    module, store = load_module(mlir)
    lower(module, "bm1684x", "INT8", False, table, float_epilogue=float_epilogue)
    inputs = dict(np.load(work / "in.npz"))
    expected = run_tpu(module, store, inputs)
    lowered = module.clone()
    finalize_grouped(module, WeightStore(store), "bm1684x", 2, vendor)
    bmodel = work / f"grouped_{float_epilogue}.bmodel"
    bmodel.write_bytes(generate_native(module, vendor, profile=False).bmodel)
    groups = {
        n for g in module.walk() if isinstance(g, GroupOp) for op in g.layers() for n in op.names
    }
    bound = check_kind("INT8", False, module)[0]
    return run_native(bmodel, inputs, vendor), expected, lowered, groups, bound


def conv_results(module) -> dict[str, str]:
    """Each tpu.Conv2D's name -> its result's element type name."""
    from tpuc.dialects import tpu
    from tpuc.passes.native.context import dtype_name

    return {
        op.names[0]: dtype_name(op.results[0])
        for op in module.walk()
        if isinstance(op, tpu.Conv2DOp)
    }


def test_conv_read_by_float_layer_requantizes_then_casts(lrn_model, vendor):
    from tpuc.dialects import tpu

    work, mlir, table = lrn_model
    outputs, expected, module, groups, bound = run_grouped(
        work, mlir, table, vendor, float_epilogue=False
    )
    check(outputs, expected, "INT8")
    assert conv_results(module)["r1"] in ("i8", "u8")
    assert {"r1", "r1_f32"} <= groups  # the dequantizing Cast is local, after the conv
    assert bound is None  # a group storing f32 computes nothing in float: bit for bit
    conv = next(op for op in module.walk() if isinstance(op, tpu.Conv2DOp))
    readers = {type(use.operation) for use in conv.results[0].uses}
    assert readers == {tpu.CastOp}


def test_float_epilogue_stays_the_default(lrn_model, vendor):
    """tpuc's own target keeps the dequantized accumulator (more precise)."""
    work, mlir, table = lrn_model
    outputs, expected, module, groups, bound = run_grouped(
        work, mlir, table, vendor, float_epilogue=True
    )
    check(outputs, expected, "INT8")
    assert conv_results(module)["r1"] == "f32"


def test_batchnorm_mul_add_relu_is_one_depthwise_conv(bn_model, vendor):
    from tpuc.dialects import tpu

    work, mlir, table = bn_model
    outputs, expected, module, groups, bound = run_grouped(
        work, mlir, table, vendor, float_epilogue=False
    )
    check(outputs, expected, "INT8")
    depthwise = [
        op for op in module.walk() if isinstance(op, tpu.Conv2DOp) and (op.value("group") or 1) > 1
    ]
    assert [op.names[0] for op in depthwise] == ["r"] and depthwise[0].value("do_relu")
    assert not any(isinstance(op, tpu.AddOp) for op in module.walk())


def test_fire_concat_copies_inputs_at_its_scale(fire_model, vendor):
    from tpuc.dialects import tpu

    work, mlir, table = fire_model
    outputs, expected, module, groups, bound = run_grouped(work, mlir, table, vendor, False)
    check(outputs, expected, "INT8")
    (cat,) = [op for op in module.walk() if isinstance(op, tpu.ConcatOp)]
    assert cat.value("multiplier") == [1, 1] and cat.value("rshift") == [0, 0]
    assert {v.type.element_type for v in cat.operands} == {cat.results[0].type.element_type}


@pytest.fixture(scope="module", params=[(1, False), (4, False), (1, True)])
def fc_model(tmp_path_factory, request):
    """Gemm [M, 1024] x [1024, 1000] + bias (inception_v1's head), its
    int8 result the output or read by a Softmax."""
    m, softmax = request.param
    work = tmp_path_factory.mktemp(f"native_fc{m}")
    rng = np.random.default_rng(8)
    node = helper.make_node
    nodes = [node("Relu", ["x"], ["r"]), node("Gemm", ["r", "W", "B"], ["g"], transB=1)]
    if softmax:
        nodes.append(node("Softmax", ["g"], ["y"], axis=1))
    inits = [init(rng, "W", (1000, 1024), 0.05), init(rng, "B", (1000,), 0.1)]
    out = "y" if softmax else "g"
    return softmax, work, *transformed(work, "fc", nodes, [("x", [m, 1024])], [out], inits)


def test_fc_per_column(fc_model, vendor):
    softmax, work, mlir, table = fc_model
    outputs, expected, module, groups, bound = run_grouped(work, mlir, table, vendor, False)
    check(outputs, expected, "INT8")
    assert conv_results(module) == {}
    fc_type = next(op for op in module.walk() if op.name == "tpu.MatMul").results[0].type
    assert (fc_type.element_type.name == "f32") == softmax  # the epilogue stays for an fc


@pytest.fixture(scope="module")
def head_model(tmp_path_factory):
    """Conv 1x1 + Relu over 6x6, AveragePool 7x7 pads [0, 0, 1, 1], Flatten, Gemm."""
    work = tmp_path_factory.mktemp("native_head")
    rng = np.random.default_rng(9)
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1"], ["c"], kernel_shape=[1, 1]),
        node("Relu", ["c"], ["r"]),
        node("AveragePool", ["r"], ["p"], kernel_shape=[7, 7], pads=[0, 0, 1, 1]),
        node("Flatten", ["p"], ["f"]),
        node("Gemm", ["f", "W2"], ["y"], transB=1),
    ]
    inits = [init(rng, "W1", (96, 32, 1, 1)), init(rng, "W2", (10, 96), 0.1)]
    return work, *transformed(work, "head", nodes, [("x", [1, 32, 6, 6])], ["y"], inits)


def test_whole_input_average_pool_stays_int8(head_model, vendor):
    """No dequantizing Cast but the output's."""
    from tpuc.dialects import tpu
    from tpuc.passes.native.context import quant_of

    work, mlir, table = head_model
    outputs, expected, module, groups, bound = run_grouped(work, mlir, table, vendor, False)
    check(outputs, expected, "INT8")
    (pool,) = [op for op in module.walk() if isinstance(op, tpu.Pool2DOp)]
    assert pool.value("kernel_shape") == [6, 6] and pool.value("multiplier")
    casts = [op for op in module.walk() if isinstance(op, tpu.CastOp)]
    assert all(quant_of(op.operands[0]) is None or op.names[0] == "y" for op in casts)
