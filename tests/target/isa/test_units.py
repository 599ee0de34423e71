"""Commands of the instruction set as cycle-model work (tpuc/target/isa/units.py)."""

from __future__ import annotations

import pytest

from tpuc.target.chips import get_chip
from tpuc.target.chips.timing import Direction, Unit
from tpuc.target.cost import ENGINE_TIU, Job, schedule
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    ENGINE_GDMA,
    RECORD_BYTES,
    SPACE_LOCAL,
    Command,
    Header,
    TensorRecord,
)
from tpuc.target.isa.records import (
    ENGINE_TIU as TIU_CODE,
)
from tpuc.target.isa.units import command_phases, compute_task

BM1684X = get_chip("bm1684x").timing


def conv(group: int = 1, space: int = 0) -> Command:
    ic = oc = 64
    mode = isa.CONV_DEPTHWISE if group > 1 else isa.CONV_NORMAL
    ones = (1, 1)
    block = isa.ConvBlock(
        mode, 2, group, (3, 3), ones, ones, (1, 1), (1, 1), (), 0, isa.RequantBlock()
    )
    params = block_codec.encode_block(isa.TIU_CONV, block)
    inp = TensorRecord(0x1000, "i8", (1, ic, 56, 56), space=space)
    filt = TensorRecord(0x100000, "i8", (oc, ic // group, 3, 3), space=space)
    out = TensorRecord(0x200000, "i8", (1, oc, 56, 56), space=space)
    header = Header(isa.TIU_CONV, TIU_CODE, 1, 0, 2, 1, len(params) // RECORD_BYTES)
    return Command(header, [inp, filt], [out], params)


def test_conv_macs_from_shapes_and_kernel():
    task = compute_task(conv())
    assert (task.unit, task.work, task.element_bytes) == (Unit.CONV, 56 * 56 * 64 * 64 * 9, 1)


def test_depthwise_conv_has_its_own_unit():
    task = compute_task(conv(group=64))
    assert (task.unit, task.work) == (Unit.DEPTHWISE, 56 * 56 * 64 * 9)


def test_a_conv_names_its_lanes_and_input_channels():
    task = compute_task(conv())
    assert (task.channels, task.inner) == (64, 64)


def test_a_global_conv_loads_computes_and_stores():
    # load: input 200,704 B + filter 36,864 B = 237,568 B at 58 GiB/s -> 3815 + 200 = 4015
    # compute: 115,605,504 MACs / 16384 per cycle = 7056 + 64 = 7120 (64 channels: full)
    # store: 200,704 B at 44 GiB/s = 4248.2 -> 4249 + 200 = 4449
    phases = command_phases(conv())
    assert [p.kind for p in phases] == ["load", "compute", "store"]
    assert [p.task.work for p in (phases[0], phases[2])] == [237568, 200704]
    timeline = schedule({ENGINE_TIU: [Job(0, phases)]}, BM1684X)
    assert [s.cycles for s in timeline.spans] == [4015, 7120, 4449]
    assert timeline.cycles == 15584


def test_local_operands_cost_no_dma():
    assert [p.kind for p in command_phases(conv(space=SPACE_LOCAL))] == ["compute"]


def test_a_copy_is_one_move_in_its_direction():
    src = TensorRecord(0x1000, "f32", (4, 8), (1, 4))  # a transposed view
    dst = TensorRecord(0x0, "f32", (4, 8), space=SPACE_LOCAL)
    cmd = Command(Header(isa.GDMA_MOVE, ENGINE_GDMA, 1, 0, 1, 1, 0), [src], [dst])
    (phase,) = command_phases(cmd)
    assert (phase.task.work, phase.task.direction) == (128, Direction.DDR_TO_LMEM)
    assert phase.task.scattered == 32  # the source is read one element at a time


def pool_1x1(dtype: str, channels: int) -> Command:
    """A global average pooling of a 7x7 map: one element per channel stored."""
    block = isa.PoolBlock(
        isa.POOL_AVG, 0, 2, 2, 4, (7, 7), (7, 7), (0, 0, 0, 0), isa.RequantBlock()
    )
    params = block_codec.encode_block(isa.TIU_POOL, block)
    inp = TensorRecord(0x1000, dtype, (1, channels, 7, 7))
    out = TensorRecord(0x200000, dtype, (1, channels, 1, 1))
    header = Header(isa.TIU_POOL, TIU_CODE, 1, 0, 1, 1, len(params) // RECORD_BYTES)
    return Command(header, [inp], [out], params)


def test_a_pooled_map_of_one_element_is_stored_a_row_per_channel():
    # f32: 256 rows of 4 B, each narrower than a burst (1x1 maps)
    assert command_phases(pool_1x1("f32", 256))[-1].task.runs == 256
    # int8: consecutive channels share a lane, one row per lane
    assert command_phases(pool_1x1("i8", 256))[-1].task.runs == 64
    # a wide map streams: a global conv's 56x56 rows cost their bytes only
    assert command_phases(conv())[-1].task.runs == 0


def test_a_permute_within_lanes_shuffles_one_across_lanes_scatters():
    def move(strides):
        src = TensorRecord(0x1000, "f32", (1, 16, 28, 28), strides)
        dst = TensorRecord(0x100000, "f32", (1, 16, 28, 28))
        return command_phases(Command(Header(isa.GDMA_MOVE, ENGINE_GDMA, 1, 0, 1, 1, 0),
                                      [src], [dst]))[0].task  # fmt: skip

    within = move((12544, 784, 1, 28))  # order 0, 1, 3, 2: each channel's map transposed
    assert (within.shuffled, within.scattered) == (12544, 0)
    across = move((12544, 1, 448, 16))  # channels moved inward
    assert (across.shuffled, across.scattered) == (0, 12544)


def test_unknown_opcode():
    cmd = conv()
    cmd.header = Header(0x3FF, TIU_CODE, 1, 0, 2, 1, 1)
    with pytest.raises(ValueError, match="unknown opcode 0x3ff"):
        command_phases(cmd)


def test_engine_opcodes_are_priced():
    """Engine-level TIU commands: unit by opcode, work from block and records."""
    from tpuc.target.isa import engine as isa
    from tpuc.target.isa.units import ENGINE_UNITS

    assert set(ENGINE_UNITS) == isa.TIU_ENGINE_OPCODES
    req = isa.RequantBlock()
    inp = TensorRecord(0x1000, "i8", (1, 64, 56, 56))
    out = TensorRecord(0x200000, "i8", (1, 64, 56, 56))
    for mode, group, unit in (
        (isa.CONV_NORMAL, 1, Unit.CONV),
        (isa.CONV_DEPTHWISE, 64, Unit.DEPTHWISE),
    ):
        filt = TensorRecord(0x100000, "i8", (64, 64 // group, 3, 3))
        block = isa.ConvBlock(mode, 2, group, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (), 0, req)
        params = block_codec.encode_block(isa.TIU_CONV, block)
        header = Header(isa.TIU_CONV, TIU_CODE, 1, 0, 3, 1, len(params) // RECORD_BYTES)
        task = compute_task(
            Command(header, [inp, filt, TensorRecord(0, "f32", (), space=0xFF)], [out], params)
        )
        assert task.unit is unit and task.work == 56 * 56 * 64 * (64 // group) * 9
    pool = isa.PoolBlock(isa.POOL_AVG, 0, 2, 2, 4, (2, 2), (2, 2), (0, 0, 0, 0), req)
    params = block_codec.encode_block(isa.TIU_POOL, pool)
    small = TensorRecord(0x200000, "i8", (1, 64, 28, 28))
    header = Header(isa.TIU_POOL, TIU_CODE, 1, 0, 1, 1, 1)
    task = compute_task(Command(header, [inp], [small], params))
    assert task.unit is Unit.AVGPOOL and task.work == 64 * 28 * 28 * 4  # mode 0: average
    load = Command(
        Header(isa.GDMA_LOAD, ENGINE_GDMA, 1, 0, 1, 1, 0),
        [small],
        [TensorRecord(0, "i8", (1, 64, 28, 28), space=SPACE_LOCAL)],
    )
    (phase,) = command_phases(load)
    assert phase.task.direction is Direction.DDR_TO_LMEM and phase.task.work == 64 * 28 * 28


def test_fill_gather_and_arg_are_priced():
    """A fill writes its destination's bytes (no source: DDR->DDR for a
    global one), a gather moves its destination's bytes and reads its
    indices, an Arg is a compare-reduce over its input on the pool unit."""
    from tpuc.target.isa import engine as isa

    dst = TensorRecord(0x2000, "f16", (4, 8))
    params = block_codec.encode_block(isa.GDMA_FILL, isa.FillBlock(0.5))
    fill = Command(Header(isa.GDMA_FILL, ENGINE_GDMA, 1, 0, 0, 1, 1), [], [dst], params)
    (phase,) = command_phases(fill)
    assert (phase.task.work, phase.task.direction) == (64, Direction.DDR_TO_DDR)
    src, idx = TensorRecord(0x0, "f16", (9, 8)), TensorRecord(0x1000, "f32", (4,))
    params = block_codec.encode_block(isa.GDMA_GATHER, isa.GatherBlock(0))
    gather = Command(Header(isa.GDMA_GATHER, ENGINE_GDMA, 1, 0, 2, 1, 1), [src, idx], [dst], params)
    (phase,) = command_phases(gather)
    assert (phase.task.work, phase.task.direction) == (64 + 16, Direction.DDR_TO_DDR)
    params = block_codec.encode_block(isa.TIU_ARG, isa.ArgBlock(0, 1, 0, 1))
    out = TensorRecord(0x3000, "f32", (4, 1))
    arg = Command(Header(isa.TIU_ARG, TIU_CODE, 1, 0, 1, 1, 1), [dst], [out], params)
    task = compute_task(arg)
    assert task.unit is Unit.POOL and task.work == 32
    assert [p.kind for p in command_phases(arg)] == ["load", "compute", "store"]


def test_resize_and_rnn_are_priced():
    """TIU_RESIZE: output elements × taps^(resized axes) on the pool unit;
    TIU_RNN: the sequence's MACs on matmul, then gate work on sfu and arith."""
    from tpuc.target.isa import engine as isa

    inp = TensorRecord(0x1000, "f16", (1, 3, 5, 6))
    out = TensorRecord(0x2000, "f16", (1, 3, 10, 6))  # one resized axis
    for mode, taps in ((0, 1), (1, 2), (2, 4)):
        block = isa.ResizeBlock(mode, 0, 0, 0, 2, 0, -0.75, (10, 6), ())
        params = block_codec.encode_block(isa.TIU_RESIZE, block)
        header = Header(isa.TIU_RESIZE, TIU_CODE, 1, 0, 1, 1, 1)
        task = compute_task(Command(header, [inp], [out], params))
        assert (task.unit, task.work, task.element_bytes) == (Unit.POOL, 180 * taps, 2)
    # bidirectional LSTM: seq 7, batch 2, input 3, hidden 5
    x = TensorRecord(0x1000, "f32", (7, 2, 3))
    w = TensorRecord(0x2000, "f32", (2, 20, 3))
    r = TensorRecord(0x3000, "f32", (2, 20, 5))
    absent = TensorRecord(0, "f32", (), space=0xFF)
    ys = [TensorRecord(0x4000, "f32", (7, 2, 2, 5)), *[TensorRecord(0x5000, "f32", (2, 2, 5))] * 2]
    params = block_codec.encode_block(isa.TIU_RNN, isa.RnnBlock(isa.RNN_LSTM, 2, 0, 0, 0, 5))
    header = Header(isa.TIU_RNN, TIU_CODE, 1, 0, 6, 3, 1)
    cmd = Command(header, [x, w, r, absent, absent, absent], ys, params)
    compute = [p.task for p in command_phases(cmd) if p.kind == "compute"]
    cells = 5 * 7 * 2 * 2  # hidden × seq × batch × directions
    assert [(t.unit, t.work) for t in compute] == [
        (Unit.MATMUL, 4 * cells * (3 + 5)),
        (Unit.SFU, 5 * cells),
        (Unit.ARITH, 4 * cells),
    ]
