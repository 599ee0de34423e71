"""The TPU kernel registry and the integer epilogue every kernel shares.

A TPU kernel is `fn(op, args) -> array | tuple[array, ...]`, like a TOP
kernel, registered per (op class, kind): kind "float" when the op's result
is f32/f16/bf16, "int" when it is quantized (see dialects/tpu/ops.py for
what each op means in integers). Arrays follow the TPU interpreter's
convention: float32 holding f16/bf16 values or stored integers; i32 weights
arrive as float64.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float16Type
from xdsl.ir import Attribute, Operation, SSAValue

from tpuc.dialects.quant import UniformQuantizedType
from tpuc.interp.kernels.registry import Array, Kernel
from tpuc.ir import element_of
from tpuc.numerics import f64_to_bf16, f64_to_f16, requantize, round_half_away, saturate
from tpuc.qparams import QuantParams
from tpuc.registry import Registry

KINDS = ("float", "int")

TPU_KERNELS: Registry[tuple[type[Operation], str], Kernel] = Registry("TPU kernels")


def tpu_kernel(
    *op_classes: type[Operation], kinds: Iterable[str] = ("int",), priority: int = 0
) -> Callable[[Kernel], Kernel]:
    """Register `fn` as the kernel of each op class for each kind."""
    keys = [(cls, kind) for cls in op_classes for kind in kinds]
    return TPU_KERNELS.register(*keys, priority=priority)


def quant_of(value: SSAValue) -> QuantParams:
    """Quantization parameters of a quantized SSA value."""
    return QuantParams.of(element_of(value))


def in_quant(op: Operation, index: int = 0) -> QuantParams:
    return quant_of(op.operands[index])


def out_quant(op: Operation, index: int = 0) -> QuantParams:
    return quant_of(op.results[index])


def channel_params(op, values: list[int], rank: int, axis: int = 1) -> np.ndarray:
    """A per-tensor (one value) or per-channel list, shaped to broadcast
    along `axis` of a rank-`rank` accumulator."""
    array = np.asarray(values, np.int64)
    if array.size == 1:
        return array.reshape(())
    shape = [1] * rank
    shape[axis % rank] = array.size
    return array.reshape(shape)


def requant_output(op, acc: Array, axis: int = 1, index: int = 0) -> Array:
    """The integer epilogue: requant(acc, multiplier, rshift) + Z_out, fused
    relu in the integer domain, saturation to the output storage range. A
    float result dequantizes instead (`dequant_output`)."""
    rank = np.ndim(acc)
    multiplier = channel_params(op, op.value("multiplier") or [1], rank, axis)
    rshift = channel_params(op, op.value("rshift") or [0], rank, axis)
    element = element_of(op.results[index])
    if not isinstance(element, UniformQuantizedType):
        return dequant_output(op, acc, multiplier, rshift, element)
    out = out_quant(op, index)
    q = requantize(acc, multiplier, rshift, op.value("round_mode") or "HalfAwayFromZero")
    q += out.zero_point
    return saturate(relu_int(op, q, out), out.qmin, out.qmax)


def dequant_output(op, acc: Array, multiplier, rshift, element: Attribute) -> Array:
    """The float epilogue: acc·M·2^−r in float64, fused relu (and limit) on
    the real values, rounded once to the float result type."""
    real = np.asarray(acc, np.float64) * np.ldexp(multiplier.astype(np.float64), -rshift)
    if op.value("do_relu"):
        limit = op.value("relu_limit")
        real = np.clip(real, 0.0, limit if limit is not None and limit >= 0 else None)
    return round_once(real, element)


def round_once(x: Array, element: Attribute) -> Array:
    """float64 values rounded once (to nearest even) to the float type
    `element`, as float32."""
    if isinstance(element, Float16Type):
        return f64_to_f16(x)
    if isinstance(element, BFloat16Type):
        return f64_to_bf16(x)
    return np.asarray(x, np.float32)


def relu_int(op, q: np.ndarray, out: QuantParams) -> np.ndarray:
    """Fused do_relu/relu_limit on stored integers (limit quantized by the
    output scale)."""
    if not op.value("do_relu"):
        return q
    limit = op.value("relu_limit")
    upper = None
    if limit is not None and limit >= 0:
        upper = out.zero_point + int(round_half_away(np.float64(limit / out.scale)))
    return np.clip(q, out.zero_point, upper)


def centered(x: Array, quant: QuantParams, dtype=np.float64) -> Array:
    """q − Z as floats of `dtype` (exact: 9-bit values)."""
    x = np.asarray(x, dtype)
    return x - quant.zero_point if quant.zero_point else x
