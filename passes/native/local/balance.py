"""Where a sliced group's loads and stores run: beside the compute that hides them.

`plan.chain_timesteps` puts the loads of slice t+1 and the stores of slice
t−1 beside the group's first op. When that op is short (ppocr_det's F16
stem starts with the input's f32 -> f16 Cast, 700 TIU cycles a slice, beside
2,488 cycles of input load and 2,623 of output store) the next timestep's
TIU waits for the GDMA every slice: 4.4k idle cycles in each of 12 slices.
TPU-MLIR's timestep table spreads them (its stem group stores beside the
stride-2 convolution and loads beside the depthwise one).

Any timestep of a loop iteration may hold them: a loaded tensor's other
ring slot was last read in the previous iteration and a stored one's is
next written in the following one, and every iteration's timesteps
complete before the next begins. `balanced_timesteps` moves each such
move (largest first) to the timestep whose time, the larger of its TIU
and GDMA cycles per slice, grows least; coefficient loads (held: one
iteration only) stay where chain_timesteps put them. The TIU cycles are
the vendor's for each op's call on slice 0 and the GDMA cycles those of
each move's slice (costs.VendorCosts); without a vendor, the rough
formulas. `spread_moves` keeps whichever table the vendor prices lower
(chain_timesteps' own without a vendor), so no group gets slower.
"""

from __future__ import annotations

from tpuc.passes.native.local.plan import (
    COMPUTE,
    LOAD,
    STAGES,
    STORE,
    GroupPlan,
    Item,
    _tiu_guess,
    chain_timesteps,
)


def _movable(plan: GroupPlan, item: Item) -> bool:
    """A per-slice move: an activation's load (stage 0) or store, not held."""
    if item.kind == COMPUTE or plan.tensors[item.target].held:
        return False
    return item.kind == STORE or item.stage == STAGES[LOAD]


def _slice_tiu(plan: GroupPlan, ctx, costs) -> list[float]:
    """Each op's TIU cycles on slice 0: the vendor's for its local call in
    this plan, else the formula over the slice count."""
    pricer = getattr(costs, "pricer", None)
    if pricer is None:
        return [_tiu_guess(lop.op) / plan.steps for lop in plan.ops]
    from tpuc.passes.native.local.chain import rule_of

    found = []
    for lop in plan.ops:
        commands = rule_of(lop.op).command(lop.op, ctx, plan, 0)
        found.append(float(pricer.price([("divide",), *commands, ("merge",)], "an op's slice")))
    return found


def balanced_timesteps(plan: GroupPlan, ctx, costs) -> list[list[Item]]:
    """chain_timesteps' table with its per-slice loads and stores moved to
    the timesteps where they add least time (module docstring)."""
    rows = chain_timesteps(plan)
    moving = [item for item in rows[0] if _movable(plan, item)]
    rows[0] = [item for item in rows[0] if not _movable(plan, item)]
    tiu = _slice_tiu(plan, ctx, costs)
    gdma = [0.0] * len(rows)
    sized = [(costs.gdma(plan, item.target), i, item) for i, item in enumerate(moving)]
    placed: list[list[Item]] = [[] for _ in rows]
    for cycles, _, item in sorted(sized, key=lambda s: (-s[0], s[1])):

        def growth(j: int, cycles: float = cycles) -> tuple[float, float, int]:
            grows = max(tiu[j], gdma[j] + cycles) - max(tiu[j], gdma[j])
            return (grows, gdma[j] + cycles - tiu[j], j)

        row = min(range(len(rows)), key=growth)
        gdma[row] += cycles
        placed[row].append(item)
    for j, items in enumerate(placed):
        loads = [i for i in items if i.kind == LOAD]
        stores = [i for i in items if i.kind == STORE]
        rows[j] = loads + rows[j] + stores
    return rows


def spread_moves(plan: GroupPlan, ctx, costs) -> list[list[Item]]:
    """The cheaper of chain_timesteps' table and the balanced one by the
    vendor's cycles (`costs.pricer`); without a vendor, chain_timesteps'."""
    plain = chain_timesteps(plan)
    pricer = getattr(costs, "pricer", None)
    if pricer is None or plan.steps == 1:
        return plain
    balanced = balanced_timesteps(plan, ctx, costs)
    if balanced == plain:
        return plain
    prices = []
    for rows in (plain, balanced):
        plan.timesteps = rows
        prices.append(pricer.price_plan(plan, ctx))
    return balanced if prices[1] < prices[0] else plain


__all__ = ["balanced_timesteps", "spread_moves"]
