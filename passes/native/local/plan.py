"""The plain record of a native layer group, and a planner for op chains.

A `GroupPlan` is what codegen needs and nothing else: the group's ops in
program order, every tensor that lives in local memory (activations by
SSA value, each op's coefficients by (op, index)) with its slice per loop
step and its local address (two ring slots for tensors that are loaded or
stored while the next slice computes), each op's scratch buffer, and the
timestep table whose items carry their software-pipeline stage (0 load,
1 compute, 2 store: in loop iteration t a stage-s item works on slice
t − s). The group IR (tpu.Group with tpu.Load/tpu.Store and typed slice
and timestep attributes) translates into this record one to one.

`plan_chain` builds one for a run of ops: output slices split evenly over
N and H, input slices inferred backwards (a convolution's halo and
padding, identity for elementwise ops), local memory allocated bank by
bank (TPU-MLIR's LmemAllocator keeps a TIU op's operands in different
banks; so does starting every buffer on a bank of its own while they
fit), and a table of one timestep per op with the loads and stores of
the next and previous slices beside the first op.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from xdsl.ir import Operation, SSAValue

from tpuc.base.errors import TpucError

NPU_NUM = 64  # lanes
LMEM_BYTES = 1 << 18  # per lane
LMEM_BANKS = 16
BANK_BYTES = LMEM_BYTES // LMEM_BANKS
EU_BYTES = 64  # one execution unit row; local buffers align to it

LOAD, COMPUTE, STORE = "load", "compute", "store"
STAGES = {LOAD: 0, COMPUTE: 1, STORE: 2}


@dataclass(frozen=True)
class Slice:
    """One slice of an NCHW tensor (W whole)."""

    n_idx: int
    n_slice: int
    h_idx: int
    h_slice: int


@dataclass
class LocalTensor:
    """A tensor in local memory: its slice per loop step (one slice: held,
    loaded once and kept), its NCHW view, element size and layout, and the
    local address of each ring slot (step % slots)."""

    key: Hashable
    dims: tuple[int, int, int, int]
    dtype_bytes: int
    slices: tuple[Slice, ...]
    eu_align: bool = True
    addrs: tuple[int, ...] = ()
    slots: int = 1
    lanes_copy: bool = False  # one plane read by every lane (a LUT table): loaded with C stride 0
    bcast_lanes: int = 0  # a 3ic conv's input: each channel broadcast to this many lanes
    lane_major: bool = False  # a pooled [1, C, 1, 1] stored lane by lane (lane_store.py)

    @property
    def held(self) -> bool:
        return len(self.slices) == 1

    def slice_at(self, step: int) -> Slice:
        return self.slices[0 if self.held else step]

    def addr_at(self, step: int) -> int:
        return self.addrs[0 if self.held else step % len(self.addrs)]

    def lane_bytes(self) -> int:
        """Bytes one lane holds of the largest slice (Arch::get_tensor_lmem_bytes)."""
        _, c, _, w = self.dims
        eu = EU_BYTES // self.dtype_bytes
        planes = -(-c // NPU_NUM)
        worst = 0
        for s in self.slices:
            plane = s.h_slice * w
            if self.eu_align:
                plane = -(-plane // eu) * eu
            worst = max(worst, s.n_slice * planes * plane * self.dtype_bytes)
        return worst


@dataclass
class LocalOp:
    """A compute op of the group and its scratch buffer (bytes per lane)."""

    op: Operation
    buffer_addr: int = 0
    buffer_size: int = 0


@dataclass(frozen=True)
class Item:
    """One timestep entry: a load or store of a tensor (by key) or an op's compute."""

    kind: str
    target: Hashable | Operation
    stage: int


@dataclass
class GroupPlan:
    ops: list[LocalOp]
    tensors: dict[Hashable, LocalTensor]
    nsecs: int
    hsecs: int
    timesteps: list[list[Item]] = field(default_factory=list)
    inputs: list[Hashable] = field(default_factory=list)  # loaded (activations, coefficients)
    outputs: list[Hashable] = field(default_factory=list)  # stored
    packed: bool = True  # False: refuse a group whose buffers need more than the 16 banks

    @property
    def steps(self) -> int:
        return self.nsecs * self.hsecs

    def local(self, op: Operation) -> LocalOp:
        return next(lop for lop in self.ops if lop.op is op)

    def lmem_bytes(self) -> int:
        """The highest local address in use (bytes per lane)."""
        ends = [a + t.lane_bytes() for t in self.tensors.values() for a in t.addrs]
        ends += [lop.buffer_addr + lop.buffer_size for lop in self.ops if lop.buffer_size]
        return max(ends, default=0)


def even_split(length: int, secs: int) -> list[tuple[int, int]]:
    """(idx, size) of `secs` near-even parts, the first `length % secs` one longer."""
    base, extra = divmod(length, secs)
    parts, idx = [], 0
    for i in range(secs):
        size = base + (1 if i < extra else 0)
        parts.append((idx, size))
        idx += size
    return parts


