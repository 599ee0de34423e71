"""What the passes after lowering share (the finalize stage of
`tpuc.workflow.pipeline`: weight-reorder, subnet-divide, address-assign, then codegen).

`module_chip` is the one place they find their chip: the pass option when
given (it must agree with `module.chip`), else `module.chip`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from tpuc.base.errors import TpucError
from tpuc.target.chips import Chip, get_chip


def module_chip(module: ModuleOp, step: str, override: str = "") -> Chip:
    """The chip a post-lowering pass works for (see the module docstring)."""
    from tpuc.ir.module_io import module_attr

    assigned = module_attr(module, "chip", "ALL")
    if override:
        chip = get_chip(override)
        if assigned != "ALL" and get_chip(assigned) != chip:
            raise TpucError(f"{step}: chip={override} but the module is for {assigned}")
        return chip
    if assigned == "ALL":
        raise TpucError(f"{step}: the module has no chip; run processor-assign first")
    return get_chip(assigned)


__all__ = ["module_chip"]
