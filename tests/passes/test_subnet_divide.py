"""subnet-divide (passes/subnet_divide.py): a TopK in the middle of a real
lowered network gives TPU, CPU, TPU subnets with ids in graph order; leaves
have none; a network without CPU ops is one TPU subnet; a CPU op first gives
CPU, TPU; state and chip errors are one line."""

from __future__ import annotations

import pytest
from final_models import lowered
from xdsl.dialects import func
from xdsl.dialects.builtin import StringAttr

from tpuc.base.errors import TpucError
from tpuc.dialects import top
from tpuc.ir.context import make_context
from tpuc.ir.core import main_function
from tpuc.ir.module_io import module_attr, parse_module
from tpuc.passes.registry import get_pass
from tpuc.passes.subnet_divide import subnet_of
from tpuc.target.chips import get_chip

LEAVES = (top.InputOp, top.WeightOp, top.NoneOp, func.ReturnOp)


def divide(module, chip: str = ""):
    get_pass("subnet-divide")(chip=chip).apply(make_context(), module)
    module.verify()
    return module


def ids_by_kind(module) -> list[tuple[str, int | None]]:
    return [(op.name, subnet_of(op)) for op in main_function(module).body.block.ops]


@pytest.mark.parametrize("chip, mode", [("bm1684x", "INT8"), ("cv183x", "BF16")])
def test_topk_in_the_middle_gives_tpu_cpu_tpu(tmp_path, chip, mode):
    module, _, _ = lowered(tmp_path, chip, mode)
    module.attributes["module.state"] = StringAttr("TPU_REORDERED")
    divide(module)
    assert module_attr(module, "subnet_modes") == ["TPU", "CPU", "TPU"]
    assert module_attr(module, "state") == "TPU_DIVIDED"
    seen = []
    for op in main_function(module).body.block.ops:
        if isinstance(op, LEAVES):
            assert subnet_of(op) is None
            continue
        expected = 1 if op.name == "tpu.TopK" else (0 if 1 not in seen else 2)
        assert subnet_of(op) == expected, op.name
        seen.append(subnet_of(op))
    assert seen == sorted(seen) and seen.count(1) == 1 and seen[0] == 0 and seen[-1] == 2


TEXT = """
builtin.module attributes {module.state = "TPU_REORDERED", module.chip = "bm1684x"} {
  func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x2xf32> {
    %x = "top.Input"(%arg0) {name = "x"} : (tensor<1x4xf32>) -> tensor<1x4xf32>
    %v, %i = "tpu.TopK"(%x) {name = "v", result_names = ["v", "i"], axis = 1, K = 2} : (tensor<1x4xf32>) -> (tensor<1x2xf32>, tensor<1x2xf32>)
    %r = "tpu.Relu"(%v) {name = "r"} : (tensor<1x2xf32>) -> tensor<1x2xf32>
    %s = "tpu.Sigmoid"(%r) {name = "s"} : (tensor<1x2xf32>) -> tensor<1x2xf32>
    func.return %s : tensor<1x2xf32>
  }
}
"""  # noqa: E501


def test_cpu_op_first_and_tpu_only():
    module = divide(parse_module(TEXT))
    assert module_attr(module, "subnet_modes") == ["CPU", "TPU"]
    assert ids_by_kind(module)[1:4] == [("tpu.TopK", 0), ("tpu.Relu", 1), ("tpu.Sigmoid", 1)]
    tpu_only = TEXT.replace('%v, %i = "tpu.TopK"', '%v, %i = "tpu.Split"')
    tpu_only = tpu_only.replace("axis = 1, K = 2", "axis = 1, split_size = [2, 2]")
    module = divide(parse_module(tpu_only))
    assert module_attr(module, "subnet_modes") == ["TPU"]
    assert {i for _, i in ids_by_kind(module)} == {None, 0}


def test_cpu_ops_are_chip_data():
    assert all(chip.cpu_ops == ("tpu.TopK",) for chip in map(get_chip, ["bm1684x", "cv183x"]))


def test_errors():
    lowered_text = TEXT.replace("TPU_REORDERED", "TPU_LOWERED")
    with pytest.raises(
        TpucError,
        match="subnet-divide: .* TPU_LOWERED, needs TPU_REORDERED; run weight-reorder first",
    ):
        divide(parse_module(lowered_text))
    with pytest.raises(TpucError, match="subnet-divide: chip=cv183x but the module is for bm1684x"):
        divide(parse_module(TEXT), "cv183x")
    no_chip = TEXT.replace(', module.chip = "bm1684x"', "")
    with pytest.raises(
        TpucError, match="subnet-divide: the module has no chip; run processor-assign"
    ):
        divide(parse_module(no_chip))
    with pytest.raises(TpucError, match="unknown chip 'bm9'"):
        divide(parse_module(no_chip), "bm9")
    assert module_attr(divide(parse_module(no_chip), "cv183x"), "subnet_modes") == ["CPU", "TPU"]
