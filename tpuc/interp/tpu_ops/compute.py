"""Integer kernels of the TPU compute ops (see dialects/tpu/ops.py for the
contract): records built from the op once, then the kernel library's
matmul, average pooling, Add/Sub/Mul, Concat and ReduceSum/Mean
(`data_ops` adds the Max/Min modes of Pool2D and Reduce, which only move
stored values). Convolutions are in `compute_conv` (imported here, so
importing this module registers every integer compute kernel).
"""

from __future__ import annotations

from tpuc.base.errors import TpucError
from tpuc.dialects import tpu
from tpuc.interp.top_ops.registry import Array, ints
from tpuc.interp.tpu_ops import compute_conv  # noqa: F401  (registers the convs)
from tpuc.interp.tpu_ops.params import (
    element_of_value,
    library_kernel,
    relu_of,
    requant_of,
    round_mode_of,
)
from tpuc.interp.tpu_ops.registry import tpu_kernel
from tpuc.kernels import arith, sums
from tpuc.kernels.element import Element
from tpuc.kernels.matmul import MatMul, matmul
from tpuc.kernels.requant import Requant


def unsupported(op, what: str) -> TpucError:
    return TpucError(f"{op.name} '{op.names[0]}': {what} has no integer kernel")


def per_input(op, key: str, count: int, default: int) -> tuple[int, ...]:
    """A requant list with one value per input (Add/Sub multipliers, Concat)."""
    values = ints(op, key, [default] * count)
    if len(values) != count:
        raise TpucError(
            f"{op.name} '{op.names[0]}': {key} has {len(values)} values for {count} inputs"
        )
    return tuple(values)


def input_elements(op) -> tuple[Element, ...]:
    return tuple(element_of_value(v) for v in op.operands)


# --- matmul --------------------------------------------------------------------------


def matmul_params(op) -> MatMul:
    """The record of a tpu.MatMul (per-column epilogue on the last axis)."""
    return MatMul(
        element_of_value(op.operands[0]),
        element_of_value(op.operands[1]),
        requant_of(op, axis=-1),
        bool(op.value("right_transpose")),
    )


tpu_kernel(tpu.MatMulOp)(library_kernel(matmul_params, matmul))


# --- pooling -------------------------------------------------------------------------


def pool_params(op) -> sums.Pool:
    return sums.Pool(
        tuple(ints(op, "kernel_shape")),
        tuple(ints(op, "strides")),
        tuple(ints(op, "pads")),
        bool(op.value("ceil_mode")),
        element_of_value(op.operands[0]),
        requant_of(op),
    )


POOLS = {"Avg": library_kernel(pool_params, sums.avg_pool)}  # Max: data_ops (stored values)


@tpu_kernel(tpu.Pool2DOp)
def pool(op, args: list[Array]) -> Array:
    fn = POOLS.get(op.value("pool_mode"))
    if fn is None:
        raise unsupported(op, f"pool_mode {op.value('pool_mode')!r}")
    return fn(op, args)


# --- elementwise ---------------------------------------------------------------------


def add_rshifts(op) -> tuple[tuple[int, ...], int]:
    """(per-input rshifts, the shared rshift) of an Add/Sub: one rshift is
    applied to the sum; one per input rounds each term on its own (bm168x's
    form; a single input is the same either way)."""
    count = len(op.operands)
    rshift = ints(op, "rshift", [0])
    if len(rshift) == 1:
        return (), rshift[0]
    if len(rshift) != count:
        raise TpucError(
            f"{op.name} '{op.names[0]}': rshift has {len(rshift)} values for {count} inputs "
            "(one for the sum, or one per input)"
        )
    return tuple(rshift), 0


def add_params(op) -> arith.Eltwise:
    count = len(op.operands)
    rshifts, shared = add_rshifts(op)
    requant = Requant(
        element_of_value(op.results[0]), (1,), (shared,), 1, round_mode_of(op), relu_of(op)
    )
    return arith.Eltwise(
        input_elements(op), requant, per_input(op, "multiplier", count, 1), rshifts
    )


def mul_params(op) -> arith.Eltwise:
    return arith.Eltwise(input_elements(op), requant_of(op))


tpu_kernel(tpu.AddOp)(library_kernel(add_params, arith.add))
tpu_kernel(tpu.SubOp)(library_kernel(add_params, arith.sub))
tpu_kernel(tpu.MulOp)(library_kernel(mul_params, arith.mul))


# --- concat --------------------------------------------------------------------------


def concat_params(op) -> arith.Concat:
    n = len(op.operands)
    return arith.Concat(
        input_elements(op),
        per_input(op, "multiplier", n, 1),
        per_input(op, "rshift", n, 0),
        int(op.value("axis")),
        requant_of(op),
    )


tpu_kernel(tpu.ConcatOp)(library_kernel(concat_params, arith.concat))


# --- reduce --------------------------------------------------------------------------


def reduce_params(op) -> sums.Reduce:
    return sums.Reduce(
        tuple(ints(op, "axes")),
        bool(op.value("keepdims")),
        element_of_value(op.operands[0]),
        requant_of(op),
    )


REDUCE = {
    "ReduceSum": library_kernel(reduce_params, sums.reduce_sum),
    "ReduceMean": library_kernel(reduce_params, sums.reduce_sum),
}  # ReduceMax/ReduceMin: data_ops (on stored values)


@tpu_kernel(tpu.ReduceOp)
def reduce(op, args: list[Array]) -> Array:
    """Empty `axes` reduces every axis (ONNX default)."""
    fn = REDUCE.get(op.value("mode"))
    if fn is None:
        raise unsupported(op, f"mode {op.value('mode')!r}")
    return fn(op, args)
