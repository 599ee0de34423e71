"""Integer kernels of the TPU compute ops (see dialects/tpu/ops.py for the
contract): matmul, average pooling, Add/Sub/Mul, Concat, ReduceSum/Mean
(`data_ops` adds the Max/Min modes of Pool2D and Reduce, which only move
stored values).
Convolutions are in `compute_conv` (imported here, so importing this module
registers every integer compute kernel).

Sums run exactly: float32 only where every partial sum stays within 2^24
(see `compute_conv`), otherwise float64 or int64; the epilogue is the
integer requantization of `registry`.
"""

from __future__ import annotations

import numpy as np

from tpuc.dialects import tpu
from tpuc.errors import TpucError
from tpuc.interp.kernels.pool import geometry, padded_input, window_reduce
from tpuc.interp.kernels.registry import Array, axis_of, ints
from tpuc.interp.tpu_kernels import compute_conv  # noqa: F401  (registers the convs)
from tpuc.interp.tpu_kernels.params import element_of_value, library_kernel, requant_of
from tpuc.interp.tpu_kernels.registry import (
    centered,
    in_quant,
    out_quant,
    relu_int,
    requant_output,
    tpu_kernel,
)
from tpuc.kernels.executor import current
from tpuc.kernels.matmul import MatMul, matmul
from tpuc.numerics import requantize, rounding_rshift, saturate

DEFAULT_ROUND = "HalfAwayFromZero"


def round_mode(op) -> str:
    return op.value("round_mode") or DEFAULT_ROUND


def unsupported(op, what: str) -> TpucError:
    return TpucError(f"{op.name} '{op.names[0]}': {what} has no integer kernel")


def per_input(op, key: str, count: int, default: int) -> list[int]:
    """A requant list with one value per input (Add/Sub multipliers, Concat)."""
    values = ints(op, key, [default] * count)
    if len(values) != count:
        raise TpucError(
            f"{op.name} '{op.names[0]}': {key} has {len(values)} values for {count} inputs"
        )
    return values


def int_centered(x: Array, op, index: int) -> Array:
    """q − Z of operand `index` as int64."""
    return centered(x, in_quant(op, index), np.int64)


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


def avg_pool(op, x: Array) -> Array:
    """Σ_window (q − Z_in), padding contributing 0 (the lowering folds the
    divisor into the multiplier), requantized per tensor."""
    xc = centered(x, in_quant(op), np.float32)
    g = geometry(op, xc)
    spatial = tuple(range(x.ndim - len(g.kernel), x.ndim))
    if g.is_global():
        acc = xc.sum(axis=spatial, keepdims=True, dtype=np.float64)
    else:
        out = np.empty(x.shape[: x.ndim - len(g.kernel)] + tuple(g.out), np.float32)
        acc = window_reduce(padded_input(xc, g, 0.0), g, np.add, out)  # < 2^24: exact
    return requant_output(op, acc)


POOLS = {"Avg": avg_pool}  # Max: data_ops (on stored values)


@tpu_kernel(tpu.Pool2DOp)
def pool(op, args: list[Array]) -> Array:
    fn = POOLS.get(op.value("pool_mode"))
    if fn is None:
        raise unsupported(op, f"pool_mode {op.value('pool_mode')!r}")
    return fn(op, args[0])


# --- elementwise ---------------------------------------------------------------------


def shifted_output(op, acc: Array) -> Array:
    """Add/Sub epilogue: the multipliers are per input (already applied), so
    only the one rshift, + Z_out, fused relu and saturation remain."""
    out = out_quant(op)
    rshift = ints(op, "rshift", [0])
    if len(rshift) != 1:
        raise TpucError(f"{op.name} '{op.names[0]}': expects one rshift, got {rshift}")
    q = rounding_rshift(acc, rshift[0], round_mode(op)) + out.zero_point
    return saturate(relu_int(op, q, out), out.qmin, out.qmax)


@tpu_kernel(tpu.AddOp)
def add(op, args: list[Array]) -> Array:
    """Σ_i (q_i − Z_i)·multiplier[i] >> rshift (numpy broadcasting)."""
    multipliers = per_input(op, "multiplier", len(args), 1)
    acc = None
    for i, (x, m) in enumerate(zip(args, multipliers, strict=True)):
        term = int_centered(x, op, i) * np.int64(m)
        acc = term if acc is None else acc + term
    return shifted_output(op, acc)


@tpu_kernel(tpu.SubOp)
def sub(op, args: list[Array]) -> Array:
    """(lhs − Z_l)·multiplier[0] − (rhs − Z_r)·multiplier[1] >> rshift."""
    m0, m1 = per_input(op, "multiplier", 2, 1)
    acc = int_centered(args[0], op, 0) * np.int64(m0) - int_centered(args[1], op, 1) * np.int64(m1)
    return shifted_output(op, acc)


@tpu_kernel(tpu.MulOp)
def mul(op, args: list[Array]) -> Array:
    """Π_i (q_i − Z_i), requantized by the one multiplier and rshift."""
    acc = None
    for i, x in enumerate(args):
        term = int_centered(x, op, i)
        acc = term if acc is None else acc * term
    return requant_output(op, acc)


# --- concat --------------------------------------------------------------------------


@tpu_kernel(tpu.ConcatOp)
def concat(op, args: list[Array]) -> Array:
    """Input i becomes requant(q_i − Z_i, multiplier[i], rshift[i]) + Z_out
    (a plain copy when that is the identity), then relu and saturation."""
    n = len(args)
    multipliers = per_input(op, "multiplier", n, 1)
    rshifts = per_input(op, "rshift", n, 0)
    out_q = out_quant(op)
    axis = axis_of(op.value("axis"), args[0].ndim)
    shape = list(args[0].shape)
    shape[axis] = sum(a.shape[axis] for a in args)
    out = current().empty(tuple(shape))
    start = 0
    for i, (x, m, r) in enumerate(zip(args, multipliers, rshifts, strict=True)):
        in_q = in_quant(op, i)
        if m == 1 and r == 0 and in_q.zero_point == out_q.zero_point:
            q = x
        else:
            q = requantize(int_centered(x, op, i), m, r, round_mode(op)) + out_q.zero_point
        part = (slice(None),) * axis + (slice(start, start + x.shape[axis]),)
        out[part] = saturate(relu_int(op, q, out_q), out_q.qmin, out_q.qmax)
        start += x.shape[axis]
    return out


# --- reduce --------------------------------------------------------------------------


def reduce_sum(op, x: Array, axes: tuple[int, ...], keep: bool) -> Array:
    """Σ (q − Z_in) over `axes` (ReduceMean: the lowering folds 1/count into
    the multiplier), requantized per tensor."""
    acc = centered(x, in_quant(op), np.float64).sum(axis=axes, keepdims=keep)
    return requant_output(op, acc)


REDUCE = {
    "ReduceSum": reduce_sum,
    "ReduceMean": reduce_sum,
}  # ReduceMax/ReduceMin: data_ops (on stored values)


@tpu_kernel(tpu.ReduceOp)
def reduce(op, args: list[Array]) -> Array:
    """Empty `axes` reduces every axis (ONNX default)."""
    x = args[0]
    fn = REDUCE.get(op.value("mode"))
    if fn is None:
        raise unsupported(op, f"mode {op.value('mode')!r}")
    axes = tuple(sorted({axis_of(a, x.ndim) for a in ints(op, "axes", range(x.ndim))}))
    return fn(op, x, axes, bool(op.value("keepdims")))
