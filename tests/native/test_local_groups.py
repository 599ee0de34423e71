"""Native layer groups (tpuc.passes.native.local): hand-built plans of a
small chain written as the chip's local commands, run in the vendor
runtime, against tpuc's TPU interpreter and tpuc's global native bmodel of
the same ops (INT8 bit for bit; F16/BF16 here also bit for bit, which the
chip's float kernels on these shapes give); the planner's price against
the vendor's cycles for the commands then emitted; the plan's slices,
local memory and timesteps without the vendor.

(a) the two convolutions (conv+relu, conv+relu) cut into H slices (1, 3,
    and 10 slices of 2 rows, where a slice's input starts at row 0
    without being the first); (b) conv+relu+add with a second input; and
conv, max pools and a stride-2 conv over two images cut over N and H.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from local_groups import chain_onnx, depthwise_chain_onnx, lowered, pool_chain_onnx
from native_models import check


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    work = tmp_path_factory.mktemp("local_groups")
    return work, *chain_onnx(work)


@pytest.fixture(scope="module")
def pools(tmp_path_factory):
    work = tmp_path_factory.mktemp("local_pools")
    return work, *pool_chain_onnx(work)


@pytest.fixture(scope="module")
def avg_pools(tmp_path_factory):
    work = tmp_path_factory.mktemp("local_avg_pools")
    return work, *pool_chain_onnx(work, "AveragePool")


@pytest.fixture(scope="module")
def depthwise(tmp_path_factory):
    work = tmp_path_factory.mktemp("local_depthwise")
    return work, *depthwise_chain_onnx(work)


def run_group(chain, mode: str, pick, hsecs: int, vendor, nsecs: int = 1, asymmetric=False):
    """(group outputs, global native outputs, interpreter outputs, plan)."""
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import generate_native
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.target.vendor.run import run_native

    work, mlir, table = chain
    module, expected, inputs, ops = lowered(work, mlir, table, mode, asymmetric)
    plan = plan_chain(pick(ops), NativeContext(module), hsecs=hsecs, nsecs=nsecs)
    outs = []
    for name, groups in (("group", [plan]), ("global", [])):
        path = work / f"{mode}_{name}_{hsecs}.bmodel"
        path.write_bytes(generate_native(module, vendor, profile=False, groups=groups).bmodel)
        outs.append(run_native(path, inputs, vendor, fixed=mode == "INT8"))
    real = run_native(work / f"{mode}_group_{hsecs}.bmodel", inputs, vendor)
    return real, outs[0], outs[1], expected, plan


def same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(np.asarray(a[name]), np.asarray(b[name])), name


@pytest.mark.parametrize("hsecs", [1, 3, 10])
def test_int8_conv_chain_in_h_slices(chain, vendor, hsecs):
    real, group, glob, expected, plan = run_group(chain, "INT8", lambda ops: ops[:2], hsecs, vendor)
    check(real, expected, "INT8")
    same(group, glob)
    assert plan.steps == hsecs


@pytest.mark.parametrize("mode", ["INT8", "F16", "BF16"])
def test_conv_relu_add_group(chain, vendor, mode):
    real, group, glob, expected, _ = run_group(chain, mode, lambda ops: ops[1:3], 4, vendor)
    check(real, expected, mode)
    same(group, glob)


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_float_whole_chain(chain, vendor, mode):
    real, group, glob, expected, _ = run_group(chain, mode, lambda ops: ops, 5, vendor)
    check(real, expected, mode)
    same(group, glob)


@pytest.mark.parametrize(
    ("mode", "nsecs", "hsecs"), [("INT8", 2, 2), ("INT8", 1, 4), ("F16", 2, 3)]
)
def test_conv_pool_chain_in_n_and_h_slices(pools, vendor, mode, nsecs, hsecs):
    """conv, 2x2/2 max pool, stride-2 conv, padded 3x3 max pool: one group
    over two images, cut over N and H."""
    real, group, glob, expected, plan = run_group(
        pools, mode, lambda ops: ops, hsecs, vendor, nsecs
    )
    check(real, expected, mode)
    same(group, glob)
    assert plan.steps == nsecs * hsecs


def test_int8_average_pools(avg_pools, vendor):
    """The pool chain with average pools (INT8: u8 multiplier, half up; the
    padded 3x3 counts its pad), two images in 2 x 2 slices."""
    real, group, glob, expected, _ = run_group(avg_pools, "INT8", lambda ops: ops, 2, vendor, 2)
    check(real, expected, "INT8")
    same(group, glob)


@pytest.mark.parametrize("fixture", ["chain", "depthwise"])
def test_asymmetric_int8_chains(fixture, request, vendor):
    """Asymmetric INT8 in 3 H slices: the local convolutions take the input
    zero point as the global rule does (padding worth Z_in, −Z_in·Σw in the
    bias; a depthwise relu left to the saturation), bit for bit."""
    chain = request.getfixturevalue(fixture)
    pick = (lambda ops: ops[:2]) if fixture == "chain" else (lambda ops: ops)
    real, group, glob, expected, _ = run_group(chain, "INT8", pick, 3, vendor, asymmetric=True)
    check(real, expected, "INT8")
    same(group, glob)


@pytest.mark.parametrize("hsecs", [1, 3])
def test_int8_depthwise_chain(depthwise, vendor, hsecs):
    """conv, depthwise 3x3, depthwise 5x5 stride 2 over 80 channels (INT8;
    a float depthwise is refused: the chip's half-float kernel rounds
    otherwise than tpuc, the global rule computes it in f32)."""
    real, group, glob, expected, _ = run_group(depthwise, "INT8", lambda ops: ops, hsecs, vendor)
    check(real, expected, "INT8")
    same(group, glob)


def test_price_is_the_vendor_cycles_of_the_emitted_commands(chain, vendor):
    """GroupPricer (issuing off, cached) == the cycles the same commands add
    when emitted for real == the profile's total of a subnet holding them."""
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.emit import build_calls
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.emit import GroupPricer, global_commands, group_commands
    from tpuc.target.vendor.worker import Worker

    work, mlir, table = chain
    module, _, _, ops = lowered(work, mlir, table, "INT8")
    ctx = NativeContext(module)
    calls = dict(build_calls(module, ctx))
    with GroupPricer(vendor) as pricer:
        for hsecs in (1, 4):
            commands = group_commands(plan_chain(ops, ctx, hsecs=hsecs), ctx)
            price = pricer.price(commands)
            assert pricer.price(commands) == price
            with Worker("backend", vendor.lib, "vendor backend") as w:  # one subnet each
                w.call("begin", "begin", True)
                emitted = w.call("the group", "run", commands)
                assert price == emitted == w.call("end", "end")["cycles"] > 0
        assert pricer.asked == 2  # the repeats came from the cache
        alone = pricer.price([c for op in ops for c in global_commands(op, calls[op])])
        assert alone > pricer.price(group_commands(plan_chain(ops, ctx), ctx))


