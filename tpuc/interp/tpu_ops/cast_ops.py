"""Precision changes: tpu.Cast, the Requant/Dequant family and tpu.Lut, as
adapters over the kernel library (`tpuc.kernels.cast`, `tpuc.kernels.lut`):
each op's record is built once, the library computes.

`from_real`/`to_real` keep their IR-typed signatures for the interpreter's
inputs/outputs and the device simulator's boundary (tpuc/target/runtime), which
still hold IR element types; they convert the type to an `Element`.
"""

from __future__ import annotations

from xdsl.ir import Attribute

from tpuc.dialects import tpu
from tpuc.interp.top_ops.registry import Array
from tpuc.interp.tpu_ops.params import (
    element_of_value,
    element_record,
    library_kernel,
    requant_of,
    round_mode_of,
)
from tpuc.interp.tpu_ops.registry import tpu_kernel
from tpuc.kernels import cast as lib
from tpuc.kernels.lut import Lut, lut
from tpuc.kernels.requant import DEFAULT_ROUND


def from_real(x: Array, element: Attribute, round_mode: str = DEFAULT_ROUND) -> Array:
    """Real values as stored in the IR element type `element`."""
    return lib.from_real(x, element_record(element), round_mode)


def to_real(x: Array, element: Attribute) -> Array:
    """Stored values of the IR element type `element` as real float32 values."""
    return lib.to_real(x, element_record(element))


def cast_params(op) -> lib.Cast:
    return lib.Cast(
        element_of_value(op.operands[0]),
        element_of_value(op.results[0]),
        op.value("to") or None,
        round_mode_of(op),
    )


tpu_kernel(tpu.CastOp, kinds=("float", "int"))(library_kernel(cast_params, lib.cast))


# --- integer rescales ----------------------------------------------------------------------


def rescale_params(op) -> lib.Rescale:
    """RequantInt (one value), RequantIntAxis and DequantInt (per channel
    of axis 1)."""
    return lib.Rescale(
        element_of_value(op.operands[0]),
        requant_of(op, axis=1),
        not isinstance(op, tpu.RequantIntOp),
        op.value("quant_mode") or "MultiplierShift",
    )


tpu_kernel(tpu.RequantIntOp, tpu.RequantIntAxisOp)(library_kernel(rescale_params, lib.rescale))
tpu_kernel(tpu.DequantIntOp, kinds=("float", "int"))(library_kernel(rescale_params, lib.rescale))


# --- table lookup ------------------------------------------------------------------------


def lut_params(op) -> Lut:
    return Lut(element_of_value(op.operands[0]), element_of_value(op.results[0]))


tpu_kernel(tpu.LutOp, kinds=("float", "int"))(library_kernel(lut_params, lut))
