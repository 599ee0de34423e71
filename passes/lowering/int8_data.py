"""INT8 rules of the ops that only move, pick or compare values.

They never change a stored integer, so the result keeps the input's
quantized type (not its own calibrated range) and no requant is needed:
reshapes, permutes, slices, pads (their fill value quantized with the
input's parameters), nearest resizes, gathers, and Max/Min of inputs that
share one type.
"""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType, f32
from xdsl.ir import Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tpuc.base.numerics import multiplier_rshift, quantize
from tpuc.dialects import top, tpu
from tpuc.ir.core import element_of
from tpuc.ir.qparams import QuantParams
from tpuc.passes.lowering.context import Lowering
from tpuc.passes.lowering.int8_eltwise import read_int8
from tpuc.passes.lowering.registry import lowering

MOVES = top.VALUE_MOVES


def pass_through(lw: Lowering, operands: list[SSAValue], attrs: dict | None = None):
    """The TPU mirror with every result in the first operand's type."""
    element = element_of(operands[0])
    types = [lw.result_type(i, element) for i in range(len(lw.op.results))]
    return lw.build(tpu.MIRRORS[type(lw.op)], operands, attrs, result_types=types)


@lowering(*MOVES, modes=("INT8",))
def lower_move(lw: Lowering):
    value, _ = read_int8(lw, 0)
    return pass_through(lw, [value])


def _nearest(op: top.InterpOp) -> bool:
    """Only nearest resizing copies values; linear/cubic interpolate (float)."""
    return op.value("mode") == "nearest"


@lowering(top.InterpOp, modes=("INT8",), when=_nearest)
def lower_interp(lw: Lowering):
    value, _ = read_int8(lw, 0)
    return pass_through(lw, [value])


@lowering(top.GatherOp, modes=("INT8",))
def lower_gather(lw: Lowering):
    """Indices stay f32 (as in the float modes): they are positions."""
    value, _ = read_int8(lw, 0)
    return pass_through(lw, [value, lw.cast(lw.op.operands[1], f32)])


@lowering(top.PadOp, modes=("INT8",))
def lower_pad(lw: Lowering):
    """`val` becomes the stored integer of the fill value:
    clamp(round(val/S_in) + Z_in)."""
    value, quant = read_int8(lw, 0)
    fill = quantize(
        float(lw.op.value("val")), quant.scale, quant.zero_point, quant.qmin, quant.qmax
    )
    return pass_through(lw, [value], {"val": float(fill)})


# --- Max / Min ------------------------------------------------------------------------------


def _shared_type(op: Operation) -> bool:
    """Activations of one calibrated range (hence one quantized type), with
    no fused ReLU: the max of stored integers is then the max of values."""
    if op.value("do_relu"):  # type: ignore[attr-defined]
        return False
    if any(isinstance(v.owner, top.WeightOp | top.NoneOp) for v in op.operands):
        return False
    return len({element_of(v) for v in op.operands}) == 1


def requant_to(lw: Lowering, value: SSAValue, target: QuantParams) -> SSAValue:
    """`value` rescaled to `target` by a tpu.RequantInt (an input whose
    producer passed another type through)."""
    quant = QuantParams.of(element_of(value))
    if quant == target:
        return value
    multiplier, rshift = multiplier_rshift(quant.scale / target.scale, lw.chip.multiplier_bits)
    name = lw.state.fresh_name(f"{lw.op.names[0]}_requant")
    shape = value.type.get_shape()  # type: ignore[union-attr]
    op = tpu.RequantIntOp.make(
        [value],
        name,
        {"multiplier": [multiplier], "rshift": [rshift], "round_mode": lw.chip.round_mode},
        result_types=[TensorType(target.element_type(), shape)],
    )
    Rewriter.insert_op(op, InsertPoint.before(lw.op))
    return op.results[0]


@lowering(top.MaxOp, top.MinOp, modes=("INT8",), when=_shared_type)
def lower_max_min(lw: Lowering):
    """Max/Min on stored integers, sharing the first input's type."""
    inputs = [read_int8(lw, i) for i in range(len(lw.op.operands))]
    target = inputs[0][1]
    values = [requant_to(lw, v, target) for v, _ in inputs]
    return pass_through(lw, values)
