"""address-assign (passes/address_assign.py, passes/liveness.py): the book's
Fig. 5-27 reuse rule, a conv chain that needs two buffers, and on a real
lowered network (TopK in the middle, reshapes, two outputs) checked pair by
pair with live ranges computed here: no two tensors live at the same time
share memory unless one is a reshape of the other, alignment, regions,
determinism, and the TPU interpreter giving the same results on the
addressed module. finalize() runs the three passes; bad requests fail with
one line."""

from __future__ import annotations

import math

import numpy as np
import pytest
from final_models import lowered
from xdsl.dialects import func
from xdsl.dialects.builtin import StringAttr

from tpuc.base.errors import TpucError
from tpuc.dialects import top, tpu
from tpuc.interp.tpu_interpreter import TpuInterpreter
from tpuc.ir.context import make_context
from tpuc.ir.core import main_function
from tpuc.ir.module_io import module_attr, module_text, parse_module
from tpuc.ir.weights import WeightStore
from tpuc.passes.address_assign import address_of, tensor_bytes
from tpuc.passes.registry import get_pass
from tpuc.target.chips import get_chip
from tpuc.workflow.pipeline import finalize

RESHAPES = (tpu.ReshapeOp, tpu.FlattenOp, tpu.SqueezeOp, tpu.UnsqueezeOp)


def assign(text: str, chip: str = "bm1684x"):
    module = parse_module(text, "test")
    get_pass("address-assign")(chip=chip).apply(make_context(), module)
    module.verify()
    return module


def ops_by_name(module) -> dict[str, object]:
    body = main_function(module).body.block.ops
    return {op.names[0]: op for op in body if hasattr(op, "names")}


# --- the allocator on hand-written modules -----------------------------------------------


def relu_chain(shapes: list[tuple[str, str]]) -> str:
    """x -> op(V0) ... as text; each entry (name, op) reads the previous one."""
    lines = ['%x = "top.Input"(%arg0) {name = "x"} : (tensor<1x16xf32>) -> tensor<1x16xf32>']
    prev = "%x"
    for name, kind in shapes:
        t = "tensor<1x16xf32>"
        lines.append(f'%{name} = "{kind}"({prev}) {{name = "{name}"}} : ({t}) -> {t}')
        prev = f"%{name}"
    body = "\n    ".join(lines)
    return (
        "builtin.module {\n  func.func @main(%arg0: tensor<1x16xf32>) -> tensor<1x16xf32> {\n"
        f"    {body}\n    func.return {prev} : tensor<1x16xf32>\n  }}\n}}\n"
    )


FIG_5_27 = """
builtin.module {
  func.func @main(%arg0: tensor<1x16xf32>) -> tensor<1x16xf32> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %v0 = "tpu.Relu"(%x) {name = "V0"} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %a = "tpu.Relu"(%v0) {name = "a"} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %b = "tpu.Relu"(%a) {name = "b"} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    %c = "tpu.Add"(%v0, %b) {name = "c"} : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
    %v1 = "tpu.Relu"(%c) {name = "V1"} : (tensor<1x16xf32>) -> tensor<1x16xf32>
    func.return %v1 : tensor<1x16xf32>
  }
}
"""


def test_fig_5_27_op4_does_not_take_v0_and_op5_reuses_it():
    module = assign(FIG_5_27)
    addr = {n: address_of(op.results[0]) for n, op in ops_by_name(module).items()}
    assert addr["V1"] == addr["V0"]
    assert addr["c"] != addr["V0"] and addr["c"] != addr["b"]
    assert len(set(addr.values())) == 3  # 6 tensors of 64 bytes in 3 buffers
    assert module_attr(module, "neuron_size") == 3 * 64


def test_conv_chain_needs_two_buffers():
    """Ten 64 KiB tensors in a chain: each dies when the next is written,
    so two buffers hold them all (far below the sum, within 3 largest)."""
    convs = []
    prev, lines = "%x", []
    t = "tensor<1x16x32x32xf32>"
    for i in range(10):
        lines.append(f'%w{i} = "top.Weight"() {{name = "w{i}"}} : () -> tensor<1x16x16x9xf32>')
        lines.append(
            f'%c{i} = "tpu.Conv2D"({prev}, %w{i}, %n) {{name = "c{i}", kernel_shape = [3, 3], '
            f"pads = [1, 1, 1, 1]}} : ({t}, tensor<1x16x16x9xf32>, none) -> {t}"
        )
        prev = f"%c{i}"
        convs.append(f"c{i}")
    body = "\n    ".join(lines)
    text = (
        f"builtin.module {{\n  func.func @main(%arg0: {t}) -> {t} {{\n"
        f'    %x = "top.Input"(%arg0) {{name = "x"}} : ({t}) -> {t}\n'
        '    %n = "top.None"() : () -> none\n'
        f"    {body}\n    func.return {prev} : {t}\n  }}\n}}\n"
    )
    module = assign(text)
    size = 16 * 32 * 32 * 4
    assert module_attr(module, "neuron_size") == 2 * size
    assert module_attr(module, "neuron_size") <= 3 * size < 11 * size
    # weights: consecutive 4 KiB-aligned slots in graph order
    ops = ops_by_name(module)
    w_addr = [address_of(ops[f"w{i}"].results[0]) for i in range(10)]
    slot = math.ceil(16 * 16 * 9 * 4 / 4096) * 4096
    assert w_addr == [0x100000000 + i * slot for i in range(10)]
    assert module_attr(module, "coeff_size") == 10 * slot
    assert module_attr(module, "neuron_addr") == 0x100000000 + 10 * slot
    assert address_of(ops_by_name(module)["c0"].operands[2]) is None  # top.None


