"""The instruction set on the cycle model's hardware unit classes.

Each TIU opcode maps to its unit class (`ENGINE_UNITS`) and reads its work
(MACs, window elements, elements) from its parameter block and tensor
records alone; a GDMA command is one move of its destination's bytes, its
direction from the two records' memory spaces (FILL: within the
destination's memory; GATHER: plus the index bytes).

A global layer keeps its operands in DDR, so a TIU command on global
records is three phases: a DDR->LMEM load of every operand in global memory
(weights included), the compute, an LMEM->DDR store of every result in
global memory. Operands already in local memory (layer groups) cost no DMA.
A store the vendor writes row by row (channel by channel, or a small map
spread over every lane) whose rows are narrow pays a burst per row
(`ROW_STORES`, `LANE_FILLING`); a permute within each channel's map is a
cheaper shuffle than one across lanes.
"""

from __future__ import annotations

import math

from tpuc.target.chips.timing import Direction, Unit
from tpuc.target.cost import Phase, Task
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    SPACE_GLOBAL,
    Command,
    TensorRecord,
    contiguous_strides,
    element_bytes,
)

_DIRECTIONS = {
    (True, True): Direction.DDR_TO_DDR,
    (True, False): Direction.DDR_TO_LMEM,
    (False, True): Direction.LMEM_TO_DDR,
    (False, False): Direction.LMEM_TO_LMEM,
}


def elements(record: TensorRecord) -> int:
    return math.prod(record.shape)


def _global(record: TensorRecord) -> bool:
    return record.space == SPACE_GLOBAL


def _widest(cmd: Command) -> int:
    """Element bytes that set the rate: the widest activation operand or result."""
    tensors = [t for t in (*cmd.operands, *cmd.results) if not t.absent]
    return max((element_bytes(t.dtype) for t in tensors), default=1)


ENGINE_UNITS: dict[int, Unit] = {
    isa.TIU_CONV: Unit.CONV,
    isa.TIU_MATMUL: Unit.MATMUL,
    isa.TIU_ARITH: Unit.ARITH,
    isa.TIU_POOL: Unit.POOL,
    isa.TIU_REDUCE: Unit.POOL,
    isa.TIU_LUT: Unit.LUT,
    isa.TIU_CVT: Unit.CONVERT,
    isa.TIU_SFU: Unit.SFU,
    isa.TIU_FARITH: Unit.ARITH,
    isa.TIU_NORM: Unit.NORM,
    isa.TIU_ARG: Unit.POOL,
    isa.TIU_RESIZE: Unit.POOL,
    isa.TIU_RNN: Unit.MATMUL,
}
"""Engine-level TIU opcode -> its unit class (docs/isa.md)."""


def engine_task(cmd: Command) -> Task:
    """The work of an engine-level TIU command, from its block and records."""
    code = cmd.header.opcode
    unit = ENGINE_UNITS[code]
    try:
        block = block_codec.decode_block(code, cmd.params)
    except block_codec.BlockError as exc:
        raise ValueError(str(exc)) from None
    if code == isa.TIU_CONV:
        inp, filt, out = cmd.operands[0], cmd.operands[1], cmd.results[0]
        if block.mode == isa.CONV_TRANSPOSED:
            work = elements(inp) * elements(filt) // max(inp.shape[1], 1)
            return Task(unit, work, element_bytes(inp.dtype))
        macs = elements(out) * elements(filt) // max(out.shape[1], 1)
        if block.mode == isa.CONV_DEPTHWISE:
            return Task(Unit.DEPTHWISE, macs, element_bytes(inp.dtype))
        ic = inp.shape[1] // max(block.group, 1) if len(inp.shape) > 1 else 0
        oc = out.shape[1] if len(out.shape) > 1 else 0
        return Task(unit, macs, element_bytes(inp.dtype), channels=oc, inner=ic)
    if code == isa.TIU_MATMUL:
        inp, out = cmd.operands[0], cmd.results[0]
        work = elements(out) * (inp.shape[-1] if inp.shape else 1)
        rows = elements(out) // max(out.shape[-1], 1) if out.shape else 1
        return Task(unit, work, element_bytes(inp.dtype), rows=rows)
    if code == isa.TIU_POOL:
        unit = Unit.AVGPOOL if block.mode == isa.POOL_AVG else unit
        work = elements(cmd.results[0]) * math.prod(block.kernel or (1,))
        return Task(unit, work, _widest(cmd), converted=_converted(cmd))
    if code in (isa.TIU_REDUCE, isa.TIU_ARG):  # a compare-reduce over the input
        return Task(unit, elements(cmd.operands[0]), _widest(cmd))
    if code == isa.TIU_RESIZE:
        return Task(unit, resize_taps(cmd, block), _widest(cmd))
    if code == isa.TIU_NORM:  # the rows (all but the normalized axis) go on lanes
        inp = cmd.operands[0]
        axis = block.axis if 0 <= block.axis < len(inp.shape) else len(inp.shape) - 1
        rows = elements(inp) // max(inp.shape[axis], 1) if inp.shape else 1
        return Task(unit, elements(inp), _widest(cmd), channels=rows, converted=_converted(cmd))
    if code == isa.TIU_RNN:
        return Task(unit, rnn_work(cmd, block)[0], element_bytes(cmd.operands[0].dtype))
    if code == isa.TIU_FARITH and isa.FARITH_OPS[block.op] in ("Div", "Pow"):
        unit = Unit.SFU  # division and power go through the special-function unit
    if code == isa.TIU_ARITH and block.op != isa.ARITH_MUL and block.n_inputs > 1:
        unit = Unit.RESCALE  # each input requantized by its multiplier, then added
    tensors = [t for t in (*cmd.operands, *cmd.results) if not t.absent]
    return Task(unit, max((elements(t) for t in tensors), default=0), _widest(cmd))


