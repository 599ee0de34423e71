"""What an unsliced group's timesteps are planned with: each op's TIU cycles
and each load's GDMA cycles.

`Guesses` are rough formulas (plan._tiu_guess / _gdma_guess); `VendorCosts`
asks the vendor library (a GroupPricer, issuing off) for the cycles of the
op's own local call and of the load's move, alone in a timestep. The
stem of resnet50 (a 3ic 7x7 conv) costs 4.5x less than the formula says and
every small load about 300 cycles, so only the vendor's numbers put the
loads where the compute hides them. Both are functions of the op and the
tensor alone (canonical addresses), so planning and emission, each with a
pricer of its own, build the same timesteps.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

from xdsl.ir import Operation

from tpuc.base.errors import TpucError
from tpuc.passes.native.context import NativeContext, dtype_name
from tpuc.passes.native.local.plan import GroupPlan, _gdma_guess, _tiu_guess

CANONICAL_DDR = 1 << 32  # where a priced load reads from (the cycles do not depend on it)


class Guesses:
    """The rough formulas (no vendor)."""

    def tiu(self, op: Operation) -> float:
        return _tiu_guess(op)

    def gdma(self, plan: GroupPlan, key: Hashable) -> float:
        return _gdma_guess(plan.tensors[key])


class VendorCosts(Guesses):
    """The vendor's cycles of an op's local call (in a one-op plan) and of a
    load, cached per op and per tensor shape."""

    def __init__(self, ctx: NativeContext, pricer):
        self.ctx = ctx
        self.pricer = pricer
        self.ops: dict[int, tuple[Operation, float]] = {}
        self.moves: dict[tuple, float] = {}
        self.keys: dict[Hashable, tuple] = {}  # a tensor's key -> (its slice, cycles)

    def tiu(self, op: Operation) -> float:
        found = self.ops.get(id(op))
        if found is not None and found[0] is op:
            return found[1]
        from tpuc.passes.native.local.chain import plan_chain, rule_of

        try:
            # the kernel's own copy of a 3ic input: the same estimate for
            # both of groups.cheaper_load's plans
            alone = plan_chain([op], self.ctx, costs=Guesses(), broadcast=False)
        except TpucError:  # alone it cannot be a group (a result nothing reads): the formula
            return _tiu_guess(op)
        commands = rule_of(op).command(op, self.ctx, alone, 0)
        cycles = float(self.pricer.price([("divide",), *commands, ("merge",)], f"{op.name} alone"))
        self.ops[id(op)] = (op, cycles)
        return cycles

    def gdma(self, plan: GroupPlan, key: Hashable) -> float:
        from tpuc.passes.native.local.chain import rule_of
        from tpuc.passes.native.local.emit import S2L, moves

        tensor = plan.tensors[key]
        known = self.keys.get(key)
        if known is not None and known[0] == tensor.slices[0]:
            return known[1]
        if isinstance(key, tuple):
            dtype = rule_of(key[0]).coeffs(key[0], self.ctx)[key[1]].dtype
        else:
            dtype = dtype_name(key)
        shape = (tensor.dims, tensor.dtype_bytes, tensor.slices[0], tensor.eu_align, dtype,
                 tensor.lane_major)  # fmt: skip
        if shape not in self.moves:
            canonical = replace(tensor, addrs=(0,), slots=1, bcast_lanes=0)
            commands = moves(canonical, CANONICAL_DDR, dtype, 0, S2L, "priced load")
            self.moves[shape] = float(self.pricer.price([("divide",), *commands, ("merge",)]))
        self.keys[key] = (tensor.slices[0], self.moves[shape])
        return self.moves[shape]


__all__ = ["Guesses", "VendorCosts"]
