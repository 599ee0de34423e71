"""The local rules of the TPU ops (see `rules` for what a rule answers).

Windows (conv, deconv, pool) follow TPU-MLIR's BackwardH/W with exact
bounds (layer-group.md §6): the rows an output range reads, clamped to the
input; padding then only applies to the slices at the tensor's edges (a
slice's top padding is its clamped start minus its unclamped one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.layer_group.layout import LocalLayout
from tpuc.passes.layer_group.rules import (
    AXIS_DIM,
    MAX_STRIDE,
    LocalRule,
    Range,
    activations,
    attr,
    dims,
    ebytes,
    int_kind,
    is_weight,
    local_rule,
)
from tpuc.target.chips.timing import Unit
from tpuc.target.cost import Task


def window_range(out: Range, stride: int, pad: int, kernel: int, dilation: int, size: int) -> Range:
    """Input rows [start, end) a window op reads for output rows `out`, clamped to [0, size)."""
    start = out[0] * stride - pad
    end = (out[0] + out[1] - 1) * stride - pad + (kernel - 1) * dilation + 1
    start, end = max(start, 0), min(end, size)
    return (start, max(end - start, 0))


def transposed_range(
    out: Range, stride: int, pad: int, kernel: int, dilation: int, size: int
) -> Range:
    """Input rows of a transposed convolution for output rows `out`: output
    o = i·s + k·d − pad, so i runs from ceil((o0 + pad − (K−1)·d) / s) to
    floor((o1 − 1 + pad) / s)."""
    lo = -(-(out[0] + pad - (kernel - 1) * dilation) // stride)
    hi = (out[0] + out[1] - 1 + pad) // stride
    lo, hi = max(lo, 0), min(hi, size - 1)
    return (lo, max(hi - lo + 1, 0))


class WindowRule(LocalRule):
    """Conv-like geometry from kernel_shape/strides/pads/dilations (2-D)."""

    def geometry(self, op: Operation, axis: str) -> tuple[int, int, int, int, int]:
        k = AXIS_DIM[axis] - 2  # 0 for h, 1 for w
        kernel = attr(op, "kernel_shape")
        strides = attr(op, "strides", [1, 1])
        pads = attr(op, "pads", [0, 0, 0, 0])
        dilations = attr(op, "dilations", [1, 1])
        size = dims(op.operands[0])[AXIS_DIM[axis]]
        return strides[k], pads[k], kernel[k], dilations[k], size

    def refuse_window(self, op: Operation) -> str | None:
        if len(shape_of(op.results[0]) or ()) != 4 or len(attr(op, "kernel_shape", [])) != 2:
            return "not a 2-D window op on a 4-D tensor"
        if max(attr(op, "strides", [1, 1])) > MAX_STRIDE:
            return f"stride > {MAX_STRIDE}"
        return None

    def backward(self, op: Operation, axis: str, out: Range) -> list[Range | None]:
        found: list[Range | None] = [None] * len(op.operands)
        found[0] = out if axis == "n" else self.window(op, axis, out)
        return found

    def window(self, op: Operation, axis: str, out: Range) -> Range:
        return window_range(out, *self.geometry(op, axis))


@local_rule(tpu.Conv2DOp)
class ConvRule(WindowRule):
    """Filter [oc, ic/g, kh, kw] (or reordered [1, oc, ic/g, kh·kw]), bias
    and merged coefficients: compact, oc spread over the lanes."""

    unit = Unit.CONV

    def refuse(self, op: Operation) -> str | None:
        if not is_weight(op.operands[1]):
            return "the filter is not a weight"
        if max(attr(op, "dilations", [1, 1])) > MAX_STRIDE:
            return f"dilation > {MAX_STRIDE}"
        return self.refuse_window(op)

    def weight_bytes(self, op: Operation, i: int, layout: LocalLayout) -> int:
        value = op.operands[i]
        oc = dims(op.results[0])[1]
        return layout.channel_bytes(math.prod(shape_of(value) or ()), oc, ebytes(value))

    def task(self, op: Operation, out: Sequence[int], ins: Sequence[Sequence[int] | None]) -> Task:
        ic, oc, group = dims(op.operands[0])[1], dims(op.results[0])[1], attr(op, "group", 1)
        macs = math.prod(out) * (ic // max(group, 1)) * math.prod(attr(op, "kernel_shape"))
        if group > 1 and group == ic == oc:
            return Task(Unit.DEPTHWISE, macs, ebytes(op.operands[0]))
        inner = ic // max(group, 1)
        return Task(Unit.CONV, macs, ebytes(op.operands[0]), channels=out[1], inner=inner)


@local_rule(tpu.DeconvOp)
class DeconvRule(ConvRule):
    def window(self, op: Operation, axis: str, out: Range) -> Range:
        return transposed_range(out, *self.geometry(op, axis))

    def task(self, op: Operation, out: Sequence[int], ins: Sequence[Sequence[int] | None]) -> Task:
        inp = ins[0] or dims(op.operands[0])
        filt = math.prod(shape_of(op.operands[1]) or ())
        work = math.prod(inp) * filt // max(dims(op.operands[0])[1], 1)
        return Task(Unit.CONV, work, ebytes(op.operands[0]))


@local_rule(tpu.Pool2DOp)
class PoolRule(WindowRule):
    """Max/avg pooling; global pooling (one window over the whole plane)
    cannot split H or W."""

    unit = Unit.POOL

    def refuse(self, op: Operation) -> str | None:
        return self.refuse_window(op)

    def axes(self, op: Operation) -> str:
        _, _, ih, iw = dims(op.operands[0])
        whole = list(attr(op, "kernel_shape", [])) == [ih, iw]
        return "n" if whole and dims(op.results[0])[2:] == (1, 1) else "nhw"

    def task(self, op: Operation, out: Sequence[int], ins: Sequence[Sequence[int] | None]) -> Task:
        work = math.prod(out) * math.prod(attr(op, "kernel_shape"))
        unit = Unit.AVGPOOL if attr(op, "pool_mode", "Max") == "Avg" else Unit.POOL
        return Task(unit, work, max(ebytes(op.operands[0]), ebytes(op.results[0])))

    def scratch_bytes(self, op: Operation, out: Sequence[int], layout: LocalLayout) -> int:
        avg = attr(op, "pool_mode", "Max") == "Avg"
        return layout.lane_bytes(out, 4) if avg and int_kind(op) else 0  # i32 sums


@local_rule(tpu.ConcatOp)
class ConcatRule(LocalRule):
    """Concatenation along channels: every input holds the output's N/H/W range."""

    def refuse(self, op: Operation) -> str | None:
        rank = len(shape_of(op.results[0]) or ())
        axis = attr(op, "axis", 1)
        if rank < 2 or axis % rank != 1:
            return "concatenation along another axis than channels"
        if len(activations(op)) != len(op.operands):
            return "a weight input"
        if any(len(shape_of(v) or ()) != rank for v in op.operands):
            return "inputs of another rank"
        return None


