"""`plan_chain`: a GroupPlan for a run of ops, sliced over N and H.

The group's outputs are split evenly (`even_split`); every op, from the
last to the first, gives its input slices from its output slices (its
local rule's `backward`); a tensor read by two ops of the group must get
the same slices from both (TPU-MLIR's rule, without its merge of
overlapping conv inputs). Coefficients are held: loaded once, kept for
every slice. Tensors moved by GDMA get two ring slots when there is more
than one slice, so the moves of slices t±1 overlap the compute of slice t.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation

from tpuc.base.errors import TpucError
from tpuc.passes.native.cast import nchw
from tpuc.passes.native.context import NativeContext, NotExpressible, dtype_name
from tpuc.passes.native.local import (  # noqa: F401  (register their rules)
    concat,
    const,
    deconv,
    fc_sums,
    half_depthwise,
    lut,
    mul,
    pool,
    pool_wide,
    quantize,
    scale,
    softmax,
    upsample,
    wide,
)
from tpuc.passes.native.local.balance import spread_moves
from tpuc.passes.native.local.costs import Guesses
from tpuc.passes.native.local.lane_store import mark as mark_lane_major
from tpuc.passes.native.local.ops import ELEMENT_BYTES, LOCAL_RULES, LocalRule, three_ic_lanes
from tpuc.passes.native.local.plan import (
    GroupPlan,
    LocalOp,
    LocalTensor,
    Slice,
    allocate,
    even_split,
    group_values,
)
from tpuc.passes.native.local.prefetch import estimate, longest_load, unsliced_timesteps


def _label(op: Operation) -> str:
    names = getattr(op, "names", None)
    return f"{op.name} '{names[0]}'" if names else op.name


def rule_of(op: Operation) -> LocalRule:
    rule = LOCAL_RULES.get(type(op))
    if rule is None:
        raise NotExpressible(f"{_label(op)}: no local rule (it cannot join a layer group)")
    return rule


def _activation(value, slices: Sequence[Slice]) -> LocalTensor:
    return LocalTensor(value, nchw(value), ELEMENT_BYTES[dtype_name(value)], tuple(slices))


def _output_slices(value, nsecs: int, hsecs: int) -> list[Slice]:
    n, _, h, _ = nchw(value)
    if nsecs > n or hsecs > h:
        raise TpucError(f"cannot cut {n} images x {h} rows into {nsecs} x {hsecs} slices")
    return [
        Slice(ni, ns, hi, hs) for ni, ns in even_split(n, nsecs) for hi, hs in even_split(h, hsecs)
    ]


def _backward(ops: Sequence[Operation], outputs, nsecs: int, hsecs: int) -> dict:
    """Slices of every activation, from the outputs back to the inputs."""
    slices = {v: _output_slices(v, nsecs, hsecs) for v in outputs}
    for op in reversed(ops):
        result = op.results[0]
        if result not in slices:
            raise TpucError(f"{_label(op)}: its result is read by no op of the group")
        rule = rule_of(op)
        for index, operand in enumerate(op.operands):
            if operand not in slices and not _is_activation(operand):
                continue
            wanted = [
                _broadcast(operand, result, rule.backward(op, s) if index == 0 else s)
                for s in slices[result]
            ]
            known = slices.setdefault(operand, wanted)
            if known != wanted:
                raise TpucError(
                    f"{_label(op)}: its input is read with other slices by another op of "
                    "the group (a layer group needs one slicing per tensor)"
                )
    return slices


def _broadcast(operand, result, wanted: Slice) -> Slice:
    """An operand of one image or one row under a result of more (a
    squeeze-excite scale [N, C, 1, 1] times [N, C, H, W]) holds that image
    or row for every slice."""
    (n, _, h, _), (rn, _, rh, _) = nchw(operand), nchw(result)
    if n == 1 and rn > 1:
        wanted = Slice(0, 1, wanted.h_idx, wanted.h_slice)
    if h == 1 and rh > 1:
        wanted = Slice(wanted.n_idx, wanted.n_slice, 0, 1)
    return wanted


def _broadcast_loads(plan: GroupPlan, ops: Sequence[Operation], inputs) -> None:
    """A loaded input that only a 3ic INT8 convolution of the group reads is
    loaded broadcast, each channel to the lanes of its folded taps, as
    TPU-MLIR's Load does (three DDR-to-lanes moves instead of a load and
    the kernel's TIU copy of the input)."""
    for op in ops:
        lanes, value = three_ic_lanes(op), op.operands[0]
        if not lanes or value not in inputs:
            continue  # guard first: counting readers walks the whole group
        readers = sum(1 for other in ops for operand in other.operands if operand is value)
        if readers == 1:
            plan.tensors[value].bcast_lanes = lanes


def _is_activation(value) -> bool:
    from tpuc.dialects import top

    return not isinstance(value.owner, (top.WeightOp, top.NoneOp))


