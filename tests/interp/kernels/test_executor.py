"""The kernels' executor (worker threads, scratch, plans) and the arena that
recycles intermediates: unit behaviour, and whole TOP modules whose results
must not change when memory is recycled, overwritten in place or when the
work is shared out to threads (checked against numpy and onnxruntime)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from interp_helpers import assert_close, rand, run_kernel, run_ort
from xdsl.parser import Parser

from tpuc.dialects import top
from tpuc.interp.top_interpreter import TopInterpreter
from tpuc.interp.top_ops import KERNELS
from tpuc.ir.context import make_context
from tpuc.kernels import conv_plan, executor, gemm_conv
from tpuc.kernels.arena import Arena
from tpuc.kernels.executor import Executor, current


def test_parallel_for_runs_each_task_once_across_threads():
    rt = Executor(threads=2, min_shard_work=0)
    seen: list[tuple[int, int]] = []
    with rt.active():
        assert current() is rt
        rt.parallel_for(40, lambda i: seen.append((i, threading.get_ident())))
    assert sorted(i for i, _ in seen) == list(range(40))
    assert current() is executor.SEQUENTIAL


def test_parallel_for_reraises_after_all_tasks_stop():
    rt = Executor(threads=2)
    done: list[int] = []

    def task(i: int) -> None:
        if i == 3:
            raise ValueError("task 3")
        done.append(i)

    with rt.active(), pytest.raises(ValueError, match="task 3"):
        rt.parallel_for(8, task)
    assert 3 not in done


def drive(chooser, times, runs: int) -> list[int]:
    picks = []
    for _ in range(runs):
        pick = chooser.next()
        picks.append(pick)
        chooser.record(pick, times[pick])
    return picks


def test_setting_chooser_probes_rarely_while_the_default_is_fast():
    chooser = executor.SettingChooser([0, 2])
    every = executor.PROBE_EVERY
    picks = drive(chooser, {0: 1.0, 2: 1.1}, 2 * every + 2)
    # the other setting: warmed up and timed at the first periodic probe
    assert [i for i, p in enumerate(picks, 1) if p == 2] == [every, every + 1, 2 * every]


def test_setting_chooser_follows_the_load():
    chooser = executor.SettingChooser([0, 2])
    drive(chooser, {0: 1.0, 2: 3.0}, 4)
    picks = drive(chooser, {0: 2.0, 2: 1.5}, 6)  # the default slowed down
    assert picks[:3] == [0, 2, 2] and picks[-1] == 2
    picks = drive(chooser, {0: 1.0, 2: 1.5}, 3 * executor.PROBE_EVERY)
    assert picks[-1] == 0


def test_scratch_is_kept_per_name_and_thread():
    rt = Executor()
    a = rt.scratch("a", (4, 5))
    assert np.shares_memory(rt.scratch("a", (2, 3)), a)
    assert not np.shares_memory(rt.scratch("b", (4, 5)), a)
    other: list[np.ndarray] = []
    t = threading.Thread(target=lambda: other.append(rt.scratch("a", (4, 5))))
    t.start()
    t.join()
    assert not np.shares_memory(other[0], a)


def test_bordered_buffer_keeps_its_border():
    rt = Executor()
    buf, clean = rt.bordered(("k",), (2, 4, 4), -1.0)
    assert clean and (buf == -1).all()
    buf[:, 1:3, 1:3] = 7
    again, clean = rt.bordered(("k",), (2, 4, 4), -1.0)
    assert clean and again is buf and buf[:, 0].max() == -1


def test_arena_recycles_only_unreferenced_buffers():
    arena = Arena()
    a = arena.empty((3, 4))
    address = a.ctypes.data
    view = a.reshape(12)
    del a
    arena.collect()
    other = arena.empty((3, 4))  # the view keeps the first buffer lent
    assert not np.shares_memory(other, view)
    del view
    arena.collect()
    again = arena.empty((3, 4))
    assert again.base is None and again.ctypes.data == address  # recycled
    assert not np.shares_memory(arena.empty((3, 4)), other)


def test_arena_donors_are_exclusive_and_passed_once():
    arena = Arena()
    env = {"x": arena.empty((2, 3)), "y": arena.empty((2, 3))}
    keep = env["y"][0]  # a live view: y may not be overwritten
    donors = arena.pick_donors(env, ["x", "y"])
    assert len(donors) == 1 and donors[0] is env["x"]
    x = env["x"]
    assert arena.output((2, 3), [x, keep], (0,)) is x
    assert arena.output((2, 3), [x, x], (0, 1)) is not x  # read twice: not in place
    assert arena.output((3, 2), [x], (0,)) is not x  # wrong shape
    del keep


def parse(text: str):
    return Parser(make_context(), text).parse_module()


# y = relu(conv(x)); v = reshape(y) stays alive while y dies at the Add, so
# the Add may not overwrite y; s = y + y + v3 (y read twice); out = s * v'
RECYCLE = """
builtin.module {
  func.func @main(%arg0: tensor<1x4x6x6xf32>) -> (tensor<1x4x6x6xf32>, tensor<1x144xf32>) {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
    %1 = "top.Weight"() {name = "w"} : () -> tensor<4x4x3x3xf32>
    %2 = "top.Weight"() {name = "b"} : () -> tensor<4xf32>
    %3 = "top.Conv"(%0, %1, %2) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1],
        dilations = [1, 1], group = 1 : i64, do_relu = true, name = "y"}
        : (tensor<1x4x6x6xf32>, tensor<4x4x3x3xf32>, tensor<4xf32>) -> tensor<1x4x6x6xf32>
    %4 = "top.Reshape"(%3) {name = "v", shape = [1, 144]}
        : (tensor<1x4x6x6xf32>) -> tensor<1x144xf32>
    %5 = "top.MulConst"(%0) {name = "x3", const_val = 3.0 : f64}
        : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
    %6 = "top.Add"(%3, %3, %5) {name = "s"}
        : (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
    %7 = "top.Sub"(%6, %5) {name = "d"}
        : (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
    %8 = "top.MulConst"(%4) {name = "v2", const_val = 2.0 : f64}
        : (tensor<1x144xf32>) -> tensor<1x144xf32>
    func.return %7, %8 : tensor<1x4x6x6xf32>, tensor<1x144xf32>
  }
}
"""


def recycle_reference(weights, x):
    y = run_ort("Conv", [x, weights["w"], weights["b"]], dict(kernel_shape=[3, 3], pads=[1] * 4))
    y = np.maximum(y[0], 0)
    return {"d": y + y, "v2": 2 * y.reshape(1, 144)}


@pytest.mark.parametrize("threads", [None, 2])
def test_recycled_memory_never_changes_results(threads):
    module = parse(RECYCLE)
    weights = {"w": rand(4, 4, 3, 3), "b": rand(4)}
    interp = TopInterpreter(module, threads=threads)
    first = None
    for _ in range(3):  # later runs reuse the memory of earlier ones
        x = rand(1, 4, 6, 6)
        out = interp.run(weights, {"x": x})
        ref = recycle_reference(weights, x)
        for name in ("d", "v2"):
            assert_close(out[name], ref[name])
        if first is None:
            first, first_ref = out, ref
    for name in ("d", "v2"):  # outputs handed out are never recycled
        assert_close(first[name], first_ref[name])


# a fire module: two convs and the input concatenated on channels; the
# convs may write straight into the Concat's result, the input is copied
FIRE = """
builtin.module {
  func.func @main(%arg0: tensor<1x3x5x5xf32>) -> tensor<1x13x5x5xf32> {
    %0 = "top.Input"(%arg0) {name = "x"} : (tensor<1x3x5x5xf32>) -> tensor<1x3x5x5xf32>
    %1 = "top.Weight"() {name = "w1"} : () -> tensor<4x3x1x1xf32>
    %2 = "top.Weight"() {name = "w3"} : () -> tensor<6x3x3x3xf32>
    %3 = "top.None"() : () -> none
    %4 = "top.Conv"(%0, %1, %3) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0],
        dilations = [1, 1], group = 1 : i64, do_relu = true, name = "e1"}
        : (tensor<1x3x5x5xf32>, tensor<4x3x1x1xf32>, none) -> tensor<1x4x5x5xf32>
    %5 = "top.Conv"(%0, %2, %3) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1],
        dilations = [1, 1], group = 1 : i64, name = "e3"}
        : (tensor<1x3x5x5xf32>, tensor<6x3x3x3xf32>, none) -> tensor<1x6x5x5xf32>
    %6 = "top.Concat"(%4, %5, %0) {name = "cat", axis = 1 : i64}
        : (tensor<1x4x5x5xf32>, tensor<1x6x5x5xf32>, tensor<1x3x5x5xf32>) -> tensor<1x13x5x5xf32>
    func.return %6 : tensor<1x13x5x5xf32>
  }
}
"""


def test_concat_parts_are_written_in_place(monkeypatch):
    module = parse(FIRE)
    weights = {"w1": rand(4, 3, 1, 1), "w3": rand(6, 3, 3, 3)}
    in_place: list[list[bool]] = []
    concat = KERNELS[top.ConcatOp]

    def spy(op, args):
        out = concat(op, args)
        in_place.append([np.shares_memory(a, out) for a in args])
        return out

    monkeypatch.setitem(KERNELS, top.ConcatOp, spy)
    interp = TopInterpreter(module, native=False)  # the numpy path's arena
    for _ in range(2):
        x = rand(1, 3, 5, 5)
        out = interp.run(weights, {"x": x})["cat"]
        e1 = np.maximum(run_ort("Conv", [x, weights["w1"]], dict(kernel_shape=[1, 1]))[0], 0)
        e3 = run_ort("Conv", [x, weights["w3"]], dict(kernel_shape=[3, 3], pads=[1] * 4))[0]
        assert_close(out, np.concatenate([e1, e3, x], axis=1))
    assert in_place == [[True, True, False]] * 2
    dumped = interp.run(weights, {"x": x}, dump_all=True)
    assert not np.shares_memory(dumped["e1"], dumped["cat"])


CONVS = [  # (x shape, w shape, attrs): both cuts, groups, batch, 1-D
    ((1, 8, 12, 12), (16, 8, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((2, 8, 10, 9), (16, 8, 3, 3), dict(strides=[2, 1], pads=[1, 0, 1, 2])),
    ((1, 16, 6, 6), (40, 16, 1, 1), dict()),
    ((2, 8, 7, 7), (12, 4, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),
    ((1, 6, 9, 9), (6, 1, 3, 3), dict(group=6, pads=[1, 1, 1, 1])),  # depthwise
    ((2, 6, 9, 8), (12, 1, 5, 5), dict(group=6, pads=[2, 2, 2, 2])),  # depthwise, 2 per channel
    ((1, 6, 9, 9), (6, 1, 3, 3), dict(group=6, strides=[2, 2], pads=[1, 0, 1, 1])),
    ((1, 4, 20), (8, 4, 3), dict(strides=[2], pads=[1, 1])),
]


@pytest.mark.parametrize("rows_min_m", [1, 1 << 20])
@pytest.mark.parametrize("threads", [None, 2])
@pytest.mark.parametrize("x_shape,w_shape,attrs", CONVS)
def test_conv_blocks_match_onnxruntime(x_shape, w_shape, attrs, threads, rows_min_m, monkeypatch):
    """Tiny blocks (tiles of one output row, one block per channel group of
    the runtime's choice, depthwise blocks of one channel) give
    onnxruntime's results."""
    monkeypatch.setattr(gemm_conv, "TILE_BYTES", 1)
    monkeypatch.setattr(conv_plan, "DW_BLOCK_BYTES", 1)
    monkeypatch.setattr(gemm_conv, "ROWS_MIN_M", rows_min_m)
    monkeypatch.setattr(gemm_conv, "ROWS_PER_BLOCK", 4)
    x, w, b = rand(*x_shape), rand(*w_shape), rand(w_shape[0])
    attrs = dict(kernel_shape=list(w_shape[2:]), **attrs)
    ref = run_ort("Conv", [x, w, b], attrs)[0]
    with Executor(threads=threads, min_shard_work=0).active():
        ours = run_kernel(top.ConvOp, [x, w, b], dict(attrs, do_relu=True))
    assert_close(ours, np.maximum(ref, 0))


def test_depthwise_blocks_never_change_a_result(monkeypatch):
    """Depthwise convs cut into blocks of channels, on 1 or 2 threads, give
    the bytes of one block over the whole tensor (no sum is split)."""
    x, w, b = rand(2, 24, 15, 13), rand(24, 1, 5, 5), rand(24)
    attrs = dict(kernel_shape=[5, 5], pads=[2, 2, 2, 2], group=24, do_relu=True)
    results = []
    for block_bytes, threads in [(1 << 30, 1), (1, 1), (1, 2), (700, 2)]:
        monkeypatch.setattr(conv_plan, "DW_BLOCK_BYTES", block_bytes)
        with Executor(threads=threads, min_shard_work=0).active():
            results.append(run_kernel(top.ConvOp, [x, w, b], attrs).copy())
    assert all(r.tobytes() == results[0].tobytes() for r in results)


def test_a_sibling_shares_memory_and_workers_not_plans():
    """Calibration's INT8 run takes turns with the float run on one working
    set: a sibling recycles its parent's buffers and uses its threads, but
    keeps its own plans (they name its module's ops); `release` lets the
    recycled buffers go."""
    parent = Executor(threads=2, min_shard_work=0)
    child = parent.sibling()
    with parent.active():
        parent.memo("plan", lambda: "parent's")
        lent = parent.empty((4, 4))
        parent.parallel_for(4, lambda i: None)
    del lent
    parent.arena.finish()
    with child.active():
        assert child.memo("plan", lambda: "child's") == "child's"
        assert child.arena is parent.arena
        assert np.shares_memory(child.scratch("s", (2,)), parent.scratch("s", (2,)))
        child.parallel_for(4, lambda i: None)
    assert child._workers() is parent._workers()
    with parent.active():
        buf = parent.empty((8,))
    del buf
    parent.arena.collect()
    assert parent.arena._free
    parent.release()
    assert not parent.arena._free
