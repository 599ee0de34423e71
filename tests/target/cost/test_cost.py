"""The cycle model on hand-computed cases (bm1684x figures, tpuc/target/chips/timing.py).

bm1684x: TIU issue 64 cycles, GDMA latency 200 cycles (fitted, cycle_fit.py); int8 conv 32·1024 ops
per cycle (= 16384 MACs), f16 16·1024; DDR->DDR 28 GiB/s at 1 GHz =
28·2^30/10^9 bytes per cycle.
"""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction

import pytest

from tpuc.base.errors import TpucError
from tpuc.target.chips import get_chip
from tpuc.target.chips.timing import Direction, Unit, bytes_per_cycle, ops_per_cycle
from tpuc.target.cost import ENGINE_GDMA, ENGINE_TIU, Job, Phase, Task, cycles, schedule

BM1684X = get_chip("bm1684x").timing

# 1x64x56x56 output, 64 input channels, 3x3 kernel:
# 56·56·64 outputs × 64·9 MACs each = 115,605,504 MACs = 231,211,008 ops.
CONV_MACS = 56 * 56 * 64 * 64 * 9
CONV = Task(Unit.CONV, CONV_MACS, element_bytes=1)
# 1 MiB DDR->DDR: 2^20 / (28·2^30/10^9) = 10^9/28672 = 34877.2… -> 34878 cycles.
MOVE = Task(Unit.DMA, 1 << 20, direction=Direction.DDR_TO_DDR)


def test_rates_are_the_published_figures_in_ops_per_cycle():
    assert ops_per_cycle(32) == 32768  # 32 "TOPS" of 1024·10^9 ops/s at 1 GHz
    assert BM1684X.rate(Unit.CONV, 1) == 32768
    assert BM1684X.rate(Unit.CONV, 2) == 16384
    assert BM1684X.rate(Unit.CONV, 4) == 2048
    assert BM1684X.rate(Unit.ARITH, 1) == 64 * 64  # lanes × int8 EU elements
    assert BM1684X.rate(Unit.LUT, 2) == 128  # fitted to the vendor's cycles (published: 64)
    assert bytes_per_cycle(58, 1000) == Fraction(58 * 2**30, 10**9)


def test_one_conv():
    # 231,211,008 ops / 32768 = 7056 cycles exactly, + 64 issue = 7120
    assert cycles(CONV, BM1684X) == 7120
    # f16: / 16384 = 14112, + 64 = 14176
    assert cycles(Task(Unit.CONV, CONV_MACS, element_bytes=2), BM1684X) == 14176


def test_one_dma():
    # 34878 transfer + 200 latency
    assert cycles(MOVE, BM1684X) == 35078
    # 237,568 B DDR->LMEM: 232·1024·10^9/(58·2^30) = 4·10^9/2^20 = 3814.7 -> 3815, + 200
    load = Task(Unit.DMA, 237568, direction=Direction.DDR_TO_LMEM)
    assert cycles(load, BM1684X) == 4015


def test_special_functions_cost_several_ops_per_element():
    # 4096 f32 exps: 4096 × 16 ops / 1024 per cycle = 64, + 64 issue
    assert cycles(Task(Unit.SFU, 4096, element_bytes=4), BM1684X) == 128


def test_a_conv_pays_for_the_lanes_and_input_channels_it_leaves_empty():
    # 16 -> 16 channels: output channels padded to 64 lanes (×4), input
    # channels to the int8 cube's step of 64 (×4): 16× the full-cube cycles
    macs = 56 * 56 * 16 * 16 * 9  # 7,225,344 MACs = 14,450,688 ops / 32768 = 441
    task = Task(Unit.CONV, macs, element_bytes=1, channels=16, inner=16)
    assert cycles(task, BM1684X) == 64 + 441 * 16
    # f32 has an input-channel step of 1: only the lanes count
    task32 = Task(Unit.CONV, macs, element_bytes=4, channels=16, inner=16)
    assert cycles(task32, BM1684X) == 64 + 7056 * 4  # 14,450,688 ops / 2048 = 7056


def test_a_strided_move_pays_per_row_burst_or_per_element():
    # 200,704 B DDR->DDR: 200,704 / 30.06 B per cycle = 6675.7 -> 6676, + 200
    plain = Task(Unit.DMA, 200704, direction=Direction.DDR_TO_DDR)
    assert cycles(plain, BM1684X) == 200 + 6676
    # in 3584 rows of 56 B: each row burst at least 9.8 cycles = 35123.2 > 6675.7
    rows = Task(Unit.DMA, 200704, direction=Direction.DDR_TO_DDR, runs=3584)
    assert cycles(rows, BM1684X) == 200 + 35124
    # transposed, 200,704 elements at 0.09 cycles each = 18063.36 on top
    scattered = Task(Unit.DMA, 200704, direction=Direction.DDR_TO_DDR, scattered=200704)
    assert cycles(scattered, BM1684X) == 200 + 24740  # 6675.7 + 18063.4 = 24739.1


