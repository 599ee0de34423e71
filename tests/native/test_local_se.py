"""Squeeze-excite blocks in one native layer group (PP-OCR's MobileNetV3):
the hard-swish and hard-sigmoid LUTs (INT8: the table on every lane), the
global average pool (INT8: a convolution of ones) and the broadcast Mul
as local ops, run in the vendor runtime against tpuc's TPU interpreter
(INT8 bit for bit) and tpuc's global native bmodel of the same ops; a
group holding the global pool is cut along N, never H. The unsliced
block's buffers share local memory by prefetch.py's lifetimes, and the
f32 active kernels work inside their own scratch.
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


def _lowered_plan(blocks, mode: str):
    """(plan of the 88-channel block, its lowered ops) in `mode`, unsliced."""
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain

    work, mlir, table = blocks(1, 88)
    module, _, _, ops = lowered_ops(work, mlir, table, mode)
    picked = body(ops) if mode == "INT8" else ops[1:-1]
    return plan_chain(picked, NativeContext(module)), NativeContext(module)


def _owners(plan):
    """(owner, address, bytes) of every tensor slot and scratch buffer."""
    placed = [(t, a, t.lane_bytes()) for t in plan.tensors.values() for a in t.addrs]
    return placed + [(lop, lop.buffer_addr, lop.buffer_size) for lop in plan.ops if lop.buffer_size]


@pytest.mark.parametrize("mode", ["INT8", "F16"])
def test_lifetimes_and_shared_local_memory(blocks, mode):
    """prefetch.unsliced_timesteps' lifetimes of the one-step block: a
    result lives from its compute row to its last reader's row or its
    store row, a load from its load row to its last reader's, a scratch
    buffer in its op's row; plan.allocate with them never gives two
    buffers alive together overlapping bytes (scratch buffers included),
    and lets the block's buffers share."""
    from tpuc.passes.native.local.costs import Guesses
    from tpuc.passes.native.local.plan import allocate
    from tpuc.passes.native.local.prefetch import unsliced_timesteps

    plan, _ = _lowered_plan(blocks, mode)
    rows, alive = unsliced_timesteps(plan, 0.8, Guesses())
    row_of = {(i.kind, id(i.target)): r for r, row in enumerate(rows) for i in row}
    computed = {id(lop.op): row_of[("compute", id(lop.op))] for lop in plan.ops}
    for key, tensor in plan.tensors.items():
        own = isinstance(key, tuple)
        readers = [
            computed[id(lop.op)]
            for lop in plan.ops
            if (own and key[0] is lop.op) or (not own and key in lop.op.operands)
        ]
        if key in plan.inputs:
            begin = row_of[("load", id(key))]
            assert begin < min(readers)
        else:
            begin = computed[id(key.owner)]
        stored = [row_of[("store", id(key))]] if key in plan.outputs else []
        end = max(readers + stored)
        assert alive[id(tensor)] == (begin, end)
    for lop in plan.ops:
        assert alive[id(lop)] == (computed[id(lop.op)],) * 2
    allocate(plan, alive)
    placed, shared = _owners(plan), 0
    for i, (a, x, n) in enumerate(placed):
        for b, y, m in placed[i + 1 :]:
            (s, e), (t, f) = alive[id(a)], alive[id(b)]
            overlap = x < y + m and y < x + n
            if s <= f and t <= e:
                assert not overlap
            shared += overlap
    assert shared > 0


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_f32_active_kernels_work_inside_their_scratch(blocks, mode):
    """The f32 HSWISH/HSIGMOID kernel works in a buffer as large as its f32
    input (TPU-MLIR's ActiveOp::getBufferSize_bm1684x) at buffer_addr: it
    must lie inside the op's own scratch, after the two f32 copies, or the
    kernel overwrites a tensor alive beside it (buffer_addr 0 clobbered
    the hard-swish output once lifetimes put it at address 0)."""
    from tpuc.passes.native.local.chain import rule_of
    from tpuc.passes.native.local.wide import f32_bytes, wide_buffer
    from tpuc.target.vendor.params import ActiveLocal

    plan, ctx = _lowered_plan(blocks, mode)
    checked = 0
    for lop in plan.ops:
        for command in rule_of(lop.op).command(lop.op, ctx, plan, 0):
            if command[2] != "backend_api_active_local":
                continue
            addr = ActiveLocal.from_buffer_copy(command[3]).buffer_addr
            need = f32_bytes(plan.tensors[lop.op.operands[0]])
            assert addr >= lop.buffer_addr + wide_buffer(lop.op, plan), lop.op.name
            assert addr + need <= lop.buffer_addr + lop.buffer_size, lop.op.name
            checked += 1
    assert checked == 2  # the hard-swish and the hard-sigmoid