def test_odd_sizes_are_aligned_per_chip():
    text = relu_chain([("a", "tpu.Relu"), ("b", "tpu.Relu")]).replace("1x16x", "1x5x")
    for chip, align in (("bm1684x", 64), ("cv183x", 16)):
        module = assign(text, chip)
        addrs = [address_of(op.results[0]) for op in ops_by_name(module).values()]
        assert all(a % align == 0 for a in addrs)
        assert module_attr(module, "neuron_addr") % 4096 == 0
        assert module_attr(module, "coeff_addr") == get_chip(chip).gmem_start


def test_bad_modules_fail_with_one_line():
    dynamic = relu_chain([("a", "tpu.Relu")]).replace("1x16x", "?x16x")
    with pytest.raises(TpucError, match=r"tensor 'x' \(top.Input\) has no static shape"):
        assign(dynamic)
    huge = relu_chain([("a", "tpu.Relu")]).replace("1x16x", "1x80x1024x1024x")
    with pytest.raises(TpucError, match="needs .* bytes of global memory, cv182x has 268435456"):
        assign(huge, "cv182x")
    with pytest.raises(TpucError, match="address-assign: the module has no chip"):
        assign(relu_chain([]), chip="")
    lowered_text = relu_chain([]).replace("builtin.module {", _state("TPU_LOWERED"))
    with pytest.raises(TpucError, match="needs TPU_DIVIDED; run subnet-divide first"):
        assign(lowered_text)


def _state(state: str) -> str:
    return f'builtin.module attributes {{module.state = "{state}"}} {{'


# --- a real lowered network ----------------------------------------------------------------


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    """(lowered module, its store)."""
    module, store, _ = lowered(tmp_path_factory.mktemp("net"))
    return module, store


def finalized(net, chip="bm1684x", groups=False):
    """The finalize stage on a copy; every op global unless `groups`."""
    module, store = net
    copy, copy_store = module.clone(), WeightStore(store)
    finalize(copy, copy_store, chip, disable_layer_group=not groups)
    return copy, copy_store


def live_ranges(module) -> dict:
    """value -> (first, last) op index, computed independently: inputs from
    0, returned values to the end, unused results at their op."""
    block = main_function(module).body.block
    ops = [op for op in block.ops if not isinstance(op, func.ReturnOp)]
    ranges = {}
    for i, op in enumerate(ops):
        if isinstance(op, top.WeightOp | top.NoneOp):
            continue
        for value in op.results:
            users = [ops.index(u.operation) for u in value.uses if u.operation in ops]
            end = len(ops) if any(isinstance(u.operation, func.ReturnOp) for u in value.uses) else i
            start = 0 if isinstance(op, top.InputOp) else i
            ranges[value] = (start, max([end, *users]))
    return ranges


def alias_root(value):
    while isinstance(value.owner, RESHAPES):
        value = value.owner.operands[0]
    return value


def test_live_tensors_never_share_memory(net):
    module, _ = finalized(net)
    ranges = live_ranges(module)
    spans = {v: (address_of(v), address_of(v) + tensor_bytes(v)) for v in ranges}
    values = list(ranges)
    checked = 0
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            (s1, e1), (s2, e2) = ranges[a], ranges[b]
            if s1 > e2 or s2 > e1 or alias_root(a) is alias_root(b):
                continue
            checked += 1
            assert spans[a][1] <= spans[b][0] or spans[b][1] <= spans[a][0], (a, b)
    assert checked > 20
    # and no op's result overlaps one of its operands (reshapes excepted)
    for op in main_function(module).body.block.ops:
        if isinstance(op, (*RESHAPES, func.ReturnOp, top.WeightOp, top.NoneOp)):
            continue
        for r in op.results:
            for x in op.operands:
                if address_of(x) is None:
                    continue
                lo, hi = address_of(x), address_of(x) + tensor_bytes(x)
                assert spans[r][1] <= lo or hi <= spans[r][0], (op.name, op.names)


