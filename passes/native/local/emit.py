"""A GroupPlan as the chip's command stream, and its price in the vendor's cycles.

`group_commands` is TPU-MLIR's `codegen_for_group`: the loop over the
slices (n outer, h inner) runs `steps + 2` iterations; each iteration
emits every timestep bracketed by `cmd_id_divide` / `cmd_id_merge` (GDMA
and TIU commands of one timestep run concurrently, the sync ids keep
timesteps apart), and an item of stage s works on the slice of iteration
t − s, so the pipeline fills in the first two iterations and drains in
the last two. Held tensors (coefficients) are loaded in the first
iteration only. Loads and stores are strided GDMA moves between the
tensor's global NCHW layout and its local layout (channel c on lane
c % 64, rows of a slice EU-aligned per channel plane, or compact for
coefficients).

`GroupPricer` asks the vendor library for the cycles of those commands
with issuing switched off (TPU-MLIR's CycleCalculator) and caches the
answer by the commands' bytes, so pricing a candidate twice costs one
library call; `price == ` the cycles the same commands add when emitted
for real (tests/native/test_local_groups.py).
"""

from __future__ import annotations

import hashlib
import pickle

from xdsl.ir import Operation

from tpuc.passes.native.context import NativeContext, dtype_name
from tpuc.passes.native.local import lane_store
from tpuc.passes.native.local.chain import rule_of
from tpuc.passes.native.local.plan import COMPUTE, LOAD, NPU_NUM, GroupPlan, LocalTensor
from tpuc.target.vendor.fetch import VendorPaths

GDMA_FORMATS = {"i8": 0, "u8": 0, "f16": 1, "f32": 2, "i32": 2, "u32": 2, "i16": 3, "u16": 3,
                "bf16": 5}  # fmt: skip
S2L, L2S = 0, 1
EU_BYTES = 64


