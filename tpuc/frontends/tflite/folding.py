"""Operators folded to constants at conversion time: fp16 weights behind
DEQUANTIZE (to float32), DENSIFY (the reader already densified the sparse
buffer), and shape ops on constants."""

from __future__ import annotations

import numpy as np

from tpuc.frontends.tflite.model import DTYPES, TOperator


def dequantize(tensor, data: np.ndarray) -> np.ndarray:
    """Real values of a constant: float16 widened, integers scaled per
    tensor or per axis."""
    if data.dtype.kind == "f":
        return data.astype(np.float32)
    if not tensor.quantized:
        return data.astype(np.float32)
    scales, zps = tensor.scales, tensor.zero_points
    if scales.size > 1:
        shape = [1] * data.ndim
        shape[tensor.quantized_dimension] = scales.size
        scales, zps = scales.reshape(shape), zps.reshape(shape)
    return ((data.astype(np.float64) - zps) * scales).astype(np.float32)


def fold(cv, op: TOperator) -> np.ndarray:
    """The constant value of `op`'s single output."""
    x = cv.const(op.inputs[0])
    out = cv.tensor(op.outputs[0])
    if op.op == "DEQUANTIZE":
        return dequantize(cv.tensor(op.inputs[0]), x)
    if op.op == "DENSIFY":
        return x
    if op.op == "CAST":
        return x.astype(DTYPES.get(out.type, np.float32))
    if op.op == "TRANSPOSE":
        return np.transpose(x, [int(v) for v in cv.const(op.inputs[1]).reshape(-1)])
    return x.reshape(out.shape)  # RESHAPE, SQUEEZE, EXPAND_DIMS
