"""The steps after lowering, as one call: weight-reorder, subnet-divide,
address-assign take a TPU_LOWERED module to TPU_ADDRESSED, ready for codegen.

`module_chip` is the one place the last two find their chip: the pass
option when given (it must agree with `module.chip`), else `module.chip`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from tpuc.chips import Chip, get_chip
from tpuc.errors import TpucError
from tpuc.weights import WeightStore

FINAL_PASSES = ("weight-reorder", "subnet-divide", "address-assign")


def module_chip(module: ModuleOp, step: str, override: str = "") -> Chip:
    """The chip a post-lowering pass works for (see the module docstring)."""
    from tpuc.module_io import module_attr

    assigned = module_attr(module, "chip", "ALL")
    if override:
        chip = get_chip(override)
        if assigned != "ALL" and get_chip(assigned) != chip:
            raise TpucError(f"{step}: chip={override} but the module is for {assigned}")
        return chip
    if assigned == "ALL":
        raise TpucError(f"{step}: the module has no chip; run processor-assign first")
    return get_chip(assigned)


def finalize(module: ModuleOp, store: WeightStore, chip_name: str) -> None:
    """Run the three passes in place on a TPU_LOWERED module. `store` holds
    its weights: reordered and merged weights are added to it, and the ones
    the module no longer reads are removed (copy it first to keep them)."""
    from tpuc.context import make_context
    from tpuc.passes.registry import get_pass
    from tpuc.weights import attach_weights

    module_chip(module, "finalize", chip_name)  # a wrong chip fails before any change
    attach_weights(module, store)
    ctx = make_context()
    get_pass("weight-reorder")().apply(ctx, module)
    get_pass("subnet-divide")(chip=chip_name).apply(ctx, module)
    get_pass("address-assign")(chip=chip_name).apply(ctx, module)
    module.verify()


__all__ = ["FINAL_PASSES", "finalize", "module_chip"]
