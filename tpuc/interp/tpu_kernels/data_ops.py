"""The "int" kind of ops that only move or select stored integers.

Reshape, Permute, Slice, Pad, nearest resizes, Gather, max pooling, Max/Min
… never create a value their input did not hold, so TOP's float kernel run
on the stored integers is already exact, provided input and output share one
quantized type (checked here: a mismatch is a lowering bug). A fused ReLU is
the one exception: on stored integers it clamps at Z_out (and at
Z_out + round(limit/S_out)), so such ops run TOP's kernel with the ReLU off
and apply `relu_int`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

import numpy as np

from tpuc.dialects import top, tpu
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.errors import TpucError
from tpuc.interp.kernels import KERNELS
from tpuc.interp.kernels.registry import LIBRARY, Array, Kernel, KernelResult
from tpuc.interp.tpu_kernels.params import element_of_value, library_kernel
from tpuc.interp.tpu_kernels.registry import TPU_KERNELS, relu_int, tpu_kernel
from tpuc.ir import element_of
from tpuc.kernels import data
from tpuc.kernels.requant import NO_RELU
from tpuc.qparams import QuantParams


class WithoutRelu:
    """`op` as a TOP kernel should see it with its fused ReLU turned off.
    Hashes and compares as `op`, so per-op memos (pool geometry) are shared."""

    __slots__ = ("op",)

    def __init__(self, op):
        self.op = op

    def value(self, key: str):
        return False if key == "do_relu" else self.op.value(key)

    def __getattr__(self, name: str):
        return getattr(self.op, name)

    def __hash__(self) -> int:
        return hash(self.op)

    def __eq__(self, other) -> bool:
        return other is self.op or (isinstance(other, WithoutRelu) and other.op is self.op)


def shared_type(op, operands: Iterable[int] | None) -> QuantParams:
    """The one quantized type of the given operands (None: all) and every
    result; a TpucError naming the op otherwise."""
    indices = range(len(op.operands)) if operands is None else operands
    values = [op.operands[i] for i in indices] + list(op.results)
    elements = [element_of(v) for v in values]
    first = elements[0]
    if not isinstance(first, UniformQuantizedType) or any(e != first for e in elements[1:]):
        shown = ", ".join(dict.fromkeys(str(e) for e in elements))
        raise TpucError(
            f"{op.name} '{op.names[0]}': moves stored integers, so its inputs and outputs "
            f"must share one quantized type (got {shown})"
        )
    return QuantParams.of(first)


def moved(top_cls: type, operands: Sequence[int] | None = (0,)) -> Kernel:
    """The int kernel running TOP's kernel of `top_cls` on stored integers
    (`operands`: those sharing the result type; None: all of them). A TOP
    kernel of the kernel library runs its record with the ReLU off
    (`tpuc.kernels.data.stored`); the type check is done once per op."""
    if top_cls in LIBRARY:
        return stored_kernel(*LIBRARY[top_cls], operands)
    fn = KERNELS[top_cls]

    def run(op, args: list[Array | None]) -> KernelResult:
        out = shared_type(op, operands)
        if not op.value("do_relu"):
            return fn(op, args)
        return relu_int(op, np.asarray(fn(WithoutRelu(op), args), np.float32), out)

    run.__doc__ = f"{fn.__name__} on stored integers."
    return run


def stored_kernel(build: Callable, run: Callable, operands: Sequence[int] | None) -> Kernel:
    """library_kernel of the `Stored` record around TOP's record."""

    def build_stored(op) -> data.Stored:
        shared_type(op, operands)
        move = build(op)
        relu = getattr(move, "relu", NO_RELU)
        if relu.on:
            move = replace(move, relu=NO_RELU)
        return data.Stored(move, relu, element_of_value(op.results[0]))

    def run_stored(p: data.Stored, *args: Array) -> KernelResult:
        return data.stored(p, run, *args)

    run_stored.__doc__ = f"{run.__name__} on stored integers."
    run_stored.__name__ = run.__name__
    return library_kernel(build_stored, run_stored)


MOVES = (*top.VALUE_MOVES, top.PadOp)  # Pad: the lowering quantized its `val`

for _cls in MOVES:
    tpu_kernel(tpu.MIRRORS[_cls])(moved(_cls))
for _cls in (top.MaxOp, top.MinOp):
    tpu_kernel(tpu.MIRRORS[_cls])(moved(_cls, None))

_interp = moved(top.InterpOp)
_gather = moved(top.GatherOp)


@tpu_kernel(tpu.InterpOp)
def interp(op, args: list[Array]) -> Array:
    """Only nearest resizing moves integers; linear/cubic would interpolate."""
    if op.value("mode") != "nearest":
        raise TpucError(
            f"{op.name} '{op.names[0]}': mode {op.value('mode')!r} has no integer form "
            "(only nearest; the lowering must keep it in float)"
        )
    return _interp(op, args)


@tpu_kernel(tpu.GatherOp)
def gather(op, args: list[Array]) -> Array:
    """Quantized data, float-valued indices."""
    if isinstance(element_of(op.operands[1]), UniformQuantizedType):
        raise TpucError(f"{op.name} '{op.names[0]}': the indices must not be quantized")
    return _gather(op, args)


def claim_modes(tpu_cls: type, key: str, modes: Sequence[str], top_cls: type) -> None:
    """Make the int kernel of `tpu_cls` run TOP's `top_cls` kernel on stored
    integers when op.<key> is one of `modes`, and leave the other modes to
    the int kernel below it in priority (the compute kernels: averages,
    sums), looked up when first needed so that import order does not matter."""
    mine = moved(top_cls)
    below: list = []

    def run(op, args: list[Array]) -> KernelResult:
        mode = op.value(key)
        if mode in modes:
            return mine(op, args)
        if not below:
            below.append(next(iter(TPU_KERNELS.all((tpu_cls, "int"))[1:]), None))
        if below[0] is None:
            raise TpucError(f"{op.name} '{op.names[0]}': no integer kernel for {key} {mode!r}")
        return below[0](op, args)

    tpu_kernel(tpu_cls, priority=1)(run)


claim_modes(tpu.Pool2DOp, "pool_mode", ("Max",), top.MaxPoolOp)
claim_modes(tpu.ReduceOp, "mode", ("ReduceMax", "ReduceMin"), top.ReduceOp)