@local_rule(tpu.UpsampleOp)
class UpsampleRule(LocalRule):
    """Nearest upsampling by integer factors: output row o reads row o // s;
    H/W slices start and end on multiples of the factor."""

    def refuse(self, op: Operation) -> str | None:
        return None if len(shape_of(op.results[0]) or ()) == 4 else "not 4-D"

    def backward(self, op: Operation, axis: str, out: Range) -> list[Range | None]:
        if axis == "n":
            return [out]
        s = attr(op, "scale_h" if axis == "h" else "scale_w", 1)
        if out[0] % s or (out[0] + out[1]) % s:
            # a slice must hold whole repeats: one strided copy writes s rows
            # per input row, so a misaligned slice is invalid (empty range)
            return [(out[0] // s, 0)]
        return [(out[0] // s, out[1] // s)]


@local_rule(tpu.LutOp)
class LutRule(LocalRule):
    """Table lookup: the table is copied to every lane (256 entries, or C x 256)."""

    unit = Unit.LUT

    def refuse(self, op: Operation) -> str | None:
        return None if is_weight(op.operands[1]) else "the table is not a weight"

    def weight_bytes(self, op: Operation, i: int, layout: LocalLayout) -> int:
        value = op.operands[i]
        return layout.broadcast_bytes(math.prod(shape_of(value) or ()), ebytes(value))


@local_rule(tpu.LRNOp)
class LRNRule(LocalRule):
    """Across-channel normalisation: C is never split, so N/H/W slices are
    independent; two float work buffers (squares and their window sums)."""

    unit = Unit.SFU

    def scratch_bytes(self, op: Operation, out: Sequence[int], layout: LocalLayout) -> int:
        return 2 * layout.lane_bytes(out, 4)


@local_rule(tpu.AddOp, tpu.SubOp, tpu.MulOp)
class IntEltwiseRule(LocalRule):
    """Add/Sub/Mul: the integer forms widen to an i32 work buffer."""

    def scratch_bytes(self, op: Operation, out: Sequence[int], layout: LocalLayout) -> int:
        return layout.lane_bytes(out, 4) if int_kind(op) else 0

    def task(self, op: Operation, out: Sequence[int], ins: Sequence[Sequence[int] | None]) -> Task:
        task = super().task(op, out, ins)
        if int_kind(op) and not isinstance(op, tpu.MulOp):  # inputs requantized, then added
            return Task(Unit.RESCALE, task.work, task.element_bytes)
        return task


_ARITH = (
    tpu.MaxOp, tpu.MinOp, tpu.AddConstOp, tpu.SubConstOp, tpu.MulConstOp, tpu.CompareOp,
    tpu.CompareConstOp, tpu.WhereOp, tpu.ReluOp, tpu.LeakyReluOp, tpu.PReluOp, tpu.ClipOp,
    tpu.NotOp, tpu.HardSigmoidOp, tpu.ScaleOp, tpu.BatchNormOp,
)  # fmt: skip
_SFU = (
    tpu.SigmoidOp, tpu.GELUOp, tpu.EluOp, tpu.ReciprocalOp, tpu.PowOp, tpu.DivOp, tpu.ActiveOp,
)  # fmt: skip
_CONVERT = (
    tpu.CastOp, tpu.RequantIntOp, tpu.RequantIntAxisOp, tpu.DequantIntOp,
)  # fmt: skip


@local_rule(*_ARITH)
class ArithRule(LocalRule):
    unit = Unit.ARITH


@local_rule(*_SFU)
class SfuRule(LocalRule):
    unit = Unit.SFU


@local_rule(*_CONVERT)
class ConvertRule(LocalRule):
    unit = Unit.CONVERT


__all__ = ["transposed_range", "window_range"]
