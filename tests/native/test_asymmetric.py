"""Asymmetric INT8 through the native target (the vendor runtime on its chip
model) against tpuc's TPU interpreter, bit for bit.

tpuc's Conv2D/MatMul/average pooling sum (q − Z_in)·w with padding worth 0;
the chip sums q·w with padding worth Z_in (`ipad_value`), so the native
rules fold −Z_in·Σw into the int32 bias as TPU-MLIR's lowering does (without
it every output of smallcnn differed). Asymmetric average pooling runs as a
depthwise convolution of ones (pool.py). Inputs are offset so that the
zero points are far from 0, and padded windows meet the borders.
"""

from __future__ import annotations

import numpy as np
import pytest
from native_models import matches, native_vs_interp, node

RNG = np.random.default_rng(11)
F = np.float32
X = (RNG.standard_normal([1, 8, 12, 12]) * 0.8 + 0.9).astype(F)  # Z_in far from 0


def weights(shape, scale=0.3):
    return (RNG.standard_normal(shape) * scale).astype(F)


CONVS = {
    "bias_pad": ([node("Conv", ["a", "w", "b"], ["y"], pads=[1] * 4)],
                 [("w", weights([16, 8, 3, 3])), ("b", weights([16], 1.0))], [1, 16, 12, 12]),
    "no_bias_stride2_relu": ([node("Conv", ["a", "w"], ["t"], pads=[1] * 4, strides=[2, 2]),
                              node("Relu", ["t"], ["y"])],
                             [("w", weights([96, 8, 3, 3]))], [1, 96, 6, 6]),
    "depthwise": ([node("Conv", ["a", "w", "b"], ["y"], pads=[1] * 4, group=8)],
                  [("w", weights([8, 1, 3, 3])), ("b", weights([8], 1.0))], [1, 8, 12, 12]),
    "grouped": ([node("Conv", ["a", "w", "b"], ["y"], pads=[1] * 4, group=2)],
                [("w", weights([8, 4, 3, 3])), ("b", weights([8], 1.0))], [1, 8, 12, 12]),
    # PP-OCR's block: conv + relu, then a depthwise conv + relu (stride 2x1)
    # on the relu's output (zero point -128): the chip's depthwise relu clamps
    # at stored 0, so it runs without and saturation clamps (conv.py)
    "relu_depthwise_relu": ([node("Conv", ["a", "w1", "b1"], ["c"]), node("Relu", ["c"], ["r"]),
                             node("Conv", ["r", "w", "b"], ["d"], pads=[1] * 4, group=8,
                                  strides=[2, 1]),
                             node("Relu", ["d"], ["y"])],
                            [("w1", weights([8, 8, 1, 1])), ("b1", weights([8], 1.0)),
                             ("w", weights([8, 1, 3, 3])), ("b", weights([8], 1.0))],
                            [1, 8, 6, 12]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CONVS))
def test_asymmetric_conv_bit_exact(tmp_path, case):
    nodes, inits, out = CONVS[case]
    run = native_vs_interp(tmp_path, nodes, {"a": X}, {"y": out}, "INT8", inits, asymmetric=True)
    assert "tpu.Conv2D" in run.kinds
    matches(run.got, run.expected, "INT8")


@pytest.mark.parametrize("relu", [False, True], ids=["plain", "relu"])
def test_asymmetric_gemm_bit_exact(tmp_path, relu):
    x = (RNG.standard_normal([2, 64]) + 0.6).astype(F)
    nodes = [node("Gemm", ["a", "w", "b"], ["t" if relu else "y"], transB=1)]
    nodes += [node("Relu", ["t"], ["y"])] if relu else []
    inits = [("w", weights([10, 64], 0.2)), ("b", weights([10], 1.0))]
    run = native_vs_interp(tmp_path, nodes, {"a": x}, {"y": [2, 10]}, "INT8", inits,
                           asymmetric=True)  # fmt: skip
    assert "tpu.MatMul" in run.kinds
    matches(run.got, run.expected, "INT8")


