"""A small conv chain for tests/native/test_local_groups.py: conv(8->16,
3x3, pad 1)+relu, conv(16->16, 3x3, pad 1)+relu, + a second input, on
1x8x20x12 (20 rows to cut into H slices); `lowered` gives it finalized for
the native target (layer-group off, every tensor in DDR) with its ops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import helper, numpy_helper
from onnx_init import normal_init


def chain_onnx(work: Path) -> tuple[str, str]:
    """(mlir, cali table) of the chain, calibrated on 3 random samples."""
    from native_models import transformed

    rng = np.random.default_rng(7)

    init = normal_init(rng)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c2"], ["r2"]),
        node("Add", ["r2", "y"], ["z"]),
    ]
    inits = [
        init("W1", (16, 8, 3, 3)),
        init("B1", (16,), 1.0),
        init("W2", (16, 16, 3, 3), 0.1),
        init("B2", (16,), 1.0),
    ]
    inputs = [("x", [1, 8, 20, 12]), ("y", [1, 16, 20, 12])]
    return transformed(work, "chain", nodes, inputs, "z", inits)


def pool_chain_onnx(work: Path, pool: str = "MaxPool") -> tuple[str, str]:
    """(mlir, cali table) of conv+relu, 2x2/2 pool, 3x3/2 conv, 3x3/1 pool
    with pad 1 (`pool`: MaxPool or AveragePool, counting the pad), on two
    3x32x20 images."""
    from native_models import transformed

    rng = np.random.default_rng(3)

    init = normal_init(rng)

    node = helper.make_node
    padded = {"count_include_pad": 1} if pool == "AveragePool" else {}
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c1"], ["r1"]),
        node(pool, ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        node(
            "Conv", ["p1", "W2", "B2"], ["c2"], pads=[1] * 4, kernel_shape=[3, 3], strides=[2, 2]
        ),  # fmt: skip
        node(pool, ["c2"], ["y"], kernel_shape=[3, 3], strides=[1, 1], pads=[1] * 4, **padded),
    ]
    inits = [
        init("W1", (16, 3, 3, 3)),
        init("B1", (16,), 1.0),
        init("W2", (32, 16, 3, 3), 0.1),
        init("B2", (32,), 1.0),
    ]
    return transformed(work, "pools", nodes, [("x", [2, 3, 32, 20])], "y", inits)


def depthwise_chain_onnx(work: Path) -> tuple[str, str]:
    """(mlir, cali table) of conv 8->80 + relu, depthwise 3x3 + relu,
    depthwise 5x5 stride 2 pad 2 (80 channels: two planes on some lanes)."""
    from native_models import transformed

    rng = np.random.default_rng(4)

    init = normal_init(rng)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1] * 4, kernel_shape=[3, 3], group=80),
        node("Relu", ["c2"], ["r2"]),
        node(
            "Conv",
            ["r2", "W3", "B3"],
            ["y"],
            pads=[2] * 4,
            kernel_shape=[5, 5],
            strides=[2, 2],
            group=80,
        ),  # fmt: skip
    ]
    inits = [
        init("W1", (80, 8, 3, 3)),
        init("B1", (80,), 1.0),
        init("W2", (80, 1, 3, 3)),
        init("B2", (80,), 1.0),
        init("W3", (80, 1, 5, 5), 0.2),
        init("B3", (80,), 0.5),
    ]
    return transformed(work, "dw", nodes, [("x", [1, 8, 24, 16])], "y", inits)


def lowered(work: Path, mlir: str, table: str, mode: str, asymmetric: bool = False):
    """(module finalized for bm1684x with layer-group off, TPU interpreter
    outputs on work/in.npz, inputs, its convs, adds and pools in order)."""
    from tpuc.dialects import tpu
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.module_io import load_module
    from tpuc.ir.weights import WeightStore
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import finalize

    module, store = load_module(mlir)
    lower(module, "bm1684x", mode, asymmetric, table if mode == "INT8" else None, None)
    inputs = dict(np.load(work / "in.npz"))
    expected = run_tpu(module, store, inputs)
    finalize(module, WeightStore(store), "bm1684x", 2, True)
    ops = [
        op
        for op in next(iter(module.ops)).body.block.ops
        if isinstance(op, (tpu.Conv2DOp, tpu.AddOp, tpu.Pool2DOp))
    ]
    return module, expected, inputs, ops


def wide_chain_onnx(work: Path) -> tuple[str, str]:
    """(mlir, cali table) of a transpose of H and W (a global layer), then
    conv(32->64, 3x3, pad 1)+relu, conv(64->64, 3x3, pad 1)+relu on
    1x32x56x56: big enough planes that the vendor's cycles favour H slices
    (their loads and stores overlap the convs)."""
    from native_models import transformed

    rng = np.random.default_rng(11)

    def init(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)

    node = helper.make_node
    nodes = [
        node("Transpose", ["x"], ["s"], perm=[0, 1, 3, 2]),
        node("Conv", ["s", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c2"], ["z"]),
    ]
    inits = [
        init("W1", (64, 32, 3, 3), 0.1),
        init("B1", (64,), 0.5),
        init("W2", (64, 64, 3, 3), 0.05),
        init("B2", (64,), 0.5),
    ]
    return transformed(work, "wide", nodes, [("x", [1, 32, 56, 56])], "z", inits)


def fire_onnx(work: Path) -> tuple[str, str]:
    """(mlir, cali table) of a squeezenet fire module: conv 1x1 8->16 + relu,
    conv 1x1 16->24 + relu and conv 3x3 16->40 + relu side by side, their
    channel Concat (inputs of other scales: tpuc's INT8 concat rescales
    them), conv 1x1 64->32, on 1x8x40x24."""
    from native_models import transformed

    rng = np.random.default_rng(5)

    def init(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["s"], kernel_shape=[1, 1]),
        node("Relu", ["s"], ["rs"]),
        node("Conv", ["rs", "W2", "B2"], ["e1"], kernel_shape=[1, 1]),
        node("Relu", ["e1"], ["r1"]),
        node("Conv", ["rs", "W3", "B3"], ["e3"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["e3"], ["r3"]),
        node("Concat", ["r1", "r3"], ["cat"], axis=1),
        node("Conv", ["cat", "W4", "B4"], ["y"], kernel_shape=[1, 1]),
    ]
    inits = [
        init("W1", (16, 8, 1, 1), 0.3),
        init("B1", (16,), 0.5),
        init("W2", (24, 16, 1, 1), 0.2),
        init("B2", (24,), 0.5),
        init("W3", (40, 16, 3, 3), 0.3),
        init("B3", (40,), 1.0),
        init("W4", (32, 64, 1, 1), 0.1),
        init("B4", (32,), 0.2),
    ]
    return transformed(work, "fire", nodes, [("x", [1, 8, 40, 24])], "y", inits)


def prefetch_chain_onnx(work: Path) -> tuple[str, str]:
    """(mlir, cali table) of a chain whose late weights outweigh its late
    compute: 3x3 convs over 64 channels at 48x48, then a 3x3 stride-2 conv
    to 128 channels, a 3x3 conv to 256 and a 1x1 conv on 24x24 (their
    filters load while the early convs compute), and a residual Add over
    the last two."""
    from native_models import transformed

    rng = np.random.default_rng(11)

    def init(name, shape, scale=0.2):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c1"], ["r1"]),
        node("Conv", ["r1", "W2", "B2"], ["c2"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c2"], ["r2"]),
        node("Conv", ["r2", "W3", "B3"], ["c3"], pads=[1] * 4, kernel_shape=[3, 3], strides=[2, 2]),
        node("Relu", ["c3"], ["r3"]),
        node("Conv", ["r3", "W4", "B4"], ["c4"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Relu", ["c4"], ["r4"]),
        node("Conv", ["r4", "W5", "B5"], ["c5"], kernel_shape=[1, 1]),
        node("Add", ["c5", "r4"], ["z"]),
    ]
    inits = [
        init("W1", (64, 16, 3, 3)),
        init("B1", (64,), 1.0),
        init("W2", (64, 64, 3, 3), 0.05),
        init("B2", (64,), 1.0),
        init("W3", (128, 64, 3, 3), 0.05),
        init("B3", (128,), 1.0),
        init("W4", (256, 128, 3, 3), 0.03),
        init("B4", (256,), 1.0),
        init("W5", (256, 256, 1, 1), 0.05),
        init("B5", (256,), 0.5),
    ]
    return transformed(work, "prefetch", nodes, [("x", [1, 16, 48, 48])], "z", inits)
