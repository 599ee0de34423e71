"""Local memory spread over the NPU lanes (docs/isa.md "Memory spaces"):
hand-built GDMA_LOAD / TIU / GDMA_STORE streams on lane records give numpy's
(or the same command's on global records) results, channel windows land
where the lane formula says, out-of-lane records and unordered TIU/GDMA
pairs sharing local bytes fail at load with one line."""

from __future__ import annotations

import numpy as np
import pytest

from tpuc.base.errors import TpucError
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    ENGINE_GDMA,
    ENGINE_TIU,
    SPACE_LOCAL,
    TENSOR_COEFF,
    TENSOR_LANES_AXIS0,
    TENSOR_LANES_AXIS1,
    TENSOR_QUANTIZED,
    Command,
    Header,
    TensorRecord,
    lane_byte,
    lane_record,
    lane_window,
)
from tpuc.target.isa.units import command_phases
from tpuc.target.runtime.device import Device
from tpuc.target.runtime.engine import engine_step
from tpuc.target.runtime.hazards import check_hazards
from tpuc.target.runtime.program import command_name, interleave
from tpuc.target.runtime.validate import build_step

START = 0x1_0000_0000
TINY = dict(npu_num=2, lmem_bytes=64)
BM1684X = dict(npu_num=64, lmem_bytes=256 * 1024)
EU = {"tiny": 16, "bm1684x": 64}
Q8 = dict(flags=TENSOR_QUANTIZED, scale=1.0, storage_min=-128, storage_max=127)


def device(npu_num: int, lmem_bytes: int) -> Device:
    dev = Device("test", START, 1 << 24, npu_num=npu_num, lmem_bytes=lmem_bytes)
    dev.allocate("activations", START, 1 << 16)
    return dev


def put_global(dev: Device, offset: int, values: np.ndarray) -> None:
    raw = np.ascontiguousarray(values).view(np.uint8).reshape(-1)
    dev.regions[0].bytes[offset : offset + raw.size] = raw


def get_global(dev: Device, offset: int, dtype, shape) -> np.ndarray:
    count = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return dev.regions[0].bytes[offset : offset + count].view(dtype).reshape(shape).copy()


class Streams:
    """TIU and GDMA streams; by default each command waits for the other
    engine's latest command (program order), `wait=` overrides."""

    def __init__(self):
        self.tiu: list[Command] = []
        self.gdma: list[Command] = []

    def add(self, engine, opcode, operands, results, params=b"", kind=1, wait=None):
        mine, other = (self.tiu, self.gdma) if engine == ENGINE_TIU else (self.gdma, self.tiu)
        wait = len(other) if wait is None else wait
        header = Header(
            opcode, engine, len(mine) + 1, wait, len(operands), len(results),
            len(params) // 128, kind=kind,
        )  # fmt: skip
        mine.append(Command(header, operands, results, params))

    def load(self, src, dst, **kw):
        self.add(ENGINE_GDMA, isa.GDMA_LOAD, [src], [dst], **kw)

    def store(self, src, dst, **kw):
        self.add(ENGINE_GDMA, isa.GDMA_STORE, [src], [dst], **kw)

    def run(self, dev: Device) -> None:
        """Load as Program does (checks, steps, hazards), then run."""
        name = lambda c, i: command_name("m.bmodel: subnet 0", c, i)  # noqa: E731
        order = interleave(self.tiu, self.gdma, "m.bmodel: subnet 0 group 0")
        steps = [build_step(engine_step, c, dev, name(c, i)) for i, c in enumerate(order)]
        check_hazards(self.tiu, self.gdma, dev, name)
        for step in steps:
            step.run()


ADD = block_codec.encode_block(isa.TIU_ARITH, isa.ArithBlock(0, 2, (1, 1), isa.RequantBlock()))
EXP = block_codec.encode_block(isa.TIU_SFU, isa.SfuBlock(0, float("nan"), float("nan")))


