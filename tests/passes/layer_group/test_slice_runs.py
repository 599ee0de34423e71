"""The planner prices a slice's load or store by its row bursts, as the
cycle model prices the GDMA command it becomes (tpuc.target.isa.units.runs)."""

from __future__ import annotations

from tpuc.passes.layer_group.cost import move, slice_runs
from tpuc.target.chips import get_chip
from tpuc.target.chips.timing import Direction
from tpuc.target.isa.records import TensorRecord
from tpuc.target.isa.units import runs

WHOLE = (1, 64, 56, 56)


def test_whole_tensor_is_one_run():
    assert slice_runs(WHOLE, WHOLE) == 1


def test_an_h_slice_is_one_run_per_channel():
    assert slice_runs((1, 64, 7, 56), WHOLE) == 64


def test_a_w_slice_is_one_run_per_row():
    assert slice_runs((1, 64, 56, 28), WHOLE) == 64 * 56


def test_the_planner_counts_what_the_cycle_model_counts():
    # the H slice as a GDMA record: strides of the whole tensor
    record = TensorRecord(0, "i8", (1, 64, 7, 56), (64 * 56 * 56, 56 * 56, 56, 1))
    assert runs(record) == slice_runs((1, 64, 7, 56), WHOLE)


def test_short_rows_cost_a_burst_each():
    timing = get_chip("bm1684x").timing
    # 64·56 rows of 28 B: 3584 bursts × 9.8 cycles > 100,352 B at 58 GiB/s
    assert move(100352, Direction.DDR_TO_LMEM, timing, 3584) == 200 + 35124
