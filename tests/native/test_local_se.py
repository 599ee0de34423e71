"""Squeeze-excite blocks in one native layer group (PP-OCR's MobileNetV3):
the hard-swish and hard-sigmoid LUTs (INT8: the table on every lane), the
global average pool (INT8: a convolution of ones) and the broadcast Mul
as local ops, run in the vendor runtime against tpuc's TPU interpreter
(INT8 bit for bit) and tpuc's global native bmodel of the same ops; a
group holding the global pool is cut along N, never H.
"""

from __future__ import annotations

import numpy as np
import pytest
from native_models import check
from se_block import lowered_ops, se_block_onnx


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    made = {}

    def get(images: int, channels: int = 16):
        key = (images, channels)
        if key not in made:
            work = tmp_path_factory.mktemp(f"se{images}_{channels}")
            made[key] = (work, *se_block_onnx(work, images, channels))
        return made[key]

    return get


def run_group(block, mode: str, pick, vendor, nsecs: int = 1):
    """(group outputs, global native outputs, interpreter outputs, plan)."""
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import generate_native
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.target.vendor.run import run_native

    work, mlir, table = block
    module, expected, inputs, ops = lowered_ops(work, mlir, table, mode)
    plan = plan_chain(pick(ops), NativeContext(module), nsecs=nsecs)
    outs = []
    for name, groups in (("group", [plan]), ("global", [])):
        path = work / f"{mode}_{name}_{nsecs}.bmodel"
        path.write_bytes(generate_native(module, vendor, profile=False, groups=groups).bmodel)
        outs.append(run_native(path, inputs, vendor, fixed=mode == "INT8"))
    real = run_native(work / f"{mode}_group_{nsecs}.bmodel", inputs, vendor)
    return real, outs[0], outs[1], expected, plan


def same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(np.asarray(a[name]), np.asarray(b[name])), name


def body(ops):
    """The block's ops from its input quantization (INT8) or first conv to the Mul."""
    return [op for op in ops if op.name != "tpu.Cast" or op is ops[0]][: len(ops) - 1]


@pytest.mark.parametrize(("images", "channels", "nsecs"), [(1, 16, 1), (2, 16, 2), (1, 88, 1)])
def test_int8_se_block_group(blocks, vendor, images, channels, nsecs):
    """88 channels: two planes on some lanes (the pool's broadcast
    coefficient is lane 0's, which holds the most)."""
    block = blocks(images, channels)
    real, group, glob, expected, plan = run_group(block, "INT8", body, vendor, nsecs)
    check(real, expected, "INT8")
    same(group, glob)
    assert plan.steps == nsecs
    assert [lop.op.name for lop in plan.ops][-4:] == ["tpu.Conv2D", "tpu.Conv2D", "tpu.Lut",
                                                      "tpu.Mul"]  # fmt: skip


def test_se_block_is_not_cut_along_h(blocks):
    from tpuc.base.errors import TpucError
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain

    work, mlir, table = blocks(1)
    module, _, _, ops = lowered_ops(work, mlir, table, "INT8")
    with pytest.raises(TpucError, match="whole input plane"):
        plan_chain(body(ops), NativeContext(module), hsecs=2)


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_half_se_block_group(blocks, vendor, mode):
    """F16/BF16: the depthwise convolution, hard-swish (tpu.Active), the
    average pool and the hard-sigmoid in f32 between local casts, the
    broadcast Mul in the half type; bit for bit against the global
    layers, which take the same f32 detours."""
    real, group, glob, expected, plan = run_group(blocks(1, 88), mode, lambda ops: ops[1:-1],
                                                  vendor)  # fmt: skip
    check(real, expected, mode)
    same(group, glob)
    assert len(plan.ops) == 8


def test_lifetimes_and_shared_local_memory(blocks):
    """reuse.lifetimes of a one-step group: an op's result lives from its
    compute (iteration 1, its row) to its last reader's row, or to its
    store (iteration 2); allocate with lifetimes never gives two buffers
    alive together overlapping bytes, and lets the block's buffers share."""
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.plan import allocate
    from tpuc.passes.native.local.reuse import lifetimes

    work, mlir, table = blocks(1, 88)
    module, _, _, ops = lowered_ops(work, mlir, table, "INT8")
    plan = plan_chain(body(ops), NativeContext(module))
    rows = len(plan.timesteps)
    alive = lifetimes(plan)
    row = {id(lop.op): r for r, lop in enumerate(plan.ops)}
    for lop in plan.ops:
        first, last = alive[id(plan.tensors[lop.op.results[0]])]
        assert first == rows + row[id(lop.op)]
        readers = [rows + row[id(u.operation)] for u in lop.op.results[0].uses
                   if id(u.operation) in row]  # fmt: skip
        stored = lop.op.results[0] in plan.outputs
        assert last == (2 * rows if stored else max(readers))
    allocate(plan, alive)
    placed = [(t, a, t.lane_bytes()) for t in plan.tensors.values() for a in t.addrs]
    placed += [(lop, lop.buffer_addr, lop.buffer_size) for lop in plan.ops if lop.buffer_size]
    shared = 0
    for i, (a, x, n) in enumerate(placed):
        for b, y, m in placed[i + 1 :]:
            (s, e), (t, f) = alive[id(a)], alive[id(b)]
            overlap = x < y + m and y < x + n
            if s <= f and t <= e:
                assert not overlap
            shared += overlap
    assert shared > 0
