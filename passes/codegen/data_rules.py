"""Pad, Gather and Arg -> engine-level commands (docs/isa.md).

Pad is what the DMA engine does: a `GDMA_FILL` of the whole destination
with the fill value (constant mode, when there is a border), one
`GDMA_MOVE` of the (cropped) source into its window, and for the other
modes the borders as further strided moves within the destination, axis
by axis as `np.pad` pads: along axis i a border row is read from the
centre of the same destination row (axes before i already padded, axes
after i only their centre), with stride 0 (edge), −1 (reflect) or +1 (wrap)
along i, one move per run of consecutive source rows. Gather is one
`GDMA_GATHER`, Arg one `TIU_ARG`. Every command carries the op's kind, so
the simulator builds the interpreter's record (`tpuc.target.runtime.engine_data`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.ir.core import element_of, kind_of
from tpuc.kernels.data import PAD_MODES
from tpuc.passes.codegen.commands import _view, copy_command, tensor_record
from tpuc.passes.codegen.engine_rules import engine_command, engine_rule
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    ENGINE_GDMA,
    MAX_RANK,
    RECORD_BYTES,
    TENSOR_QUANTIZED,
    Command,
    Header,
    TensorRecord,
    contiguous_strides,
)


def gdma_command(
    opcode: int, block, operands: list[TensorRecord], result: TensorRecord, layer_id: int, kind: int
) -> Command:
    """A GDMA command with a parameter block (`kind`: the op's, for the fill
    rounding and the gather's record)."""
    params = block_codec.encode_block(opcode, block)
    header = Header(
        opcode, ENGINE_GDMA, 0, 0, len(operands), 1, len(params) // RECORD_BYTES, 0, layer_id, kind
    )
    return Command(header, operands, [result], params)


# --- Pad -------------------------------------------------------------------------------------


def border_source(mode: str, u: int, size: int) -> int:
    """The centre index (0..size-1) a border position `u` (relative to the
    centre's start; < 0 before it, >= size after it) copies, as np.pad's
    edge, reflect and wrap modes give it."""
    if mode == "edge":
        return min(max(u, 0), size - 1)
    if mode == "wrap":
        return u % size
    if size == 1:
        return 0
    m = u % (2 * (size - 1))  # reflect: period 2(size-1), mirrored at both ends
    return m if m < size else 2 * (size - 1) - m


def border_runs(mode: str, begin: int, size: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(first destination position, count, first source centre index, step)
    of each run of a border whose source indices move by one constant step
    (0, +1 or −1)."""
    for positions in (range(-begin, 0), range(size, size + end)):
        run: list[int] = []  # source indices of the current run
        first, step = 0, 0
        for u in positions:
            c = border_source(mode, u, size)
            if run and (len(run) == 1 or c - run[-1] == step) and abs(c - run[-1]) <= 1:
                step = c - run[-1]
                run.append(c)
                continue
            if run:
                yield first, len(run), run[0], step
            first, run, step = u, [c], 0
        if run:
            yield first, len(run), run[0], step


def _border_moves(
    dst: TensorRecord, begins: list[int], centre: list[int], mode: str, layer_id: int
) -> list[Command]:
    """The moves that fill every border of `dst` from its centre, axis by axis."""
    strides = contiguous_strides(dst.shape)
    base = sum(b * st for b, st in zip(begins, strides, strict=True))
    commands = []
    for axis, size in enumerate(centre):
        end = dst.shape[axis] - begins[axis] - size
        # rows already complete: axes before `axis` whole, those after only their centre
        shape = [*dst.shape[:axis], 0, *centre[axis + 1 :]]
        start = base - sum(b * st for b, st in zip(begins[:axis], strides[:axis], strict=True))
        for first, count, source, step in border_runs(mode, begins[axis], size, end):
            shape[axis] = count
            target = _view(dst, shape, strides, start + first * strides[axis])
            src_strides = list(strides)
            src_strides[axis] = step * strides[axis]
            origin = _view(dst, shape, src_strides, start + source * strides[axis])
            commands.append(copy_command(origin, target, layer_id))
    return commands


def _pad_geometry(op: Operation, src: TensorRecord):
    """(cropped source view, begins, centre shape, padded shape) or None
    (not expressible: paddings that do not fit the rank, a cropped-away axis)."""
    rank = len(src.shape)
    paddings = [int(p) for p in op.value("paddings") or []] or [0] * (2 * rank)
    if len(paddings) != 2 * rank or rank > MAX_RANK:
        return None
    begins, ends = paddings[:rank], paddings[rank:]
    crop = [max(0, -b) for b in begins]
    centre = [d - c - max(0, -e) for d, c, e in zip(src.shape, crop, ends, strict=True)]
    if min(centre, default=1) < 1:
        return None
    strides = src.element_strides()
    offset = sum(c * st for c, st in zip(crop, strides, strict=True))
    padded = tuple(max(0, b) + c + max(0, e) for b, c, e in zip(begins, centre, ends, strict=True))
    return _view(src, centre, strides, offset), [max(0, b) for b in begins], centre, padded


@engine_rule(tpu.PadOp)
def _pad(op: Operation, layer_id: int) -> list[Command] | None:
    """GDMA_FILL (constant mode with a border) + GDMA_MOVEs (module docstring)."""
    mode = op.value("mode") or "constant"
    if mode not in PAD_MODES or element_of(op.operands[0]) != element_of(op.results[0]):
        return None
    src, dst = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    geometry = _pad_geometry(op, src)
    if geometry is None or geometry[3] != dst.shape:
        return None
    view, begins, centre, _ = geometry
    strides = contiguous_strides(dst.shape)
    offset = sum(b * st for b, st in zip(begins, strides, strict=True))
    window = _view(dst, centre, strides, offset)
    commands = [copy_command(view, window, layer_id)]
    if math.prod(centre) == math.prod(dst.shape):
        return commands  # no border
    if mode == "constant":
        kind = int(kind_of(op) == "int")
        fill = gdma_command(
            isa.GDMA_FILL, isa.FillBlock(float(op.value("val"))), [], dst, layer_id, kind
        )
        return [fill, *commands]
    return commands + _border_moves(dst, begins, centre, mode, layer_id)


# --- Gather, Arg -----------------------------------------------------------------------------


@engine_rule(tpu.GatherOp)
def _gather(op: Operation, layer_id: int) -> list[Command] | None:
    """One GDMA_GATHER: source, indices (float-valued, never quantized)."""
    if len(op.operands) != 2 or element_of(op.operands[0]) != element_of(op.results[0]):
        return None
    src, indices = (tensor_record(v, op) for v in op.operands)
    if indices.absent or indices.flags & TENSOR_QUANTIZED:
        return None
    block = isa.GatherBlock(int(op.value("axis")))
    out = tensor_record(op.results[0], op)
    kind = int(kind_of(op) == "int")
    return [gdma_command(isa.GDMA_GATHER, block, [src, indices], out, layer_id, kind)]


@engine_rule(tpu.ArgOp)
def _arg(op: Operation, layer_id: int) -> list[Command] | None:
    """One TIU_ARG (float kind: the lowering keeps Arg in float)."""
    mode = op.value("mode")
    if kind_of(op) == "int" or mode not in isa.ARG_MODES or len(op.results) != 1:
        return None
    inp, out = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    block = isa.ArgBlock(
        isa.ARG_MODES.index(mode),
        int(bool(op.value("keepdims"))),
        int(bool(op.value("select_last_index"))),
        int(op.value("axis")),
    )
    return [engine_command(isa.TIU_ARG, block, [inp], [out], layer_id, kind=0)]