def local_strides(tensor: LocalTensor, n: int, h: int) -> tuple[int, int, int, int]:
    """(N, C, H, W) element strides of a slice in local memory (getLocalStride)."""
    _, c, _, w = tensor.dims
    plane = h * w
    if tensor.eu_align:
        eu = EU_BYTES // tensor.dtype_bytes
        plane = -(-plane // eu) * eu
    return (-(-c // NPU_NUM) * plane, plane, w, 1)


def move(tensor: LocalTensor, global_addr: int, dtype: str, step: int, direction: int,
         name: str) -> tuple:  # fmt: skip
    """One tensor_stride_move_gen_cmd of the tensor's slice for `step` (a
    plane every lane reads: one tensor_broadcast_move_gen_cmd to all lanes;
    one value per channel of one image: general_matrix_move_gen_cmd)."""
    _, c, h, w = tensor.dims
    if tensor.lanes_copy:
        args = (global_addr, 0, tensor.addr_at(step), 0, 1, h, w, c, 0, 0, 0, 0,
                GDMA_FORMATS[dtype], 0, S2L)  # fmt: skip
        return ("bcast", name, args)
    s = tensor.slice_at(step)
    g = (c * h * w, h * w, w, 1)
    local = local_strides(tensor, s.n_slice, s.h_slice)
    offset = (s.n_idx * g[0] + s.h_idx * g[2]) * tensor.dtype_bytes
    if tensor.eu_align and s.n_slice == 1 and h * w == 1:
        # one value per channel plane: as a [1, C] matrix (GDMA_MATRIX, columns
        # over the lanes, one per EU-aligned plane: the same local layout), one
        # DDR run where the tensor move writes every channel on its own
        # (densenet121's [1, 1000, 1, 1] result: 5,818 cycles against 24,988)
        args = (tensor.addr_at(step), 0, global_addr + offset, 1, 1, c, c, GDMA_FORMATS[dtype],
                direction, 0)  # fmt: skip
        return ("matrix", name, args)
    src, dst = (g, local) if direction == S2L else (local, g)
    args = (tensor.addr_at(step), 0, global_addr + offset, s.n_slice, c, s.h_slice, w,
            *src, *dst, GDMA_FORMATS[dtype], direction, 0)  # fmt: skip
    return ("move", name, args)


def moves(tensor: LocalTensor, global_addr: int, dtype: str, step: int, direction: int,
          name: str) -> list[tuple]:  # fmt: skip
    """The GDMA commands of one load or store: `move`, or for a 3ic
    convolution's broadcast input one tensor_broadcast_move_gen_cmd per
    channel, to lanes [c·k, (c+1)·k) (TPU-MLIR's Load with use_3ic_optimize)."""
    if tensor.lane_major:
        return lane_store.moves(tensor, global_addr, GDMA_FORMATS[dtype], direction, name)
    if not tensor.bcast_lanes:
        return [move(tensor, global_addr, dtype, step, direction, name)]
    _, c, h, w = tensor.dims
    s, lanes = tensor.slice_at(step), tensor.bcast_lanes
    local_n = local_strides(tensor, s.n_slice, s.h_slice)[0]
    found = []
    for channel in range(c):
        offset = (s.n_idx * c * h * w + channel * h * w + s.h_idx * w) * tensor.dtype_bytes
        args = (global_addr + offset, 0, tensor.addr_at(step), channel * lanes, s.n_slice,
                s.h_slice, w, lanes, c * h * w, w, local_n, w, GDMA_FORMATS[dtype], 1,
                S2L)  # fmt: skip
        found.append(("bcast", name, args))
    return found


class _Globals:
    """Global address and dtype of everything the group moves."""

    def __init__(self, plan: GroupPlan, ctx: NativeContext):
        self.where: dict = {}
        for lop in plan.ops:
            for index, coeff in enumerate(rule_of(lop.op).coeffs(lop.op, ctx)):
                self.where[(lop.op, index)] = (coeff.addr, coeff.dtype)
        for key in (*plan.inputs, *plan.outputs):
            if key not in self.where:
                self.where[key] = (ctx.address(key), dtype_name(key))


def _name(key) -> str:
    if isinstance(key, tuple):
        op, index = key
        return f"{getattr(op, 'names', ['op'])[0]}_coeff{index}"
    names = getattr(key.owner, "names", None)
    return names[key.index] if names else "tensor"


def group_commands(plan: GroupPlan, ctx: NativeContext) -> list[tuple]:
    """The group's commands in emission order (see the module docstring)."""
    where = _Globals(plan, ctx).where
    steps, commands = plan.steps, []
    for iteration in range(steps + 2):
        for row in plan.timesteps:
            body = []
            for item in row:
                step = iteration - item.stage
                if not 0 <= step < steps:
                    continue
                if item.kind == COMPUTE:
                    op: Operation = item.target
                    body += rule_of(op).command(op, ctx, plan, step)
                    body += lane_store.compacts(op, plan)
                    continue
                tensor = plan.tensors[item.target]
                if tensor.held and step > 0:
                    continue
                addr, dtype = where[item.target]
                direction = S2L if item.kind == LOAD else 1
                if tensor.lane_major:
                    ctx.lane_major.add(item.target)  # the fc reading it permutes its weight
                body += moves(tensor, addr, dtype, step, direction, _name(item.target))
            if body:
                commands += [("divide",), *body, ("merge",)]
    return commands


def global_commands(op: Operation, calls) -> list[tuple]:
    """An op's global NativeCalls as run commands (to price the same ops
    as global layers beside their group); a rule's own group
    (emit.GroupCall) as its commands."""
    if hasattr(calls, "commands"):
        return list(calls.commands)
    name = getattr(op, "names", ["op"])[0]
    return [
        ("general_move", name, c.move) if c.move else ("cw_transpose", name, c.cw) if c.cw else
        ("global_plain" if c.plain else "global", name, c.function, c.param, c.pointers,
         c.inputs, c.outputs)
        for c in calls
    ]  # fmt: skip


class GroupPricer:
    """The vendor's cycles for a group's commands, from a backend worker of
    its own (issuing off), cached by the commands."""

    def __init__(self, vendor: VendorPaths):
        from tpuc.target.vendor.params import check_params
        from tpuc.target.vendor.worker import Worker

        check_params(vendor.param_h)
        self.worker = Worker("backend", vendor.lib, "vendor backend")
        self.cache: dict[bytes, int] = {}
        self.asked = 0  # library calls made (the rest came from the cache)

    def price(self, commands: list[tuple], what: str = "a layer group") -> int:
        key = hashlib.sha256(pickle.dumps(commands, protocol=5)).digest()
        if key not in self.cache:
            self.asked += 1
            self.worker.call(f"pricing {what}", "begin", False)
            self.cache[key] = self.worker.call(f"pricing {what}", "price", commands)
        return self.cache[key]

    def price_plan(self, plan: GroupPlan, ctx: NativeContext) -> int:
        what = "the group of " + ", ".join(lop.op.name for lop in plan.ops)
        return self.price(group_commands(plan, ctx), what)

    def close(self) -> None:
        self.worker.close()

    def __enter__(self) -> GroupPricer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


CUTS = ((1, 1), (1, 2), (1, 4), (1, 8))  # (nsecs, hsecs) cheapest_plan tries by default


def cheapest_plan(ops, ctx: NativeContext, pricer: GroupPricer, candidates=CUTS
                  ) -> tuple[GroupPlan, int]:  # fmt: skip
    """The plan of `ops` over the (nsecs, hsecs) candidates that fit local
    memory with the fewest vendor cycles, and those cycles: the planner's
    price query at work (a candidate that cannot be cut or does not fit is
    skipped; none fitting raises the last reason)."""
    from tpuc.base.errors import TpucError
    from tpuc.passes.native.local.chain import plan_chain

    best, failure = None, None
    for nsecs, hsecs in candidates:
        try:
            plan = plan_chain(ops, ctx, hsecs=hsecs, nsecs=nsecs)
        except TpucError as exc:
            failure = exc
            continue
        cycles = pricer.price_plan(plan, ctx)
        if best is None or cycles < best[1]:
            best = (plan, cycles)
    if best is None:
        raise failure
    return best


__all__ = [
    "GroupPricer",
    "cheapest_plan",
    "global_commands",
    "group_commands",
    "local_strides",
    "move",
]
