"""TPU ops -> the kernel library's parameter records (TPU-MLIR's `parseParam`).

Each library-backed kernel is registered as `library_kernel(build, run)`:
`build(op)` reads the op's attributes and types once (the record is kept by
the interpreter's executor, per op), `run(record, *args)` is the library
function. The device simulator will build the same records from decoded
commands, so both run one kernel library.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import IntegerType, Signedness
from xdsl.ir import Attribute, Operation, SSAValue

from tpuc.base.dtypes import ELEMENT_TYPES
from tpuc.base.errors import TpucError
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.interp.top_ops.registry import Array, Kernel, KernelResult, ints
from tpuc.ir.core import FLOAT_DTYPES, element_of
from tpuc.kernels.conv_plan import ConvGeometry
from tpuc.kernels.element import F32, Element
from tpuc.kernels.executor import current
from tpuc.kernels.requant import DEFAULT_ROUND, Relu, Requant

Build = Callable[[Operation], Any]


def element_record(element: Attribute) -> Element:
    """An IR element type as the library sees it: a quantized type's storage
    and parameters, a float or integer type's name (anything else: f32,
    which kernels treat as "no rounding")."""
    if isinstance(element, UniformQuantizedType):
        bits = max(8, 1 << (element.storage_width - 1).bit_length())
        dtype = f"{'i' if element.is_signed else 'u'}{bits}"
        return Element(
            dtype, element.scale, element.zero_point, element.storage_min, element.storage_max
        )
    name = FLOAT_DTYPES.get(type(element))
    if name is None and isinstance(element, IntegerType):
        unsigned = element.signedness.data == Signedness.UNSIGNED
        name = f"{'u' if unsigned else 'i'}{element.width.data}"
    return Element(name) if name in ELEMENT_TYPES else F32


def element_of_value(value: SSAValue) -> Element:
    return element_record(element_of(value))


def relu_of(op: Operation) -> Relu:
    """The op's fused do_relu / relu_limit."""
    if not op.value("do_relu"):
        return Relu()
    limit = op.value("relu_limit")
    return Relu(True, None if limit is None else float(limit))


def round_mode_of(op: Operation) -> str:
    return op.value("round_mode") or DEFAULT_ROUND


def requant_of(op: Operation, axis: int = 1, index: int = 0) -> Requant:
    """The epilogue of result `index`: multiplier/rshift per tensor or per
    channel of `axis`, round mode, fused ReLU, the result's element."""
    return Requant(
        element_of_value(op.results[index]),
        tuple(ints(op, "multiplier", [1])),
        tuple(ints(op, "rshift", [0])),
        axis,
        round_mode_of(op),
        relu_of(op),
    )


def conv_geometry_of(op: Operation) -> ConvGeometry:
    """Strides, dilations, pads and group; the kernel from the filter's shape."""
    kernel = tuple(op.operands[1].type.get_shape()[2:])
    return ConvGeometry.of(
        kernel,
        ints(op, "strides"),
        ints(op, "dilations"),
        ints(op, "pads"),
        int(op.value("group") or 1),
    )


def params_of(op: Operation, build: Build) -> Any:
    """build(op), once per op and interpreter (outside one: every call)."""
    return current().memo(("params", build, op), lambda: build(op))


def op_error(op: Operation, exc: TpucError) -> TpucError:
    """A library error (which knows no op) naming the op."""
    return TpucError(f"{op.name} '{op.names[0]}': {exc}")


def library_kernel(build: Build, run: Callable[..., KernelResult]) -> Kernel:
    """The TPU kernel running `run(build(op), *args)`."""

    def kernel(op: Operation, args: list[Array | None]) -> KernelResult:
        record = params_of(op, build)
        try:
            return run(record, *args)
        except TpucError as exc:
            raise op_error(op, exc) from None

    kernel.__doc__ = run.__doc__
    kernel.__name__ = getattr(run, "__name__", "kernel")
    return kernel