def test_regions_alignment_and_reuse(net):
    module, _ = finalized(net)
    chip = get_chip("bm1684x")
    attrs = {k: module_attr(module, k) for k in ("coeff_addr", "coeff_size", "neuron_addr")}
    neuron_size = module_attr(module, "neuron_size")
    assert attrs["coeff_addr"] == chip.gmem_start and attrs["coeff_size"] % 4096 == 0
    assert attrs["neuron_addr"] == attrs["coeff_addr"] + attrs["coeff_size"]
    weights, activations = [], []
    for op in main_function(module).body.block.ops:
        if isinstance(op, top.NoneOp | func.ReturnOp):
            assert all(address_of(r) is None for r in op.results)
            continue
        (weights if isinstance(op, top.WeightOp) else activations).extend(op.results)
    coeff_end = attrs["coeff_addr"] + attrs["coeff_size"]
    spans = sorted((address_of(w), address_of(w) + tensor_bytes(w)) for w in weights)
    assert all(a % 4096 == 0 and attrs["coeff_addr"] <= a and e <= coeff_end for a, e in spans)
    assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:], strict=False))
    for v in activations:
        a = address_of(v)
        assert a % 64 == 0
        assert attrs["neuron_addr"] <= a and a + tensor_bytes(v) <= attrs["neuron_addr"] + (
            neuron_size
        )
    total = sum(-(-tensor_bytes(v) // 64) * 64 for v in activations)
    assert neuron_size < total / 2  # reuse (in place and by liveness)


def test_layer_groups_place_only_what_lives_in_ddr(net):
    module, _ = finalized(net, groups=True)
    ops = [op for op in main_function(module).body.block.ops if not isinstance(op, func.ReturnOp)]
    group = {
        op: op.attributes["lg"].data["group"].value.data for op in ops if "lg" in op.attributes
    }
    assert group, "the net forms no layer group"
    spans: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        if op in group:
            spans.setdefault(group[op], [i, i])[1] = i
    ranges = live_ranges(module)
    internal = 0
    for value in list(ranges):
        users = [u.operation for u in value.uses]
        if value.owner in group and all(group.get(u) == group[value.owner] for u in users):
            assert address_of(value) is None  # local memory only
            del ranges[value]
            internal += 1
            continue
        assert address_of(value) is not None
        for g in {group[o] for o in (value.owner, *users) if o in group}:
            start, end = ranges[value]
            ranges[value] = (min(start, spans[g][0]), max(end, spans[g][1]))
    assert internal > 0
    values = list(ranges)
    for i, a in enumerate(values):
        for b in values[i + 1 :]:
            (s1, e1), (s2, e2) = ranges[a], ranges[b]
            if s1 > e2 or s2 > e1 or alias_root(a) is alias_root(b):
                continue
            lo_a, lo_b = address_of(a), address_of(b)
            assert lo_a + tensor_bytes(a) <= lo_b or lo_b + tensor_bytes(b) <= lo_a, (a, b)
    whole, _ = finalized(net)
    assert module_attr(module, "neuron_size") <= module_attr(whole, "neuron_size")


def test_multi_results_reshapes_and_signature(net):
    module, _ = finalized(net)
    ops = ops_by_name(module)
    topk = ops["tv"]
    values, indices = topk.results
    assert address_of(values) != address_of(indices)
    reshapes = [op for op in ops.values() if isinstance(op, tpu.ReshapeOp)]
    assert len(reshapes) == 2
    for op in reshapes:
        assert address_of(op.results[0]) == address_of(op.operands[0])
    main = main_function(module)
    returned = list(main.body.block.last_op.operands)
    assert list(main.function_type.outputs) == [v.type for v in returned]
    assert all(address_of(v) is not None for v in returned)
    assert address_of(ops["x"].results[0]) is not None  # inputs are addressed too


def test_deterministic(net):
    first, _ = finalized(net)
    second, _ = finalized(net)
    assert module_text(first) == module_text(second)


@pytest.mark.parametrize(
    "chip, mode", [("bm1684x", "INT8"), ("bm1684x", "F16"), ("cv183x", "INT8"), ("cv183x", "BF16")]
)
def test_interpreter_runs_addressed_module_unchanged(tmp_path, chip, mode):
    """subnet-divide + address-assign only (the interpreter reads the
    lowered weight layouts): every tensor equals the lowered module's."""
    module, store, inputs = lowered(tmp_path, chip, mode)
    before = TpuInterpreter(module).run(store, inputs, dump_all=True)
    module.attributes["module.state"] = StringAttr("TPU_REORDERED")
    ctx = make_context()
    get_pass("subnet-divide")().apply(ctx, module)
    get_pass("address-assign")().apply(ctx, module)
    module.verify()
    assert address_of(main_function(module).body.block.last_op.operands[0]) is not None
    after = TpuInterpreter(module).run(store, inputs, dump_all=True)
    assert after.keys() == before.keys()
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


def test_finalize_states_and_chip(net):
    module, store = finalized(net)
    assert module_attr(module, "state") == "TPU_ADDRESSED"
    with pytest.raises(TpucError, match="weight-reorder: module is in state TPU_ADDRESSED"):
        finalize(module, store, "bm1684x")
    original = net[0]
    with pytest.raises(TpucError, match="finalize: chip=cv183x but the module is for bm1684x"):
        finalize(original.clone(), WeightStore(net[1]), "cv183x")
