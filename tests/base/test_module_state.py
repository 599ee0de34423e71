"""The module state machine: accepted states, messages, transitions."""

import pytest
from xdsl.dialects.builtin import ModuleOp, StringAttr

from tpuc.base.errors import TpucError
from tpuc.base.module_state import ModuleState, advance_state, require_state, state_of


def module_in(state: str | None) -> ModuleOp:
    module = ModuleOp([])
    if state is not None:
        module.attributes["module.state"] = StringAttr(state)
    return module


def test_absent_state_is_accepted():
    require_state(module_in(None), "step", ModuleState.TPU_LOWERED)
    assert state_of(module_in(None)) is None


def test_too_early_names_the_missing_step():
    with pytest.raises(
        TpucError, match=r"state TOP_F32, needs TPU_LOWERED; run convert-top-to-tpu"
    ):
        require_state(module_in("TOP_F32"), "weight-reorder", ModuleState.TPU_LOWERED)


def test_too_late_says_so():
    with pytest.raises(TpucError, match="already gone past"):
        require_state(module_in("TPU_ADDRESSED"), "shape-infer", ModuleState.TOP_F32)


def test_unknown_state_is_an_error():
    with pytest.raises(TpucError, match="not one of"):
        state_of(module_in("BOGUS"))


def test_advance_moves_one_step_only():
    module = module_in("TOP_F32")
    advance_state(module, ModuleState.TOP_CALIBRATED)
    assert state_of(module) is ModuleState.TOP_CALIBRATED
    with pytest.raises(TpucError, match="cannot move"):
        advance_state(module, ModuleState.TPU_DIVIDED)
