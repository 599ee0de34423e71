"""processor-assign: choose the chip and the default quantize mode.

Checks them against the chip's description before any lowering work, so an
unsupported combination (F16 on cv183x, asymmetric on cv18xx) fails at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from tpuc.base.errors import TpucError


@dataclass(frozen=True)
class ProcessorAssignPass(ModulePass):
    """Set module.chip and module.mode."""

    name = "processor-assign"

    chip: str = ""
    mode: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.base.module_state import ModuleState, require_state
        from tpuc.target.chips import get_chip

        require_state(op, self.name, ModuleState.TOP_F32, ModuleState.TOP_CALIBRATED)
        if not self.chip or not self.mode:
            raise TpucError(f"{self.name}: needs chip=<name> and mode=<F32|F16|BF16|INT8>")
        chip = get_chip(self.chip)
        mode = self.mode.upper()
        chip.check_mode(mode)
        op.attributes["module.chip"] = StringAttr(chip.name)
        op.attributes["module.mode"] = StringAttr(mode)
