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
from xdsl.ir import Operation, SSAValue

from tpuc.base.numerics import round_half_away
from tpuc.base.registry import Registry
from tpuc.interp.top_ops.registry import Array, Kernel
from tpuc.interp.tpu_ops.params import requant_of
from tpuc.ir.core import element_of  # noqa: F401  (re-exported for the kernel modules)
from tpuc.ir.qparams import QuantParams
from tpuc.kernels import requant
from tpuc.kernels.executor import current

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


def requant_output(op, acc: Array, axis: int = 1, index: int = 0) -> Array:
    """The integer epilogue of the kernel library (`tpuc.kernels.requant`)
    with the op's record (built once per op)."""
    record = current().memo(("requant", op, axis, index), lambda: requant_of(op, axis, index))
    return requant.requant_output(record, acc)


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
