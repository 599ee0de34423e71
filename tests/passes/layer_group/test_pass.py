"""The layer-group pass on a lowered network, in its place in the finalize
stage (after subnet-divide, before address-assign): it annotates and
changes nothing else, and the later passes still run."""

from __future__ import annotations

import pytest
from final_models import lowered

from tpuc.base.module_state import state_of
from tpuc.dialects.base import from_attr
from tpuc.ir.core import main_function
from tpuc.ir.weights import WeightStore, attach_weights
from tpuc.passes.layer_group.attach import CYCLES_ATTR, GROUPS_ATTR, OP_ATTR, clear
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


def test_the_pass_only_annotates_and_address_assign_still_runs(net):
    before = ["weight-reorder", "subnet-divide"]
    grouped = _run(net, [*before, "layer-group"])
    assert state_of(grouped).value == "TPU_DIVIDED"
    ops = list(main_function(grouped).body.block.ops)
    groups = from_attr(grouped.attributes[GROUPS_ATTR])
    assert groups, "the conv/relu/add runs of the network form groups"
    names = {name for g in groups for name in from_attr(g.data["ops"])}
    marked = {op.attributes["name"].data for op in ops if OP_ATTR in op.attributes}
    assert names == marked
    # TopK (a CPU op), Softmax and the reshapes are global layers
    kinds = {op.name for op in ops if OP_ATTR in op.attributes}
    assert not kinds & {"tpu.TopK", "tpu.Softmax", "tpu.Reshape"}
    grouped_cycles, all_global = from_attr(grouped.attributes[CYCLES_ATTR])
    assert 0 < grouped_cycles < all_global

    plain = _run(net, before)
    clear(grouped, ops)
    assert str(grouped) == str(plain)  # nothing but the annotations changed

    after = _run(net, [*before, "layer-group", "address-assign"])
    assert state_of(after).value == "TPU_ADDRESSED"


def test_disable_keeps_every_op_global(net):
    module = _run(net, ["weight-reorder", "subnet-divide"])
    run_passes(module, [get_pass("layer-group")(disable=True)])
    assert from_attr(module.attributes[GROUPS_ATTR]) == []
    grouped_cycles, all_global = from_attr(module.attributes[CYCLES_ATTR])
    assert grouped_cycles == all_global
    assert not any(OP_ATTR in op.attributes for op in main_function(module).body.block.ops)