POOLS = {
    "2x2": (node("AveragePool", ["a"], ["y"], kernel_shape=[2, 2], strides=[2, 2]), [1, 8, 6, 6]),
    "3x3_pad_counted": (node("AveragePool", ["a"], ["y"], kernel_shape=[3, 3], pads=[1] * 4,
                             count_include_pad=1), [1, 8, 12, 12]),
    "global": (node("GlobalAveragePool", ["a"], ["y"]), [1, 8, 1, 1]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(POOLS))
def test_asymmetric_average_pool_bit_exact(tmp_path, case):
    pool, out = POOLS[case]
    run = native_vs_interp(tmp_path, [pool], {"a": X}, {"y": out}, "INT8", asymmetric=True)
    assert "tpu.Pool2D" in run.kinds
    matches(run.got, run.expected, "INT8")


def test_asymmetric_conv_pool_fc_chain(tmp_path):
    """smallcnn's shape: conv+ReLU, max pool, conv+ReLU, global average
    pool, FC (every zero point nonzero)."""
    nodes = [
        node("Conv", ["a", "w1", "b1"], ["c1"], pads=[1] * 4),
        node("Relu", ["c1"], ["r1"]),
        node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1] * 4),
        node("Relu", ["c2"], ["r2"]),
        node("GlobalAveragePool", ["r2"], ["g"]),
        node("Flatten", ["g"], ["f"]),
        node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
    ]
    inits = [("w1", weights([16, 8, 3, 3])), ("b1", weights([16], 0.5)),
             ("w2", weights([32, 16, 3, 3], 0.2)), ("b2", weights([32], 0.5)),
             ("w3", weights([10, 32], 0.3)), ("b3", weights([10], 0.5))]  # fmt: skip
    run = native_vs_interp(tmp_path, nodes, {"a": X}, {"y": [1, 10]}, "INT8", inits,
                           asymmetric=True)  # fmt: skip
    assert {"tpu.Conv2D", "tpu.Pool2D", "tpu.MatMul"} <= run.kinds
    matches(run.got, run.expected, "INT8")


def test_asymmetric_concat_with_fused_relu(tmp_path):
    """Concat -> Relu (shufflenet's branches) fuses into the concat; its
    asymmetric output has zero point −128, the storage minimum, so the
    relu's clamp at Z_out is the saturation itself (no call)."""
    b = (RNG.standard_normal(X.shape) * 2 - 0.5).astype(F)
    nodes = [node("Concat", ["a", "b"], ["c"], axis=1), node("Relu", ["c"], ["y"])]
    run = native_vs_interp(tmp_path, nodes, {"a": X, "b": b}, {"y": [1, 16, 12, 12]}, "INT8",
                           asymmetric=True)  # fmt: skip
    assert "tpu.Concat" in run.kinds
    matches(run.got, run.expected, "INT8")


REFUSED = {
    "mul": ([node("Mul", ["a", "b"], ["y"])], {"a": X, "b": X + 1}, X.shape,
            r"tpu.Mul 'y.*asymmetric INT8 Mul"),
    "matmul": ([node("MatMul", ["a", "b"], ["y"])],
               {"a": X[0, :2] + 1, "b": X[0, 2:4].transpose(0, 2, 1) - 0.5}, [2, 12, 12],
               r"tpu.MatMul 'y.*asymmetric INT8 matmul of two activations"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED))
def test_asymmetric_ops_tpu_mlir_runs_in_f32_are_refused_in_one_line(tmp_path, case):
    """The chip's INT8 Mul has no zero points, and its batched matmul's do
    not give Σ(q_l − Z_l)(q_r − Z_r) (measured: every value differed);
    TPU-MLIR lowers both in F32 when asymmetric. One line naming the op,
    not wrong numbers."""
    from tpuc.base.errors import TpucError

    nodes, feeds, out, pattern = REFUSED[case]
    with pytest.raises(TpucError, match=pattern) as info:
        native_vs_interp(tmp_path, nodes, feeds, {"y": out}, "INT8", asymmetric=True)
    assert "\n" not in str(info.value)
