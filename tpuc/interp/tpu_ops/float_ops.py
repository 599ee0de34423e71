"""The "float" kind of the TPU ops: TOP's float kernel, rounded to the result type.

A TPU op in f32/f16/bf16 computes exactly what its TOP source computes (it
carries the same attributes) and then rounds each result to its element
type, as the chip stores it. f32 results pass through untouched, so an F32
TPU module reproduces the TOP interpreter bit for bit, but for the ops a
bm168x chip computes its own way (`chip_own`: softmax, LRN, LayerNorm,
sigmoid, GELU, tpu.Active's tanh, exp, erf, HardSwish and f32 average
pooling, `tpuc.kernels.chip_float`), which follow the chip to the last bit.
The rounding is the kernel library's (`tpuc.kernels.rounding`, on the
results' `Element`s, built once per op); the TOP float kernels are still
called with the op.
"""

from __future__ import annotations

from xdsl.ir import Attribute

from tpuc.base.errors import TpucError
from tpuc.dialects import top, tpu
from tpuc.interp.top_ops import KERNELS
from tpuc.interp.top_ops.registry import LIBRARY, Array, Kernel, KernelResult, record_of
from tpuc.interp.tpu_ops.params import element_of_value, element_record
from tpuc.interp.tpu_ops.registry import tpu_kernel
from tpuc.ir.module_io import module_attr
from tpuc.ir.weights import module_of
from tpuc.kernels import rounding
from tpuc.kernels.chip_float import chip_kernel
from tpuc.kernels.element import Element
from tpuc.kernels.executor import current
from tpuc.target.chips import CHIPS


def round_float(x: Array, element: Attribute) -> Array:
    """float32 values rounded to the IR float type `element` (f32: as is)."""
    return rounding.round_float(x, element_record(element))


def result_elements(op) -> tuple[Element, ...]:
    """The op's result elements, built once per op and interpreter."""
    return current().memo(
        ("result elements", op), lambda: tuple(element_of_value(v) for v in op.results)
    )


def round_results(op, result: KernelResult) -> KernelResult:
    """Each result rounded to the element type of its own result value."""
    return rounding.round_results(result_elements(op), result)


def rounded(fn: Kernel) -> Kernel:
    """The TPU float kernel computing as `fn` (a TOP kernel) does."""

    def run(op, args: list[Array | None]) -> KernelResult:
        return round_results(op, fn(op, args))

    run.__doc__ = f"{fn.__name__}, rounded to the result types."
    return run


def _register_mirrors() -> None:
    """Every mirror whose TOP source has a kernel (the others stay missing,
    so the interpreter names them when it is built)."""
    for top_cls, tpu_cls in tpu.MIRRORS.items():
        fn = KERNELS.get(top_cls)
        if fn is not None:
            tpu_kernel(tpu_cls, kinds=("float",))(rounded(fn))


_register_mirrors()

POOL_MODES: dict[str, type] = {"Max": top.MaxPoolOp, "Avg": top.AvgPoolOp}


def by_mode(op, table: dict[str, type], key: str) -> Kernel:
    """The TOP kernel of the class `table[op.<key>]`; a TpucError naming the
    op when the mode is unknown."""
    mode = op.value(key)
    cls = table.get(mode)
    if cls is None:
        raise TpucError(
            f"{op.name} '{op.names[0]}': unknown {key} {mode!r} (known: {', '.join(table)})"
        )
    return KERNELS[cls]


@tpu_kernel(tpu.Pool2DOp, kinds=("float",))
def pool2d(op, args: list[Array]) -> Array:
    """TOP's pooling, rounded; an F16/BF16 global average as the chip
    computes it (`pooling.half_global_avg`), other averages as the chip's f32
    pooling (`chip_float.avg_pool` on bm168x), rounded once."""
    element = result_elements(op)[0]
    if op.value("pool_mode") == "Avg" and element.dtype in ("f16", "bf16"):
        from tpuc.interp.top_ops.pool import pooling_record
        from tpuc.kernels import pooling

        record = pooling_record(op)
        if pooling.half_global_applies(record, args[0]):
            return pooling.half_global_avg(record, args[0], rounding.half_rounder(element))
    if op.value("pool_mode") == "Avg" and element.dtype in ("f32", "f16", "bf16"):
        return CHIP_AVG_POOL(op, args)  # a half one: in f32 between casts, as the chip
    return round_results(op, by_mode(op, POOL_MODES, "pool_mode")(op, args))


def chip_family(op) -> str | None:
    """The family of the module's chip (None: no chip recorded), once per op."""

    def find() -> str | None:
        chip = CHIPS.get(str(module_attr(module_of(op), "chip", "")).lower())
        return None if chip is None else chip.family

    return current().memo(("chip family", op), find)


def chip_own(top_class: type) -> Kernel:
    """TOP's kernel of `top_class`, or the chip family's own form of it
    (`chip_float.chip_kernel`: softmax, LRN, LayerNorm, sigmoid, tanh, GELU on bm168x),
    rounded."""
    build, run = LIBRARY[top_class]

    def kernel_(op, args: list[Array]) -> KernelResult:
        fn = chip_kernel(chip_family(op), run)
        return round_results(op, fn(record_of(op, build), *args))

    kernel_.__doc__ = f"{run.__name__} as the module's chip computes it, rounded."
    return kernel_


for _tpu_class, _top_class in (
    (tpu.SoftmaxOp, top.SoftmaxOp),
    (tpu.LRNOp, top.LRNOp),
    (tpu.LayerNormOp, top.LayerNormOp),
    (tpu.SigmoidOp, top.SigmoidOp),
    (tpu.GELUOp, top.GELUOp),
):
    tpu_kernel(_tpu_class, kinds=("float",), priority=1)(chip_own(_top_class))

CHIP_AVG_POOL = chip_own(top.AvgPoolOp)  # an f32 average Pool2D (pool2d)
ACTIVE_KERNELS = {mode: chip_own(cls) for mode, cls in tpu.ACTIVE_MODES.items()}
"""tpu.Active `mode` -> its TOP kernel, or the chip's own (CHIP_UNARY on bm168x)."""


@tpu_kernel(tpu.ActiveOp, kinds=("float",))
def active(op, args: list[Array]) -> KernelResult:
    mode = op.value("mode")
    if mode not in ACTIVE_KERNELS:
        by_mode(op, tpu.ACTIVE_MODES, "mode")  # the error naming the op
    return ACTIVE_KERNELS[mode](op, args)