def test_a_crash_inside_a_group_names_the_op(vendor):
    """A local call the library dies on (here a 1-byte conv param: SIGFPE)
    ends the worker, not tpuc: one error naming the group and the op."""
    from tpuc.base.errors import TpucError
    from tpuc.target.vendor.worker import Worker

    bad = ("local", "conv_7", "backend_api_conv_local", b"\0", [], bytes(96), [], [])
    with Worker("backend", vendor.lib, "vendor backend") as worker:
        worker.call("begin", "begin", False)
        with pytest.raises(TpucError) as caught:
            worker.call("the layer group of conv_7", "run", [("divide",), bad, ("merge",)])
    message = str(caught.value)
    assert "\n" not in message
    assert "crashed on the layer group of conv_7 (local of 'conv_7')" in message


# --- without the vendor ------------------------------------------------------------------------


def test_plan_slices_memory_and_timesteps(chain):
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain
    from tpuc.passes.native.local.plan import BANK_BYTES, LMEM_BYTES, Slice

    work, mlir, table = chain
    module, _, _, ops = lowered(work, mlir, table, "INT8")
    plan = plan_chain(ops, NativeContext(module), hsecs=3)
    x, c1, c2, z = ops[0].operands[0], ops[0].results[0], ops[1].results[0], ops[2].results[0]
    assert [s.h_slice for s in plan.tensors[z].slices] == [7, 7, 6]
    # 3x3 pad 1 twice: two rows of halo each side, clamped at the edges
    assert plan.tensors[c2].slices == plan.tensors[z].slices
    assert plan.tensors[c1].slices == (Slice(0, 1, 0, 8), Slice(0, 1, 6, 9), Slice(0, 1, 13, 7))
    assert plan.tensors[x].slices == (Slice(0, 1, 0, 9), Slice(0, 1, 5, 11), Slice(0, 1, 12, 8))
    assert plan.tensors[x].slots == plan.tensors[z].slots == 2  # moved while the next computes
    assert plan.tensors[(ops[0], 0)].held and plan.tensors[(ops[0], 0)].slots == 1
    spans = [(a, a + t.lane_bytes()) for t in plan.tensors.values() for a in t.addrs]
    spans += [(o.buffer_addr, o.buffer_addr + o.buffer_size) for o in plan.ops if o.buffer_size]
    spans.sort()
    assert all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:], strict=False))
    assert spans[-1][1] <= LMEM_BYTES
    banks = [start // BANK_BYTES for start, _ in spans]
    assert len(set(banks)) == len(banks)  # every buffer on a bank of its own
    assert [[i.stage for i in row] for row in plan.timesteps][1:] == [[1], [1]]
    assert {i.stage for i in plan.timesteps[0]} == {0, 1, 2}


def test_plan_refuses_what_it_cannot_slice(chain):
    from tpuc.base.errors import TpucError
    from tpuc.passes.native.context import NativeContext
    from tpuc.passes.native.local.chain import plan_chain

    work, mlir, table = chain
    module, _, _, ops = lowered(work, mlir, table, "INT8")
    ctx = NativeContext(module)
    with pytest.raises(TpucError, match="cannot cut 1 images x 20 rows into 1 x 21"):
        plan_chain(ops, ctx, hsecs=21)
    casts = [o for o in next(iter(module.ops)).body.block.ops if o.name == "tpu.Cast"]
    plan_chain([casts[-1]], ctx)  # the output's dequantization is local now (INT8 -> f32)


@pytest.mark.parametrize("mode", ["F16", "BF16"])
def test_half_depthwise_chain(depthwise, vendor, mode):
    """Half-float depthwise convolutions in f32 between local casts
    (local/half_depthwise.py), in 3 H slices: the global rule's detour, bit
    for bit."""
    real, group, glob, expected, _ = run_group(depthwise, mode, lambda ops: ops, 3, vendor)
    check(real, expected, mode)
    same(group, glob)


def test_sec_info_is_the_headers_local_sec_info_t():
    from tpuc.passes.native.local.ops import SecInfo

    assert ctypes.sizeof(SecInfo) == 96
    assert SecInfo.hw_margins_opdA.offset == 68 and SecInfo.out_addr.offset == 88


def test_three_ic_follows_tpu_mlirs_choice(chain, pools, depthwise):
    """use_3ic_optimize as TPU-MLIR's INT8 weight reorder picks it: kh and kw
    folded when ic·kh·kw <= 64 (3), kh when ic·kh <= 64 (1); none for
    depthwise or float convolutions."""
    from tpuc.dialects import tpu
    from tpuc.passes.native.local.ops import three_ic, three_ic_filter

    def convs(fixture, mode):
        work, mlir, table = fixture
        return [op for op in lowered(work, mlir, table, mode)[3] if isinstance(op, tpu.Conv2DOp)]

    assert [three_ic(op) for op in convs(chain, "INT8")] == [1, 1]  # ic 8 and 16, 3x3
    assert [three_ic(op) for op in convs(pools, "INT8")] == [3, 1]  # ic 3 and 16, 3x3
    assert [three_ic(op) for op in convs(depthwise, "INT8")] == [1, 0, 0]
    assert [three_ic(op) for op in convs(chain, "F16")] == [0, 0]
    op = convs(pools, "INT8")[0]
    assert three_ic_filter(op, 3).shape == (16, 27, 1)  # [oc, ic·kh·kw, 1], same order