def test_lane_formula_places_every_element():
    """Byte of element (0, c, h, w): lane (1 + c) % 2, plane (1 + c) // 2 at
    offset 4 + plane·16 + h·4 + w (start lane 1, offset 4, c_stride 16)."""
    dev = device(**TINY)
    rec = lane_record(64 + 4, "i8", (1, 5, 3, 4), **TINY, eu_bytes=16)
    assert rec.strides == (48, 16, 4, 1) and rec.flags == TENSOR_LANES_AXIS1
    values = np.arange(60, dtype=np.int8).reshape(1, 5, 3, 4)
    dev.write(rec, dev.region(rec, "x"), values)
    lanes = dev.local().bytes.reshape(2, 64)
    assert list(lanes[1, 4:16]) == list(range(12))  # channel 0: lane 1, plane 0
    assert list(lanes[0, 20:32]) == list(range(12, 24))  # channel 1: lane 0, plane 1
    assert list(lanes[0, 36:48]) == list(range(36, 48))  # channel 3: lane 0, plane 2
    for index in np.ndindex(rec.shape):
        assert dev.local().bytes[lane_byte(rec, index, **TINY)] == values[index]
    assert np.array_equal(dev.read(rec, dev.region(rec, "x")), values)


@pytest.mark.parametrize("chip", ["tiny", "bm1684x"])
def test_load_arith_store(chip):
    sizes = TINY if chip == "tiny" else BM1684X
    dev = device(**sizes)
    rng = np.random.default_rng(0)
    x, y = (rng.integers(-128, 128, (1, 5, 3, 4), dtype=np.int8) for _ in range(2))
    put_global(dev, 0, x)
    put_global(dev, 256, y)
    gx, gy, gout = (TensorRecord(START + o, "i8", (1, 5, 3, 4), **Q8) for o in (0, 256, 512))
    local = lane_record(0, "i8", (1, 5, 3, 4), **sizes, eu_bytes=EU[chip], **Q8)
    s = Streams()
    s.load(gx, local)
    s.add(ENGINE_TIU, isa.TIU_ARITH, [local, gy], [local], ADD)  # in place, y from DDR
    s.store(local, gout)
    s.run(dev)
    expected = np.clip(x.astype(np.int32) + y, -128, 127).astype(np.int8)
    assert np.array_equal(get_global(dev, 512, np.int8, x.shape), expected)


def test_sfu_on_local_equals_global():
    dev = device(**TINY)
    x = np.linspace(-2, 2, 20, dtype=np.float16).reshape(1, 5, 2, 2)
    put_global(dev, 0, x)
    gx, gout = (TensorRecord(START + o, "f16", x.shape) for o in (0, 256))
    local = lane_record(0, "f16", x.shape, **TINY, eu_bytes=16)
    assert local.strides == (24, 8, 2, 1)
    s = Streams()
    s.load(gx, local)
    s.add(ENGINE_TIU, isa.TIU_SFU, [local], [local], EXP, kind=0)
    s.store(local, gout)
    s.run(dev)
    engine_step(Command(s.tiu[0].header, [gx], [gx], EXP), dev, "x").run()  # on DDR
    assert get_global(dev, 256, np.float16, x.shape).tobytes() == (
        get_global(dev, 0, np.float16, x.shape).tobytes()
    )


def _conv_block():
    req = isa.RequantBlock()
    block = isa.ConvBlock(isa.CONV_NORMAL, 2, 1, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (), 0, req)
    return block_codec.encode_block(isa.TIU_CONV, block)


