"""layer-group: runs of ops kept in local memory, sliced and software-pipelined.

The planning half of TPU-MLIR's LayerGroup (docs/layer-group.md): which ops
can be local (`rules`), how a run of them slices (`slicing`), its timestep
table (`schedule`), its local-memory addresses (`allocate`), its cycles
(`cost`), and the search for the cheapest runs (`search`). The pass moves
each chosen group's ops into a `tpu.Group` with explicit loads and stores
(`attach`; tpuc.dialects.tpu.group); it changes no op's meaning or type.
It runs after subnet-divide and before address-assign (docs/passes.md).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tpuc.passes.layer_group.group import GroupPlan
from tpuc.target.chips import Chip


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
    notes: list[str] = field(default_factory=list)  # why each run ends where it does

    def summary(self) -> str:
        sizes = [len(p.graph.ops) for p in self.plans]
        secs = ", ".join(f"{n}x{h}x{w}" for n, h, w in self.slices) or "-"
        return (
            f"{len(self.plans)} groups of {sum(sizes)}/{self.layers} layers "
            f"(ops per group {sizes}; slices n x h x w: {secs}); estimated "
            f"{self.grouped_cycles} cycles, all-global {self.global_cycles}"
        )


def plan_module(
    module: ModuleOp,
    chip: Chip,
    opt: int = 2,
    disable: bool = False,
    explain: bool = False,
    float_slices: bool = False,
    planner=None,
) -> ModulePlan:
    """Search the groups of func @main (nothing is written to the IR);
    `explain`: say for each run why it does not take the next layer too;
    `float_slices`: let float GEMM convolutions slice (not bit-exact);
    `planner`: makes the Planner from (ops, layout, timing) — another
    target's validity and prices (the native target's vendor cycles)."""
    from tpuc.ir.core import main_function
    from tpuc.passes.layer_group.layout import LocalLayout
    from tpuc.passes.layer_group.rules import reset_cache
    from tpuc.passes.layer_group.search import Planner, layers, search

    began = time.perf_counter()
    reset_cache()
    ops = layers(main_function(module).body.block)
    planner = (planner or Planner)(ops, LocalLayout.of(chip, float_slices), chip.timing)
    all_global = sum(planner.cost(i, i) for i in range(len(ops)))
    runs = [(i, i) for i in range(len(ops))] if disable else search(planner, opt)
    plans = [planner.plan(a, b) for a, b in runs if b > a]
    grouped = int(sum(planner.cost(a, b) for a, b in runs))
    notes = explain_runs(planner, runs) if explain and not disable else []
    return ModulePlan(
        runs,
        plans,  # type: ignore[arg-type]
        len(ops),
        grouped,
        int(all_global),
        time.perf_counter() - began,
        [(p.secs.n, p.secs.h, p.secs.w) for p in plans],  # type: ignore[union-attr]
        notes,
    )


def explain_runs(planner, runs: list[tuple[int, int]]) -> list[str]:
    """One line per run: its layers, and why it stops before the next one
    (that layer is global, the longer run is invalid and why, or costs more)."""
    from tpuc.passes.layer_group.attach import name_of
    from tpuc.passes.layer_group.group import GroupPlan
    from tpuc.passes.layer_group.rules import why_global

    lines = []
    ops = planner.ops
    for a, b in runs:
        head = f"{name_of(ops[a].results[0])}..{name_of(ops[b].results[0])} ({b - a + 1} ops)"
        if b + 1 >= len(ops):
            lines.append(f"{head}: the last layer")
            continue
        after = ops[b + 1]
        label = f"'{name_of(after.results[0])}' ({after.name})" if after.results else after.name
        reason = why_global(after) or why_global(ops[b])
        if reason is None:
            longer = planner.plan(a, b + 1)
            reason = longer if isinstance(longer, str) else "a longer run costs more"
            if isinstance(longer, GroupPlan) and b + 1 - a >= planner.max_ops:
                reason = f"runs are at most {planner.max_ops} layers"
        lines.append(f"{head}: stops before {label}: {reason}")
    return lines


@dataclass(frozen=True)
class LayerGroupPass(ModulePass):
    """Group runs of local ops (opt=1 greedy, opt=2 cycle-model DP;
    disable=true keeps every op global; debug=true prints the groups and
    why each ends where it does to stderr; float_slices=true lets float
    GEMM convolutions slice, which the kernel library does not compute
    bit-exactly: for planning studies only). `chip` defaults to module.chip."""

    name = "layer-group"

    opt: int = 2
    disable: bool = False
    chip: str = ""
    debug: bool = False
    float_slices: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.base.errors import TpucError
        from tpuc.base.module_state import ModuleState, require_state
        from tpuc.ir.core import main_function
        from tpuc.passes.finalize import module_chip
        from tpuc.passes.layer_group.attach import attach, clear

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
        clear(op, main_function(op).body.block)
        found = plan_module(
            op, chip, self.opt, self.disable, explain=self.debug, float_slices=self.float_slices
        )
        attach(op, found.plans, found.grouped_cycles, found.global_cycles)
        if self.debug:
            print(f"layer-group: {found.summary()} ({found.seconds:.2f} s)", file=sys.stderr)
            for line in found.notes:
                print(f"layer-group:   {line}", file=sys.stderr)


__all__ = ["LayerGroupPass", "ModulePlan", "plan_module"]
