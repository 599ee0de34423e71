"""The module state machine: which tool step a module has been through.

TOP_F32 -> TOP_CALIBRATED -> TPU_LOWERED -> TPU_REORDERED -> TPU_DIVIDED ->
TPU_ADDRESSED. A pass states which states it accepts; running it on another
state fails with a message naming the state found and the missing step.
"""

from __future__ import annotations

from enum import StrEnum

from xdsl.dialects.builtin import ModuleOp, StringAttr

from tpuc.base.errors import TpucError


class ModuleState(StrEnum):
    TOP_F32 = "TOP_F32"
    TOP_CALIBRATED = "TOP_CALIBRATED"
    TPU_LOWERED = "TPU_LOWERED"
    TPU_REORDERED = "TPU_REORDERED"
    TPU_DIVIDED = "TPU_DIVIDED"
    TPU_ADDRESSED = "TPU_ADDRESSED"


ORDER = list(ModuleState)

STEP_TO_REACH = {
    ModuleState.TOP_F32: "model_transform.py",
    ModuleState.TOP_CALIBRATED: "import-calibration-table (model_deploy.py --calibration_table)",
    ModuleState.TPU_LOWERED: "convert-top-to-tpu (model_deploy.py)",
    ModuleState.TPU_REORDERED: "weight-reorder",
    ModuleState.TPU_DIVIDED: "subnet-divide",
    ModuleState.TPU_ADDRESSED: "address-assign",
}


def state_of(module: ModuleOp) -> ModuleState | None:
    """The module's state, None when the attribute is absent (lit snippets)."""
    attr = module.attributes.get("module.state")
    if attr is None:
        return None
    if not isinstance(attr, StringAttr) or attr.data not in ModuleState.__members__:
        raise TpucError(f"module.state {attr} is not one of {', '.join(ORDER)}")
    return ModuleState(attr.data)


def require_state(module: ModuleOp, step: str, *allowed: ModuleState) -> None:
    """Fail unless the module is in one of `allowed` (absent state passes)."""
    found = state_of(module)
    if found is None or found in allowed:
        return
    wanted = " or ".join(allowed)
    earliest = min(allowed, key=ORDER.index)
    hint = (
        f"run {STEP_TO_REACH[earliest]} first"
        if ORDER.index(found) < ORDER.index(earliest)
        else "it has already gone past this step"
    )
    raise TpucError(f"{step}: module is in state {found}, needs {wanted}; {hint}")


def advance_state(module: ModuleOp, new: ModuleState, skip: bool = False) -> None:
    """Move to the next state (with `skip`, to any later one: float lowering
    needs no calibration); going back is a bug in a pass."""
    found = state_of(module)
    step = ORDER.index(new) - ORDER.index(found) if found is not None else 1
    if step < 1 or (step > 1 and not skip):
        raise TpucError(f"cannot move module from state {found} to {new}")
    module.attributes["module.state"] = StringAttr(new)