def _converted(cmd: Command) -> int:
    """Elements a kernel run in f32 between casts converts: its first input
    and its result (`Timing.widened`)."""
    return elements(cmd.operands[0]) + elements(cmd.results[0])


RESIZE_TAPS = {"nearest": 1, "linear": 2, "cubic": 4}
"""Source elements per output element and resized axis."""


def resize_taps(cmd: Command, block: isa.ResizeBlock) -> int:
    """Window elements of a resize: output elements × taps per resized axis
    (an axis whose size changes), as a depthwise window on the pool unit."""
    inp, out = cmd.operands[0], cmd.results[0]
    resized = sum(i != o for i, o in zip(inp.shape, out.shape, strict=False))
    return elements(out) * RESIZE_TAPS[isa.RESIZE_MODES[block.mode]] ** resized


RNN_GATES = {isa.RNN_LSTM: 4, isa.RNN_GRU: 3}
RNN_ELEMENTWISE = {isa.RNN_LSTM: (5, 4), isa.RNN_GRU: (3, 5)}
"""cell -> (SFU activations, arith products/sums) per hidden unit and step:
LSTM σ(i, o, f), tanh(c̃), tanh(c); f·c, i·c̃, their sum, o·tanh(c).
GRU σ(z, r), tanh(h̃); r·(…), 1 − z, (1 − z)·h̃, z·h, their sum."""


def rnn_work(cmd: Command, block: isa.RnnBlock) -> tuple[int, int, int]:
    """(matmul MACs, SFU elements, arith elements) of a whole sequence:
    MACs = gates × hidden × (input + hidden) × seq × batch × directions."""
    x, _, r = cmd.operands[:3]
    hidden = r.shape[-1] if r.shape else 0
    steps = elements(x) // max(x.shape[-1], 1)  # seq × batch
    cells = hidden * steps * block.directions
    macs = RNN_GATES[block.cell] * cells * (x.shape[-1] + hidden)
    sfu, arith = RNN_ELEMENTWISE[block.cell]
    return macs, sfu * cells, arith * cells


def gate_tasks(cmd: Command) -> tuple[Task, ...]:
    """The elementwise work after an RNN's matmuls (SFU, then arith); none
    for other commands."""
    if cmd.header.opcode != isa.TIU_RNN:
        return ()
    try:
        block = block_codec.decode_block(isa.TIU_RNN, cmd.params)
    except block_codec.BlockError as exc:
        raise ValueError(str(exc)) from None
    _, sfu, arith = rnn_work(cmd, block)
    width = _widest(cmd)
    return Task(Unit.SFU, sfu, width), Task(Unit.ARITH, arith, width)


def compute_task(cmd: Command) -> Task:
    """The TIU work of a command (ValueError: unknown opcode, bad params)."""
    if cmd.header.opcode in ENGINE_UNITS:
        return engine_task(cmd)
    raise ValueError(f"unknown opcode {cmd.header.opcode:#x}")


def _move(nbytes: int, direction: Direction, kind: str, runs=0, scattered=0, shuffled=0):
    task = Task(Unit.DMA, nbytes, direction=direction, runs=runs, scattered=scattered,
                shuffled=shuffled)  # fmt: skip
    return Phase(task, kind)


def transposed(record: TensorRecord) -> bool:
    """Its last axis (of more than one element) is not contiguous."""
    axes = [(n, s) for n, s in zip(record.shape, record.strides, strict=False) if n > 1]
    return bool(record.strides) and bool(axes) and axes[-1][1] != 1