def plan_chain(ops: Sequence[Operation], ctx: NativeContext, hsecs: int = 1,
               nsecs: int = 1, packed: bool = True, costs=None, fine: bool = False,
               broadcast: bool = True) -> GroupPlan:  # fmt: skip
    """The plan of `ops` (in program order) with their outputs cut into
    nsecs x hsecs slices (`packed=False`: refuse when its buffers cannot
    each have banks of their own; `costs`: what an unsliced group's
    timesteps are planned with, costs.Guesses by default; `fine`: sweep
    FINE_BUDGETS instead of PREFETCH_BUDGETS; `broadcast`: load a 3ic
    convolution's input broadcast, `_broadcast_loads`); raises
    NotExpressible for an op without a local form, TpucError when the
    slicing or local memory does not work out."""
    ops = list(ops)
    coeffs = [rule_of(op).coeffs(op, ctx) for op in ops]  # refuses forms without a local rule
    planes = [op for op in ops if not rule_of(op).splits_h(op)]
    if hsecs > 1 and planes:
        raise TpucError(f"{_label(planes[0])} needs its whole input plane: its group is not "
                        "cut along H")  # fmt: skip
    inputs, outputs = group_values(ops)
    slices = _backward(ops, outputs, nsecs, hsecs)
    tensors = {v: _activation(v, s) for v, s in slices.items()}
    plan = GroupPlan([LocalOp(op) for op in ops], tensors, nsecs, hsecs, packed=packed)
    for op, op_coeffs in zip(ops, coeffs, strict=True):
        for index, coeff in enumerate(op_coeffs):
            key = (op, index)
            dims = coeff.moved or coeff.dims
            whole = Slice(0, dims[0], 0, dims[2])
            plan.tensors[key] = LocalTensor(key, dims, ELEMENT_BYTES[coeff.dtype],
                                            (whole,), eu_align=False,
                                            lanes_copy=coeff.lanes_copy)  # fmt: skip
            plan.inputs.append(key)
    plan.inputs = list(inputs) + plan.inputs
    plan.outputs = list(outputs)
    if plan.steps > 1:
        for key in (*inputs, *outputs):
            plan.tensors[key].slots = 2
    if broadcast:
        _broadcast_loads(plan, ops, inputs)
    mark_lane_major(plan)
    for lop in plan.ops:
        lop.buffer_size = rule_of(lop.op).buffer(lop.op, plan)
    if plan.steps == 1:
        if fine:
            return _unsliced(plan, costs or Guesses(), FINE_BUDGETS)
        return _unsliced(plan, costs or Guesses(), PREFETCH_BUDGETS, first=True)
    allocate(plan)
    plan.timesteps = spread_moves(plan, ctx, costs)
    return plan


PREFETCH_BUDGETS = (0.8, 0.6, 0.0)
"""Shares of a lane an unsliced group's early loads may fill (prefetch.py),
tried in turn during the search until the buffers pack; 0: each load in the
timestep before its reader."""
FINE_BUDGETS = (*(round(0.95 - 0.01 * i, 2) for i in range(46)), 0.0)
"""The sweep for a group the search keeps (`fine`): the greedy's cycles jump
with the budget (resnet50's 70-op group: 554,688 at 0.80, 540,032 at 0.82,
611,265 at 0.78 by the estimate), so a kept group tries every step."""


def _unsliced(plan: GroupPlan, costs, budgets, first: bool = False) -> GroupPlan:
    """An unsliced group's loads spread over the earlier ops' timesteps and
    its buffers packed by lifetime (prefetch.py): of the budgets whose
    buffers pack, the table with the fewest estimated cycles (the sum over
    timesteps of the larger of their TIU and GDMA times; more prefetch is
    not always better, as it cuts the timesteps differently), and the best
    few again with the longest load first (_early_tries); `first`: the
    first that packs (the search's thousands of candidates)."""
    failures, found, seen = [], [], set()

    def attempt(budget: float, early: tuple) -> bool:
        """Plan one table; True when it packs (kept in `found`)."""
        rows, lifetimes = unsliced_timesteps(plan, budget, costs, early)
        table = tuple(tuple((i.kind, id(i.target)) for i in row) for row in rows)
        if table in seen:
            return False  # another budget gave the same table
        seen.add(table)
        try:
            allocate(plan, lifetimes)
        except TpucError as exc:
            failures.append(exc)
            return False
        found.append((estimate(plan, rows, costs) if not first else 0.0, budget, rows, lifetimes))
        return True

    for budget in budgets:
        if attempt(budget, ()) and first:
            plan.timesteps = found[-1][2]
            return plan
    for budget, early in _early_tries(plan, costs, found):
        attempt(budget, early)
    if not found:
        raise failures[-1]
    *_, rows, lifetimes = min(found, key=lambda f: f[0])
    allocate(plan, lifetimes)
    plan.timesteps = rows
    return plan


EARLY_TRIES = 5


def _early_tries(plan: GroupPlan, costs, found: list) -> list:
    """The budgets of the EARLY_TRIES cheapest tables again, with the
    longest load queued first (prefetch.longest_load: densenet121's 1 MB
    classifier weights load beside its stem convolution, as TPU-MLIR's
    plan loads them in the first block, instead of stalling the last
    block); the estimate keeps whichever table is cheaper."""
    key = longest_load(plan, costs)
    if key is None:
        return []
    ranked = sorted(found, key=lambda f: f[0])[:EARLY_TRIES]
    return [(budget, (key,)) for _, budget, *_ in ranked]


__all__ = ["plan_chain", "rule_of"]
