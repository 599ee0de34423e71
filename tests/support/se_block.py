"""A squeeze-excite block for tests/native/test_local_se.py (PP-OCR's
MobileNetV3 blocks): conv(8->16, 3x3, pad 1), depthwise 3x3, hard-swish, global average
pool over its 12x40 plane (a window wider than the chip's INT8 pooling
rounds exactly: pooled as a convolution of ones), conv 16->4 + relu,
conv 4->16, hard-sigmoid, and the broadcast Mul of the hard-swish output
by that [N, 16, 1, 1] scale; `images` of them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import helper, numpy_helper


def se_block_onnx(work: Path, images: int = 1, channels: int = 16) -> tuple[str, str]:
    """(mlir, cali table) of the block over `channels` (16 in the module
    docstring), calibrated on 3 random samples."""
    from native_models import transformed

    rng = np.random.default_rng(27)

    def init(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("f4"), name)

    c = channels
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c0"], pads=[1] * 4, kernel_shape=[3, 3]),
        node("Conv", ["c0", "Wd", "Bd"], ["c1"], pads=[1] * 4, kernel_shape=[3, 3], group=c),
        node("HardSwish", ["c1"], ["h"]),
        node("GlobalAveragePool", ["h"], ["p"]),
        node("Conv", ["p", "W2", "B2"], ["c2"], kernel_shape=[1, 1]),
        node("Relu", ["c2"], ["r2"]),
        node("Conv", ["r2", "W3", "B3"], ["c3"], kernel_shape=[1, 1]),
        node("HardSigmoid", ["c3"], ["s"], alpha=1 / 6, beta=0.5),
        node("Mul", ["h", "s"], ["y"]),
    ]
    inits = [
        init("W1", (c, 8, 3, 3), 0.3),
        init("B1", (c,), 1.0),
        init("Wd", (c, 1, 3, 3), 0.3),
        init("Bd", (c,), 1.0),
        init("W2", (c // 4, c, 1, 1), 0.5),
        init("B2", (c // 4,), 0.2),
        init("W3", (c, c // 4, 1, 1), 0.5),
        init("B3", (c,), 0.5),
    ]
    shape = [images, 8, 12, 40]
    return transformed(work, f"se{images}_{c}", nodes, [("x", shape)], "y", inits, opset=14)


def lowered_ops(work: Path, mlir: str, table: str, mode: str):
    """(module finalized for bm1684x with layer-group off, TPU interpreter
    outputs on work/in.npz, inputs, every op of the block in order)."""
    from tpuc.dialects import top
    from tpuc.interp.tpu_interpreter import run_tpu
    from tpuc.ir.module_io import load_module
    from tpuc.ir.weights import WeightStore
    from tpuc.workflow.deploy import lower
    from tpuc.workflow.pipeline import finalize

    module, store = load_module(mlir)
    lower(module, "bm1684x", mode, False, table if mode == "INT8" else None, None)
    inputs = dict(np.load(work / "in.npz"))
    expected = run_tpu(module, store, inputs)
    finalize(module, WeightStore(store), "bm1684x", 2, True)
    block = next(iter(module.ops)).body.block
    ops = [
        op
        for op in block.ops
        if op.name.startswith("tpu.") and not isinstance(op, (top.WeightOp, top.NoneOp))
    ]
    return module, expected, inputs, ops