def _conflicts(plan: GroupPlan) -> dict[int, set[int]]:
    """id(owner) -> ids of the owners one TIU op reads or writes beside it
    (its activation operands, result, coefficients and scratch buffer)."""
    found: dict[int, set[int]] = {}
    for lop in plan.ops:
        owners = [plan.tensors[v] for v in (*lop.op.operands, *lop.op.results) if v in plan.tensors]
        owners += [t for k, t in plan.tensors.items() if isinstance(k, tuple) and k[0] is lop.op]
        if lop.buffer_size:
            owners.append(lop)
        for a in owners:
            found.setdefault(id(a), set()).update(id(b) for b in owners if b is not a)
    return found


def _banks(addr: int, size: int) -> range:
    return range(addr // BANK_BYTES, -(-(addr + max(size, 1)) // BANK_BYTES))


def _first_fit(size: int, placed: list, avoid: set[int], life=None, lifetimes=None) -> int:
    """The lowest EU-aligned address where `size` bytes overlap no placed
    buffer and share no bank with a placed buffer in `avoid` (with
    `lifetimes`: only buffers whose rows meet `life`)."""
    if lifetimes is not None:
        placed = [p for p in placed if p[3][0] <= life[1] and life[0] <= p[3][1]]
    addr = 0
    moved = True
    while moved:
        moved = False
        for owner, start, length, _ in placed:
            overlaps = addr < start + length and start < addr + size
            if not overlaps and id(owner) in avoid:
                mine, theirs = _banks(addr, size), _banks(start, length)
                overlaps = mine.start < theirs.stop and theirs.start < mine.stop
                if overlaps:
                    addr = max(addr, theirs.stop * BANK_BYTES)
                    moved = True
                    continue
            if overlaps:
                addr = -(-(start + length) // EU_BYTES) * EU_BYTES
                moved = True
    return addr


def allocate(plan: GroupPlan, lifetimes: dict[int, tuple[int, int]] | None = None) -> None:
    """Local addresses for every tensor slot and op buffer: each on a bank of
    its own while they fit, else packed first-fit, EU-aligned, where no
    operand, result, coefficient or scratch buffer of one TIU op shares a
    bank with another (the vendor's local kernels compute wrong values when
    they do, as TPU-MLIR's LmemAllocator knows); raises when the group does
    not fit one lane's 256 KiB. `lifetimes` (id of a tensor or LocalOp ->
    first and last timestep, inclusive): buffers whose timesteps do not
    meet may share bytes, placed largest (bytes × timesteps) first."""
    wanted = [(t, t.lane_bytes()) for t in plan.tensors.values() for _ in range(t.slots)]
    wanted += [(lop, lop.buffer_size) for lop in plan.ops if lop.buffer_size]
    conflicts = _conflicts(plan)
    if lifetimes is None:
        return _place(plan, wanted, None, conflicts)
    failure = None
    for order in LIFETIME_ORDERS:
        ordered = sorted(wanted, key=lambda item: order(item, lifetimes))
        try:
            return _place(plan, ordered, lifetimes, conflicts)
        except TpucError as exc:
            failure = exc
    raise failure


LIFETIME_ORDERS = (
    lambda item, life: (-item[1] * (life[id(item[0])][1] - life[id(item[0])][0] + 1),
                        life[id(item[0])][0]),
    lambda item, life: (life[id(item[0])][0], -item[1]),
    lambda item, life: (-item[1], life[id(item[0])][0]),
)  # fmt: skip
"""Orders the packing tries in turn: bytes x timesteps, then by first timestep
(interval first-fit), then by bytes."""


def _place(plan: GroupPlan, wanted: list, lifetimes, conflicts) -> None:
    """Addresses for `wanted` (owner, bytes) in this order (see allocate)."""
    total_banks = sum(-(-size // BANK_BYTES) for _, size in wanted)
    if total_banks > LMEM_BANKS and not plan.packed:
        raise TpucError(
            f"layer group of {', '.join(lop.op.name for lop in plan.ops)}: its {len(wanted)} "
            f"local buffers need {total_banks} banks of their own (the chip has {LMEM_BANKS}); "
            "packed groups are not written by model_deploy (module docstring)"
        )
    cursor, placed, where = 0, [], {}
    for owner, size in wanted:
        length = -(-size // EU_BYTES) * EU_BYTES
        life = lifetimes[id(owner)] if lifetimes is not None else None
        if total_banks <= LMEM_BANKS:
            addr = -(-cursor // BANK_BYTES) * BANK_BYTES
        else:
            addr = _first_fit(length, placed, conflicts.get(id(owner), set()), life, lifetimes)
        placed.append((owner, addr, length, life))
        where.setdefault(id(owner), []).append(addr)
        cursor = max(cursor, addr + length)
    if cursor > LMEM_BYTES:
        raise TpucError(
            f"layer group of {', '.join(lop.op.name for lop in plan.ops)}: needs {cursor} bytes "
            f"of local memory per lane (the chip has {LMEM_BYTES}); use more slices"
        )
    for t in plan.tensors.values():
        t.addrs = tuple(where[id(t)])
    for lop in plan.ops:
        if lop.buffer_size:
            lop.buffer_addr = where[id(lop)][0]


ELEMENTS_PER_CYCLE = {"tpu.Lut": 1}
"""Output elements per lane and cycle of an elementwise op (measured on
ppocr_cls: a LUT about 1, a binary op or requant about 16, the default)."""


def _tiu_guess(op: Operation) -> float:
    """A rough TIU time of `op` on its whole output (only to spread the
    weight loads over the timesteps; the vendor prices the result): a
    convolution by its output planes × lanes' input-channel blocks × taps
    (a depthwise one by planes × taps / 16), a pooling by its input planes,
    anything else by its output planes (ELEMENTS_PER_CYCLE)."""
    from math import prod

    from tpuc.dialects.base import shape_of

    out = shape_of(op.results[0])
    n, c = (out[0], out[1]) if len(out) > 1 else (1, 1)
    work = n * -(-c // NPU_NUM) * prod(out[2:])
    kernel = op.value("kernel_shape") if hasattr(op, "value") else None
    if kernel and len(op.operands) > 1 and hasattr(op.operands[1].type, "get_shape"):
        group = max(1, op.value("group") or 1)
        ic = shape_of(op.operands[0])[1] // group
        if group > 1 and ic == 1:
            return work * prod(kernel) / 16
        return work * -(-ic // NPU_NUM) * prod(kernel) / 4
    if kernel:
        return n * -(-c // NPU_NUM) * prod(shape_of(op.operands[0])[2:])
    return work / ELEMENTS_PER_CYCLE.get(op.name, 16)


def _gdma_guess(tensor: LocalTensor) -> float:
    """A rough GDMA time of loading the tensor's largest slice."""
    return 150 + tensor.lane_bytes() * min(tensor.dims[1], NPU_NUM) / 40


def chain_timesteps(plan: GroupPlan) -> list[list[Item]]:
    """One timestep per op (stage 1). The activation loads (stage 0) and
    stores (stage 2) sit beside the first op, so the GDMA moves of slices
    t+1 and t−1 overlap the compute of slice t (their tensors have two ring
    slots); the first op's coefficients load with them. Each later op's
    coefficients load in an earlier timestep of slice 0's iteration (stage
    1; held, they load once), the one whose compute has the most time left
    beside its GDMA moves (rough guesses), so weight loads overlap compute
    instead of delaying the first op (TPU-MLIR's timestep assignment moves
    them likewise)."""
    rows = [[Item(COMPUTE, lop.op, STAGES[COMPUTE])] for lop in plan.ops]
    position = {id(lop.op): i for i, lop in enumerate(plan.ops)}
    slack = [_tiu_guess(lop.op) for lop in plan.ops]
    first = []
    for key in plan.inputs:
        where = position.get(id(key[0]), 0) if isinstance(key, tuple) else 0
        if where == 0:
            first.append(Item(LOAD, key, STAGES[LOAD]))
            if plan.steps > 1:
                slack[0] -= _gdma_guess(plan.tensors[key])
            continue
        row = max(range(where), key=lambda j: (slack[j], j))
        rows[row].append(Item(LOAD, key, STAGES[COMPUTE]))
        slack[row] -= _gdma_guess(plan.tensors[key])
    rows[0] = first + rows[0]
    rows[0] += [Item(STORE, k, STAGES[STORE]) for k in plan.outputs]
    return rows


def group_values(ops: Sequence[Operation]) -> tuple[list[SSAValue], list[SSAValue]]:
    """(activation inputs, outputs) of a run of ops: operands made outside
    (not weights), results read outside the run."""
    from tpuc.dialects import top

    inside = {id(op) for op in ops}
    inputs, outputs = [], []
    for op in ops:
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, (top.WeightOp, top.NoneOp)) or id(owner) in inside:
                continue
            if all(v is not seen for seen in inputs):
                inputs.append(v)
        for r in op.results:
            if any(id(use.operation) not in inside for use in r.uses):
                outputs.append(r)
    return inputs, outputs


__all__ = [
    "BANK_BYTES",
    "COMPUTE",
    "LMEM_BYTES",
    "LOAD",
    "NPU_NUM",
    "STORE",
    "GroupPlan",
    "Item",
    "LocalOp",
    "LocalTensor",
    "Slice",
    "allocate",
    "chain_timesteps",
    "even_split",
    "group_values",
]