def test_a_normalization_pays_its_fixed_cost_and_its_rows_on_lanes():
    # 1000 f32 elements in one row: the row fills 1 of 64 lanes (×64);
    # 64,000 × 16 ops / 921.6 per cycle = 1111.1 -> 1112, + 64 issue + 370 fixed
    assert cycles(Task(Unit.NORM, 1000, element_bytes=4, channels=1), BM1684X) == 1546


def test_a_transpose_within_lanes_costs_less_than_one_across_them():
    # 12,544 f32 elements (50,176 B DDR->DDR: 1669.0 cycles) reordered within
    # each lane at 0.05 cycles each (627.2) or across lanes at 0.09 (1129.0)
    within = Task(Unit.DMA, 50176, direction=Direction.DDR_TO_DDR, shuffled=12544)
    across = Task(Unit.DMA, 50176, direction=Direction.DDR_TO_DDR, scattered=12544)
    assert cycles(within, BM1684X) == 200 + 2297  # 1669.0 + 627.2 = 2296.2
    assert cycles(across, BM1684X) == 200 + 2798  # 1669.0 + 1129.0 = 2797.9


def test_narrow_stored_rows_cost_a_burst_each():
    # 64 rows of 4 B (a 1x1 map per channel) stored: 25 cycles each
    rows = Task(Unit.DMA, 256, direction=Direction.LMEM_TO_DDR, runs=64)
    assert cycles(rows, BM1684X) == 200 + 1600


def test_a_16_bit_softmax_runs_in_f32_between_casts():
    # the f32 softmax: 1000 × 16 ops × 64 (one lane of 64) / 921.6 = 1111.1 -> 1112, + 434
    f32 = Task(Unit.NORM, 1000, element_bytes=4, channels=1, converted=2000)
    assert cycles(f32, BM1684X) == 1546
    # plus two casts: 2 × (64 issue + 2 × 200 latency) = 928, and 2000 elements
    # × 3 × (1/62.27 + 1/47.24) B per cycle = 223.4, + 2000 / 1024 converted = 2.0
    half = Task(Unit.NORM, 1000, element_bytes=2, channels=1, converted=2000)
    assert cycles(half, BM1684X) == 1546 + 928 + 226


def _streams(tiu_wait: int, gdma_wait: int) -> dict:
    return {
        ENGINE_TIU: [Job(tiu_wait, (Phase(CONV, "compute"),))],
        ENGINE_GDMA: [Job(gdma_wait, (Phase(MOVE, "move"),))],
    }


def test_independent_pair_overlaps():
    # neither waits: both start at 0; total = max(7120, 35078)
    timeline = schedule(_streams(0, 0), BM1684X)
    assert [(s.engine, s.start, s.end) for s in timeline.spans] == [
        (ENGINE_TIU, 0, 7120),
        (ENGINE_GDMA, 0, 35078),
    ]
    assert timeline.cycles == 35078
    assert timeline.busy(ENGINE_TIU) == 7120


def test_dependent_pair_adds_up():
    # the move waits for TIU command 1: it starts at 7120; total = 7120 + 35078
    timeline = schedule(_streams(0, 1), BM1684X)
    assert timeline.spans[1].start == 7120
    assert timeline.cycles == 42198
    # the other way round: the conv waits for GDMA command 1
    assert schedule(_streams(1, 0), BM1684X).cycles == 42198


def test_phases_of_a_global_layer_run_in_sequence_on_their_engines():
    load = Task(Unit.DMA, 237568, direction=Direction.DDR_TO_LMEM)  # 4015
    job = Job(0, (Phase(load, "load"), Phase(CONV, "compute")))
    timeline = schedule({ENGINE_TIU: [job]}, BM1684X, start=100)
    assert [(s.engine, s.start, s.end) for s in timeline.spans] == [
        (ENGINE_GDMA, 100, 4115),
        (ENGINE_TIU, 4115, 11235),
    ]
    assert timeline.cycles == 4015 + 7120


def test_waits_that_cannot_be_met_are_one_line():
    with pytest.raises(TpucError, match="group 0: the TIU and GDMA streams wait"):
        schedule(_streams(1, 1), BM1684X, what="group 0")


def test_the_cost_model_imports_no_ir():
    code = (
        "import sys, tpuc.target.cost, tpuc.target.isa.units; "
        "bad = [m for m in sys.modules if m.startswith(('xdsl', 'tpuc.dialects', 'tpuc.interp'))]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
