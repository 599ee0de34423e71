"""Every float TOP kernel runs a kernel-library function on a record built
once per op (`library(op_class, build, run)`), so the device simulator can
run the same functions from decoded commands."""

from __future__ import annotations

from tpuc.dialects import top
from tpuc.interp.top_ops import KERNELS
from tpuc.interp.top_ops.registry import LIBRARY


def test_every_top_kernel_is_a_library_kernel():
    assert [cls.__name__ for cls in KERNELS if cls not in LIBRARY] == []


def test_library_runs_live_in_the_ir_free_package():
    for cls, (_build, run) in LIBRARY.items():
        assert run.__module__.startswith("tpuc.kernels."), (cls.__name__, run.__module__)


def test_records_are_built_from_attributes():
    op = top.ConcatOp.make([], "c", {"axis": 2, "do_relu": True, "relu_limit": 6.0})
    build, _run = LIBRARY[top.ConcatOp]
    record = build(op)
    assert record.axis == 2 and record.relu.on and record.relu.limit == 6.0
