"""The "int" kind of ops that only move or select stored integers.

Reshape, Permute, Slice, Pad, nearest resizes, Gather, max pooling, Max/Min
… never create a value their input did not hold, so TOP's float kernel run
on the stored integers is already exact, provided input and output share one
quantized type (checked once per op: a mismatch is a lowering bug). A fused
ReLU is the one exception: on stored integers it clamps at Z_out (and at
Z_out + round(limit/S_out)). Each op runs its TOP kernel's library record
with the ReLU off inside a `tpuc.kernels.data.Stored` record, which applies
that integer ReLU.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from tpuc.base.errors import TpucError
from tpuc.dialects import top, tpu
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.interp.top_ops import KERNELS  # noqa: F401  (registers TOP's kernels in LIBRARY)
from tpuc.interp.top_ops.registry import LIBRARY, Array, Kernel, KernelResult
from tpuc.interp.tpu_ops.params import element_of_value, library_kernel
from tpuc.interp.tpu_ops.registry import TPU_KERNELS, tpu_kernel
from tpuc.ir.core import element_of
from tpuc.ir.qparams import QuantParams
from tpuc.kernels import data
from tpuc.kernels.requant import NO_RELU

Check = Callable[[object], None]


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


def moved(
    top_cls: type, operands: Sequence[int] | None = (0,), check: Check | None = None
) -> Kernel:
    """The int kernel running the library record of TOP's `top_cls` kernel
    on stored integers (`operands`: those sharing the result type; None: all
    of them), its ReLU applied by `data.stored`. `check(op)` and the type
    check run once per op, when the record is built."""
    build, run = LIBRARY[top_cls]

    def build_stored(op) -> data.Stored:
        if check is not None:
            check(op)
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


def nearest_only(op) -> None:
    """Only nearest resizing moves integers; linear/cubic would interpolate."""
    if op.value("mode") != "nearest":
        raise TpucError(
            f"{op.name} '{op.names[0]}': mode {op.value('mode')!r} has no integer form "
            "(only nearest; the lowering must keep it in float)"
        )


def float_indices(op) -> None:
    """Gather: quantized data, float-valued indices."""
    if isinstance(element_of(op.operands[1]), UniformQuantizedType):
        raise TpucError(f"{op.name} '{op.names[0]}': the indices must not be quantized")


MOVES = (*top.VALUE_MOVES, top.PadOp)  # Pad: the lowering quantized its `val`

for _cls in MOVES:
    tpu_kernel(tpu.MIRRORS[_cls])(moved(_cls))
for _cls in (top.MaxOp, top.MinOp):
    tpu_kernel(tpu.MIRRORS[_cls])(moved(_cls, None))
tpu_kernel(tpu.InterpOp)(moved(top.InterpOp, check=nearest_only))
tpu_kernel(tpu.GatherOp)(moved(top.GatherOp, check=float_indices))


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
