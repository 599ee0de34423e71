"""The layer-group pass on a lowered network, in its place in the finalize
stage (after subnet-divide, before address-assign): it moves each group's
ops into a tpu.Group, changes nothing else (ungrouping gives back the
module), and the later passes still run."""

from __future__ import annotations

import pytest
from final_models import lowered

from tpuc.base.module_state import state_of
from tpuc.dialects.base import from_attr
from tpuc.dialects.tpu import GroupOp, LoadOp, StoreOp
from tpuc.dialects.tpu.group import local_of
from tpuc.ir.core import main_function
from tpuc.ir.weights import WeightStore, attach_weights
from tpuc.passes.layer_group.attach import CYCLES_ATTR, clear, module_groups
from tpuc.passes.registry import get_pass
from tpuc.workflow.pipeline import run_passes


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    module, store, _ = lowered(tmp_path_factory.mktemp("lg"))
    return module, store


def _run(net, names):
    module, store = net
    copy = module.clone()
    attach_weights(copy, WeightStore(store))
    run_passes(copy, [get_pass(name)() for name in names])
    return copy


def _names(ops) -> set[str]:
    return {op.attributes["name"].data for op in ops}


def test_the_pass_only_groups_and_address_assign_still_runs(net):
    before = ["weight-reorder", "subnet-divide"]
    grouped = _run(net, [*before, "layer-group"])
    assert state_of(grouped).value == "TPU_DIVIDED"
    groups = module_groups(grouped)
    assert groups, "the conv/relu/add runs of the network form groups"
    members = [op for g in groups for op in g.layers()]
    assert all(local_of(op) is not None for op in members)
    for g in groups:  # every global value a group reads comes through a load
        loaded = {load.source for load in g.loads()}
        assert all(v in loaded for op in g.layers() for v in op.operands if v in loaded)
        assert all(isinstance(s, StoreOp) for s in g.yielded_stores())
        assert all(isinstance(op, LoadOp) for op in g.block.ops if op.name == "tpu.Load")
    # TopK (a CPU op), Softmax and the reshapes are global layers
    assert not {op.name for op in members} & {"tpu.TopK", "tpu.Softmax", "tpu.Reshape"}
    grouped_cycles, all_global = from_attr(grouped.attributes[CYCLES_ATTR])
    assert 0 < grouped_cycles < all_global

    plain = _run(net, before)
    block = main_function(grouped).body.block
    clear(grouped, block)
    assert not any(isinstance(op, GroupOp) for op in block.ops)
    # ungrouped: the same ops and module (leaves between a group's ops moved before it)
    ops = [op for op in block.ops if "name" in op.attributes]
    plain_ops = [op for op in main_function(plain).body.block.ops if "name" in op.attributes]
    assert _names(ops) == _names(plain_ops)
    again = _run((grouped, net[1]), ["layer-group"])
    assert len(module_groups(again)) == len(groups)

    after = _run(net, [*before, "layer-group", "address-assign"])
    assert state_of(after).value == "TPU_ADDRESSED"


def test_disable_keeps_every_op_global(net):
    module = _run(net, ["weight-reorder", "subnet-divide"])
    run_passes(module, [get_pass("layer-group")(disable=True)])
    assert module_groups(module) == []
    grouped_cycles, all_global = from_attr(module.attributes[CYCLES_ATTR])
    assert grouped_cycles == all_global