def runs(record: TensorRecord) -> int:
    """Contiguous runs of a strided record: its elements over the longest
    row-major tail of its strides (1: contiguous)."""
    if not record.strides:
        return 1
    run = 1
    for size, stride in zip(reversed(record.shape), reversed(record.strides), strict=False):
        if size > 1 and stride != run:
            break
        run *= size
    return max(elements(record) // max(run, 1), 1)


def within_lanes(record: TensorRecord) -> bool:
    """Its batch and channel axes (rank >= 3) keep their row-major strides:
    a transpose of it reorders each channel's map only (on its lane)."""
    if len(record.shape) < 3:
        return False
    return record.element_strides()[:2] == contiguous_strides(record.shape)[:2]


def _strided(src: TensorRecord, dst: TensorRecord) -> tuple[int, int, int]:
    """(row bursts, scattered, shuffled elements) of a move: a transposing
    move goes element by element across lanes, or shuffles each channel's
    map within its lane; another moves in rows of its contiguous runs."""
    if not (transposed(src) or transposed(dst)):
        return max(runs(src), runs(dst)), 0, 0
    if within_lanes(src) and within_lanes(dst):
        return 0, 0, elements(dst)
    return 0, elements(dst), 0


def _dma_phase(cmd: Command) -> Phase:
    """A GDMA command: its destination's bytes in the direction of its
    records' spaces. A fill has no source (it writes at the rate of a move
    within the destination's memory); a gather also reads its indices."""
    dst = cmd.results[0]
    if cmd.header.opcode == isa.GDMA_FILL:
        return _move(dst.nbytes, _DIRECTIONS[_global(dst), _global(dst)], "fill")
    src = cmd.operands[0]
    direction = _DIRECTIONS[_global(src), _global(dst)]
    if cmd.header.opcode == isa.GDMA_GATHER:
        return _move(dst.nbytes + cmd.operands[1].nbytes, direction, "gather")
    return _move(dst.nbytes, direction, "move", *_strided(src, dst))


ROW_STORES = frozenset({Unit.CONV, Unit.DEPTHWISE, Unit.POOL, Unit.AVGPOOL, Unit.RESCALE})
"""Units whose global results are stored channel by channel (the vendor's
GDMA_TENSOR, C on lanes); the others' move as one flat matrix spread over
the lanes (GDMA_MATRIX), and loads stream on the suite."""

LANES = 64  # bm1684x's NPU lanes (the chip the row figures were fitted on)
NARROW_ROW_BYTES = 128  # [assumed] a DDR burst; fit to the suite (1-64 B rows: a burst each)
"""A stored row narrower than this costs a whole row burst (`Timing.dma_burst_cycles`)."""


def channel_rows(record: TensorRecord) -> int:
    """Rows of a channel-by-channel store: batch × channels (rank >= 3);
    1-byte tensors one row per lane (consecutive channels share a lane)."""
    channels = record.shape[1]
    if element_bytes(record.dtype) == 1:
        channels = min(channels, LANES)
    return record.shape[0] * channels


def lane_rows(record: TensorRecord) -> int:
    """Rows of a store that spreads a map of fewer channels than lanes over
    every lane: batch × max(channels, lanes) (rank >= 3)."""
    return record.shape[0] * max(record.shape[1], LANES)


LANE_FILLING = frozenset(isa.SFU_FUNCTIONS.index(f) for f in ("Relu", "LeakyRelu"))
"""TIU_SFU functions the vendor runs as its prelu kernel, which spreads a
map of fewer channels than lanes over every lane before storing it by rows."""


def _stored_rows(cmd: Command, unit: Unit) -> int:
    """Narrow row bursts of a command's global results: rows narrower than
    NARROW_ROW_BYTES each cost a burst (0: its rows stream)."""
    if unit in ROW_STORES:
        rows_of = channel_rows
    elif cmd.header.opcode == isa.TIU_SFU and _sfu_function(cmd) in LANE_FILLING:
        rows_of = lane_rows
    else:
        return 0
    total = 0
    for t in cmd.results:
        if _global(t) and len(t.shape) >= 3:
            rows = rows_of(t)
            total += rows if t.nbytes < rows * NARROW_ROW_BYTES else 0
    return total


def _sfu_function(cmd: Command) -> int:
    try:
        return block_codec.decode_block(isa.TIU_SFU, cmd.params).function
    except block_codec.BlockError as exc:
        raise ValueError(str(exc)) from None


def command_phases(cmd: Command) -> tuple[Phase, ...]:
    """What a command does, phase by phase (module docstring)."""
    if cmd.header.opcode in isa.GDMA_OPCODES:
        return (_dma_phase(cmd),)
    loads = sum(t.nbytes for t in cmd.operands if not t.absent and _global(t))
    stores = sum(t.nbytes for t in cmd.results if _global(t))
    compute = compute_task(cmd)
    phases = [Phase(compute, "compute")]
    phases += [Phase(task, "compute") for task in gate_tasks(cmd)]
    if loads:
        phases.insert(0, _move(loads, Direction.DDR_TO_LMEM, "load"))
    if stores:
        rows = _stored_rows(cmd, compute.unit)
        phases.append(_move(stores, Direction.LMEM_TO_DDR, "store", rows))
    return tuple(phases)
