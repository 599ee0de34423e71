"""layer-group: runs of ops kept in local memory, sliced and software-pipelined.

The planning half of TPU-MLIR's LayerGroup (docs/layer-group.md): which ops
can be local (`rules`), how a run of them slices (`slicing`), its timestep
table (`schedule`), its local-memory addresses (`allocate`), its cycles
(`cost`), and the search for the cheapest runs (`search`). The pass writes
the chosen groups into the IR (`attach`); it changes no op and no type.
It runs after subnet-divide and before address-assign (docs/passes.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tpuc.chips import Chip
from tpuc.passes.layer_group.group import GroupPlan


@dataclass
class ModulePlan:
    """The groups chosen for a module and what they are estimated to save."""

    runs: list[tuple[int, int]]
    plans: list[GroupPlan]
    layers: int
    grouped_cycles: int
    global_cycles: int
    seconds: float
    slices: list[tuple[int, int, int]] = field(default_factory=list)

    def summary(self) -> str:
        sizes = [len(p.graph.ops) for p in self.plans]
        secs = ", ".join(f"{n}x{h}x{w}" for n, h, w in self.slices) or "-"
        return (
            f"{len(self.plans)} groups of {sum(sizes)}/{self.layers} layers "
            f"(ops per group {sizes}; slices n x h x w: {secs}); estimated "
            f"{self.grouped_cycles} cycles, all-global {self.global_cycles}"
        )


def plan_module(module: ModuleOp, chip: Chip, opt: int = 2, disable: bool = False) -> ModulePlan:
    """Search the groups of func @main (nothing is written to the IR)."""
    from tpuc.ir import main_function
    from tpuc.passes.layer_group.layout import LocalLayout
    from tpuc.passes.layer_group.rules import reset_cache
    from tpuc.passes.layer_group.search import Planner, layers, search

    began = time.perf_counter()
    reset_cache()
    ops = layers(main_function(module).body.block)
    planner = Planner(ops, LocalLayout.of(chip), chip.timing)
    all_global = sum(planner.cost(i, i) for i in range(len(ops)))
    runs = [(i, i) for i in range(len(ops))] if disable else search(planner, opt)
    plans = [planner.plan(a, b) for a, b in runs if b > a]
    grouped = int(sum(planner.cost(a, b) for a, b in runs))
    return ModulePlan(
        runs,
        plans,  # type: ignore[arg-type]
        len(ops),
        grouped,
        int(all_global),
        time.perf_counter() - began,
        [(p.secs.n, p.secs.h, p.secs.w) for p in plans],  # type: ignore[union-attr]
    )


@dataclass(frozen=True)
class LayerGroupPass(ModulePass):
    """Group runs of local ops (opt=1 greedy, opt=2 cycle-model DP;
    disable=true keeps every op global). `chip` defaults to module.chip."""

    name = "layer-group"

    opt: int = 2
    disable: bool = False
    chip: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.errors import TpucError
        from tpuc.ir import main_function
        from tpuc.module_state import ModuleState, require_state
        from tpuc.passes.finalize import module_chip
        from tpuc.passes.layer_group.attach import attach, clear
        from tpuc.passes.layer_group.search import layers

        if self.opt not in (1, 2):
            raise TpucError(
                f"{self.name}: opt={self.opt}; use 1 (greedy) or 2 (dynamic programming)"
            )
        require_state(
            op,
            self.name,
            ModuleState.TPU_LOWERED,
            ModuleState.TPU_REORDERED,
            ModuleState.TPU_DIVIDED,
        )
        chip = module_chip(op, self.name, self.chip)
        clear(op, layers(main_function(op).body.block))
        found = plan_module(op, chip, self.opt, self.disable)
        attach(op, found.plans, found.grouped_cycles, found.global_cycles)


__all__ = ["LayerGroupPass", "ModulePlan", "plan_module"]
