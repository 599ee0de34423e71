"""subnet-divide: TPU and CPU subnets (TPU_REORDERED -> TPU_DIVIDED).

Ops the chip cannot run (by name, `Chip.cpu_ops`, e.g. tpu.TopK) run on the
host. Every op of func @main except the leaves (top.Input, top.Weight,
top.None) and the return gets `subnet_id`; consecutive ops in graph order
with the same run mode share a subnet, so a CPU op in the middle of a
network gives TPU, CPU, TPU. `module.subnet_modes` lists the mode of each
subnet by id.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from tpuc.dialects import top
from tpuc.dialects.base import to_attr
from tpuc.dialects.traits import Leaf, with_trait
from tpuc.target.chips import Chip

TPU, CPU = "TPU", "CPU"
NO_SUBNET = (*with_trait(top.TOP_OPS, Leaf), func.ReturnOp)
SUBNET_ATTR = "subnet_id"
MODES_ATTR = "module.subnet_modes"


def run_mode(op: Operation, chip: Chip) -> str:
    return CPU if op.name in chip.cpu_ops else TPU


def divide(body: list[Operation], chip: Chip) -> list[str]:
    """Set `subnet_id` on each op of `body`; the mode of each subnet."""
    modes: list[str] = []
    for op in body:
        if isinstance(op, NO_SUBNET):
            continue
        mode = run_mode(op, chip)
        if not modes or modes[-1] != mode:
            modes.append(mode)
        op.attributes[SUBNET_ATTR] = to_attr(len(modes) - 1)
    return modes


def subnet_of(op: Operation) -> int | None:
    """The subnet id of an op after subnet-divide (None for leaves)."""
    attr = op.attributes.get(SUBNET_ATTR)
    return None if attr is None else attr.value.data  # type: ignore[attr-defined]


@dataclass(frozen=True)
class SubnetDividePass(ModulePass):
    """Give every op of func @main its subnet; `chip` defaults to module.chip."""

    name = "subnet-divide"

    chip: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.base.module_state import ModuleState, advance_state, require_state
        from tpuc.ir.core import main_function
        from tpuc.passes.finalize import module_chip

        require_state(op, self.name, ModuleState.TPU_REORDERED)
        chip = module_chip(op, self.name, self.chip)
        modes = divide(list(main_function(op).body.block.ops), chip)
        op.attributes[MODES_ATTR] = to_attr(modes)
        advance_state(op, ModuleState.TPU_DIVIDED)


__all__ = ["CPU", "TPU", "SubnetDividePass", "divide", "run_mode", "subnet_of"]