@pytest.mark.parametrize("sizes", [BM1684X, dict(npu_num=4, lmem_bytes=1024)])
def test_conv_on_local_equals_global(sizes):
    """Input, filter (lanes on axis 0), bias and output in local memory: the
    same bytes as the command on global records (3 filter planes per lane
    on 4 lanes)."""
    dev = device(**sizes)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 5, 4, 4)).astype(np.float32)
    w = rng.standard_normal((10, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    put_global(dev, 0, x)
    put_global(dev, 1024, w)
    put_global(dev, 4096, b)
    gx = TensorRecord(START, "f32", x.shape)
    gw = TensorRecord(START + 1024, "f32", w.shape, flags=TENSOR_COEFF)
    gb = TensorRecord(START + 4096, "f32", b.shape, flags=TENSOR_COEFF)
    gout, gref = (TensorRecord(START + o, "f32", (1, 10, 4, 4)) for o in (8192, 12288))
    lanes = dict(**sizes, eu_bytes=64)
    lx = lane_record(0, "f32", x.shape, **lanes)
    lw = lane_record(128, "f32", w.shape, **sizes, axis=0, flags=TENSOR_COEFF)
    lb = lane_record(128 + 3 * 45 * 4, "f32", b.shape, **sizes, axis=0, flags=TENSOR_COEFF)
    lout = lane_record(704, "f32", (1, 10, 4, 4), **lanes)
    assert lw.flags == TENSOR_LANES_AXIS0 | TENSOR_COEFF and lw.strides == (45, 9, 3, 1)
    s = Streams()
    for src, dst in ((gx, lx), (gw, lw), (gb, lb)):
        s.load(src, dst)
    s.add(ENGINE_TIU, isa.TIU_CONV, [lx, lw, lb], [lout], _conv_block(), kind=0)
    s.store(lout, gout)
    s.run(dev)
    ref = Command(s.tiu[0].header, [gx, gw, gb], [gref], s.tiu[0].params)
    engine_step(ref, dev, "x").run()
    got, expected = (get_global(dev, o, np.float32, (1, 10, 4, 4)) for o in (8192, 12288))
    assert got.tobytes() == expected.tobytes() and np.abs(expected).max() > 0


def test_concat_into_a_channel_window_at_offset_3():
    """npu 2: channel 3 of a 5-channel buffer is lane 1, plane 1; loading
    channels 0-2 and 3-4 into windows, then storing the whole, concatenates."""
    dev = device(**TINY)
    a = np.arange(36, dtype=np.int8).reshape(1, 3, 3, 4)
    b = -np.arange(1, 25, dtype=np.int8).reshape(1, 2, 3, 4)
    put_global(dev, 0, a)
    put_global(dev, 64, b)
    whole = lane_record(0, "i8", (1, 5, 3, 4), **TINY, eu_bytes=16)
    head = lane_window(whole, (0, 0, 0, 0), (1, 3, 3, 4), **TINY)
    tail = lane_window(whole, (0, 3, 0, 0), (1, 2, 3, 4), **TINY)
    assert tail.addr == 64 + 16 and tail.strides == whole.strides
    s = Streams()
    s.load(TensorRecord(START, "i8", a.shape), head)
    s.load(TensorRecord(START + 64, "i8", b.shape), tail)
    s.store(whole, TensorRecord(START + 256, "i8", whole.shape))
    s.run(dev)
    got = get_global(dev, 256, np.int8, whole.shape)
    assert np.array_equal(got, np.concatenate([a, b], axis=1))
    lanes = dev.local().bytes.reshape(2, 64).view(np.int8)
    assert list(lanes[1, 16:28]) == list(b[0, 0].reshape(-1))  # channel 3: lane 1, plane 1


def _load_error(src, dst) -> str:
    s = Streams()
    s.load(src, dst)
    with pytest.raises(TpucError) as info:
        s.run(device(**TINY))
    assert "\n" not in str(info.value)
    return str(info.value)


def test_records_outside_their_lanes():
    src = TensorRecord(START, "i8", (1, 5, 3, 4))
    past = lane_record(40, "i8", (1, 5, 3, 4), **TINY, c_stride=16)  # plane 1 at 56..68
    message = _load_error(src, past)
    assert message == (
        "m.bmodel: subnet 0 GDMA command 0: a i8 record: local [0x38, 0x44) "
        "runs past lane 0's 64 bytes (ends at 0x40)"
    )
    far = lane_record(2 * 64, "i8", (1, 5, 3, 4), **TINY)
    assert "past the 2 NPU lanes of 64 bytes" in _load_error(src, far)
    both = TensorRecord(0, "i8", (1, 4), space=SPACE_LOCAL, flags=TENSOR_LANES_AXIS0 | 8)
    assert _load_error(TensorRecord(START, "i8", (1, 4)), both).endswith("both lane flags set")
    lane_global = TensorRecord(START + 64, "i8", (1, 4), flags=TENSOR_LANES_AXIS1)
    message = _load_error(TensorRecord(START, "i8", (1, 4)), lane_global)
    assert message.endswith("lane flags 8 on a global record")


def _hazard_streams(wait: int) -> Streams:
    """TIU reads buffer A (loaded by GDMA 1) while GDMA 2 loads A again for
    the next slice; `wait`: the GDMA 2's wait for the TIU command."""
    lx = lane_record(0, "i8", (1, 5, 3, 4), **TINY, eu_bytes=16, **Q8)
    gx, gy = (TensorRecord(START + o, "i8", (1, 5, 3, 4), **Q8) for o in (0, 256))
    s = Streams()
    s.load(gx, lx)
    s.add(ENGINE_TIU, isa.TIU_ARITH, [lx, gy], [gy], ADD, wait=1)
    s.load(gy, lx, wait=wait)
    return s


def test_hazard_between_concurrent_load_and_compute():
    with pytest.raises(TpucError) as info:
        _hazard_streams(wait=0).run(device(**TINY))
    assert str(info.value) == (
        "m.bmodel: subnet 0 GDMA command 1 writes local [0x0, 0xc) (lanes 0..1) that "
        "m.bmodel: subnet 0 TIU command 0 reads concurrently: no wait_id orders them"
    )
    _hazard_streams(wait=1).run(device(**TINY))  # the load waits for the compute


def test_concurrent_commands_on_disjoint_buffers_pass():
    """Double buffering: the TIU works on A while GDMA loads B (lane 1,
    other bytes); only the hazard with A would fail."""
    lx = lane_record(0, "i8", (1, 5, 3, 4), **TINY, eu_bytes=16, **Q8)
    other = lane_record(64 + 48, "i8", (1, 1, 3, 4), **TINY, **Q8)  # lane 1, [48, 60)
    gx, gy = (TensorRecord(START + o, "i8", (1, 5, 3, 4), **Q8) for o in (0, 256))
    s = Streams()
    s.load(gx, lx)
    s.add(ENGINE_TIU, isa.TIU_ARITH, [lx, gy], [gy], ADD, wait=1)
    s.load(TensorRecord(START, "i8", (1, 1, 3, 4), **Q8), other, wait=0)
    s.run(device(**TINY))
    window = lane_window(lx, (0, 4, 0, 0), (1, 1, 3, 4), **TINY)  # lane 0, plane 2
    s.gdma[1] = Command(s.gdma[1].header, s.gdma[1].operands, [window])
    with pytest.raises(TpucError, match="GDMA command 1 writes local \\[0x20, 0x2c\\) \\(lane 0"):
        s.run(device(**TINY))


def test_cycle_model_on_lane_records():
    """A TIU command on lane records has no DMA phase; a load moves its
    destination's bytes DDR -> LMEM."""
    lx = lane_record(0, "i8", (1, 5, 3, 4), **BM1684X, eu_bytes=64, **Q8)
    gy = TensorRecord(START, "i8", (1, 5, 3, 4), **Q8)
    s = Streams()
    s.add(ENGINE_TIU, isa.TIU_ARITH, [lx, lx], [lx], ADD)
    s.load(gy, lx)
    assert [p.kind for p in command_phases(s.tiu[0])] == ["compute"]
    (move,) = command_phases(s.gdma[0])
    assert move.task.work == 60 and move.task.direction.name == "DDR_TO_LMEM"


def test_program_load_checks_hazards():
    """The bmodel loader runs the hazard check on every CmdGroup of a TPU subnet."""
    from tpuc.target.bmodel.model import CmdGroup, SubNet
    from tpuc.target.runtime.program import Program

    def subnet(s: Streams) -> SubNet:
        bdc, gdma = (b"".join(c.pack() for c in cmds) for cmds in (s.tiu, s.gdma))
        group = CmdGroup(bdc, gdma, len(s.tiu), len(s.gdma), len(bdc), len(gdma))
        return SubNet(0, "TPU", [group])

    program = Program.__new__(Program)  # only what _steps uses
    program.source, program.device = "m.bmodel", device(**TINY)
    assert len(program._steps(subnet(_hazard_streams(wait=1)))) == 3
    with pytest.raises(TpucError, match="^m.bmodel: subnet 0 GDMA command 1 writes local"):
        program._steps(subnet(_hazard_streams(wait=0)))
