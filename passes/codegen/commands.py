"""Op -> commands of tpuc's instruction set (docs/isa.md), global layers only.

Pure data movement that is a strided copy (Permute, Slice, type-preserving
Concat and Split, Tile, Expand, Depth2Space, reshapes that could not stay in
place) becomes GDMA moves (the copy rules here); every other op becomes the
engine-level commands of its rule (`engine_rules` and the modules it
loads), CPU-subnet ops their host-function command (`cpu_rules`). An op no
rule can express is a compile error naming it. Reshapes that address-assign
kept in place emit nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpuc.base.errors import TpucError
from tpuc.base.registry import Registry
from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.dialects.traits import InPlaceView, with_trait
from tpuc.ir.core import element_of
from tpuc.kernels.data import slice_bounds
from tpuc.passes.address_assign import address_of
from tpuc.passes.codegen.element_types import UnsupportedType, dtype_fields
from tpuc.target.isa.engine import GDMA_MOVE
from tpuc.target.isa.records import (
    ABSENT,
    ENGINE_GDMA,
    MAX_RANK,
    SPACE_LOCAL,
    TENSOR_COEFF,
    TENSOR_LANES,
    Command,
    Header,
    TensorRecord,
    contiguous_strides,
    element_bytes,
    lane_axis,
)

RESHAPES = with_trait(tpu.TPU_OPS, InPlaceView)
"""Reshapes address-assign may keep in place (a copy when it could not)."""


def address(value: SSAValue) -> int:
    """The device address address-assign put on a tensor type."""
    found = address_of(value)
    if found is None:
        raise TpucError(
            f"tensor {value.name_hint or value} has no address: run address-assign first"
        )
    return found


class _Local:
    """The records a layer group's emitter puts in place of global ones."""

    records: Mapping[SSAValue, TensorRecord] = {}
    npu_num: int = 0
    lmem_bytes: int = 0


@contextmanager
def local_records(
    records: Mapping[SSAValue, TensorRecord], npu_num: int, lmem_bytes: int
) -> Iterator[None]:
    """Within the block, `tensor_record(value, op)` is `records[value]` for
    the values it maps (one slice of a group, in local memory), so the
    global layers' rules build a local layer's commands unchanged."""
    saved = (_Local.records, _Local.npu_num, _Local.lmem_bytes)
    _Local.records, _Local.npu_num, _Local.lmem_bytes = records, npu_num, lmem_bytes
    try:
        yield
    finally:
        _Local.records, _Local.npu_num, _Local.lmem_bytes = saved


def tensor_record(value: SSAValue, op: Operation) -> TensorRecord:
    """The full description of an operand or result (its local slice inside
    a `local_records` block)."""
    local = _Local.records.get(value)
    if local is not None:
        return local
    if isinstance(value.owner, top.NoneOp):
        return ABSENT
    return bare_record(value, op, address(value))


def bare_record(value: SSAValue, op: Operation, addr: int = 0) -> TensorRecord:
    """`value`'s record at `addr` (type, shape and quantization; global)."""
    if isinstance(value.owner, top.NoneOp):
        return ABSENT
    try:
        fields = dtype_fields(element_of(value))
    except UnsupportedType as exc:
        raise TpucError(f"{op.name} '{_name(op)}': {exc}") from None
    if isinstance(value.owner, top.WeightOp):
        fields["flags"] = fields.get("flags", 0) | TENSOR_COEFF
    shape = shape_of(value)
    if shape is None:
        raise TpucError(f"{op.name} '{_name(op)}': operand of unknown shape")
    return TensorRecord(addr, shape=shape, **fields)


def _name(op: Operation) -> str:
    names = getattr(op, "names", None)
    return names[0] if names else op.name


def _filter_reordered(op: Operation) -> bool:
    """A 2-D conv whose filter has weight-reorder's (1, oc, ic/g, kh*kw) shape."""
    if not isinstance(op, tpu.Conv2DOp):
        return False
    kernel = op.value("kernel_shape") or []
    filt, out = shape_of(op.operands[1]), shape_of(op.results[0])
    if len(kernel) != 2 or filt is None or out is None or len(filt) != 4:
        return False
    return filt[0] == 1 and filt[1] == out[1] and filt[3] == kernel[0] * kernel[1]


def copy_command(src: TensorRecord, dst: TensorRecord, layer_id: int) -> Command:
    header = Header(GDMA_MOVE, ENGINE_GDMA, 0, 0, 1, 1, 0, layer_id=layer_id)
    return Command(header, [src], [dst])


# --- data movement as DMA -------------------------------------------------------------

CopyRule = Callable[[Operation, int], list[Command] | None]
COPY_RULES: Registry[type[Operation], CopyRule] = Registry("copy rules")


def copy_rule(*classes: type[Operation], priority: int = 0) -> Callable[[CopyRule], CopyRule]:
    """Register a DMA form of each op class (it may decline: None)."""
    return COPY_RULES.register(*classes, priority=priority)


def _same_type(op: Operation) -> bool:
    """Every operand and result has one element type: a copy is exact."""
    elements = {element_of(v) for v in (*op.operands, *op.results)}
    return len(elements) == 1


def _plain(op: Operation) -> bool:
    """No requantization or fused activation."""
    if op.attributes.get("do_relu") is not None and op.value("do_relu"):
        return False
    multipliers = op.value("multiplier") or []
    rshifts = op.value("rshift") or []
    return all(m == 1 for m in multipliers) and all(r == 0 for r in rshifts)


def _view(base: TensorRecord, shape, strides, offset: int) -> TensorRecord:
    """A strided window of `base` starting `offset` elements in (on a record
    spread over the lanes: `lane_offset`)."""
    addr = base.addr + offset * element_bytes(base.dtype)
    if base.space == SPACE_LOCAL and base.flags & TENSOR_LANES:
        addr = lane_offset(base, offset)
    return TensorRecord(
        addr,
        base.dtype,
        tuple(shape),
        tuple(strides),
        base.space,
        base.flags,
        base.scale,
        base.zero_point,
        base.storage_min,
        base.storage_max,
    )


def lane_offset(base: TensorRecord, offset: int) -> int:
    """The address of a window of a lane record `offset` elements in: k
    whole steps of the lane axis (a channel window: start lane s + k, its
    plane offset folded into the address) plus an in-plane remainder."""
    axis = lane_axis(base)
    stride = base.element_strides()[axis]
    k, rest = divmod(offset, stride) if stride else (0, offset)
    size, npu, lane_bytes = element_bytes(base.dtype), _Local.npu_num, _Local.lmem_bytes
    start, within = divmod(base.addr, lane_bytes)
    lane = start + k
    return (lane % npu) * lane_bytes + within + ((lane // npu) * stride + rest) * size


@copy_rule(*RESHAPES)
def _reshape(op: Operation, layer_id: int) -> list[Command] | None:
    if not _same_type(op):
        return None
    src, dst = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    if src.addr == dst.addr:
        return []  # in place
    flat = _view(src, dst.shape, contiguous_strides(dst.shape), 0)
    return [copy_command(flat, dst, layer_id)]


@copy_rule(tpu.PermuteOp)
def _permute(op: Operation, layer_id: int) -> list[Command] | None:
    if not _same_type(op):
        return None
    src, dst = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    order = [o % len(src.shape) for o in op.value("order")]
    strides = contiguous_strides(src.shape)
    view = _view(src, dst.shape, [strides[o] for o in order], 0)
    return [copy_command(view, dst, layer_id)]


@copy_rule(tpu.SliceOp)
def _slice(op: Operation, layer_id: int) -> list[Command] | None:
    """A strided view of the input, each axis clamped as the Slice kernel
    clamps it (`slice_bounds`); a negative step is a negative stride."""
    if not _same_type(op):
        return None
    src, dst = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    rank = len(src.shape)
    offsets, steps = op.value("offset") or [0] * rank, op.value("steps") or [1] * rank
    ends = op.value("ends") or [None] * rank
    if not len(offsets) == len(steps) == len(ends) == rank or 0 in steps:
        return None
    strides = src.element_strides()
    view_strides, offset = [], 0
    for i, dim in enumerate(src.shape):
        picked = range(dim)[slice_bounds(offsets[i], ends[i], steps[i], dim)]
        if len(picked) != dst.shape[i]:
            return None
        offset += (picked.start if len(picked) else 0) * strides[i]
        view_strides.append(picked.step * strides[i])
    view = _view(src, dst.shape, view_strides, offset)
    return [copy_command(view, dst, layer_id)]


def _pieces(
    op: Operation, whole: SSAValue, parts, into_whole: bool, layer_id: int
) -> list[Command]:
    """Copies between consecutive windows of `whole` along the op's axis and
    `parts` (Concat: parts into the whole; Split: the whole into parts)."""
    big = tensor_record(whole, op)
    axis = op.value("axis") % len(big.shape)
    strides = big.element_strides()
    commands, start = [], 0
    for value in parts:
        part = tensor_record(value, op)
        window = _view(big, part.shape, strides, start * strides[axis])
        src, dst = (part, window) if into_whole else (window, part)
        commands.append(copy_command(src, dst, layer_id))
        start += part.shape[axis]
    return commands


@copy_rule(tpu.ConcatOp)
def _concat(op: Operation, layer_id: int) -> list[Command] | None:
    if not (_same_type(op) and _plain(op)):
        return None
    return _pieces(op, op.results[0], op.operands, into_whole=True, layer_id=layer_id)


@copy_rule(tpu.UpsampleOp)
def _upsample(op: Operation, layer_id: int) -> list[Command] | None:
    """Nearest upsampling by (sh, sw): one copy from the input read with
    stride 0 over the repeats, (…, H, sh, W, sw) <- (…, H, 0, W, 0)."""
    if not (_same_type(op) and _plain(op)):
        return None
    src, dst = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    sh, sw = int(op.value("scale_h") or 1), int(op.value("scale_w") or 1)
    if len(src.shape) < 2 or len(src.shape) + 2 > MAX_RANK:
        return None
    *lead, h, w = src.shape
    if tuple(dst.shape) != (*lead, h * sh, w * sw):
        return None
    *lead_strides, h_stride, w_stride = src.element_strides()
    *lead_out, h_out, w_out = dst.element_strides()
    shape = (*lead, h, sh, w, sw)
    source = _view(src, shape, (*lead_strides, h_stride, 0, w_stride, 0), 0)
    target = _view(dst, shape, (*lead_out, h_out * sh, h_out, w_out * sw, w_out), 0)
    return [copy_command(source, target, layer_id)]


def _leading_ones(src: TensorRecord, rank: int) -> tuple[list[int], list[int]]:
    """`src`'s shape and element strides with size-1 axes prepended up to `rank`."""
    pad = rank - len(src.shape)
    return [1] * pad + list(src.shape), [0] * pad + list(src.element_strides())


@copy_rule(tpu.TileOp)
def _tile(op: Operation, layer_id: int) -> list[Command] | None:
    """np.tile: one copy of shape (…, r_i, d_i, …) over the repeated axes, the
    source read with stride 0 on each repeat axis (as Upsample); past
    MAX_RANK axes, fewer axes or several copies (`_fit_rank`)."""
    if not (_same_type(op) and _plain(op)):
        return None
    src, dst = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    reps = [int(r) for r in op.value("tile")]
    rank = max(len(reps), len(src.shape))
    reps = [1] * (rank - len(reps)) + reps
    dims, strides = _leading_ones(src, rank)
    if tuple(dst.shape) != tuple(d * r for d, r in zip(dims, reps, strict=True)):
        return None
    shape, source = [], []
    for d, r, st in zip(dims, reps, strides, strict=True):
        if r != 1:
            shape.append(r)
            source.append(0)
        shape.append(d)
        source.append(st)
    return [
        copy_command(_view(src, part, s, s_off), _view(dst, part, d, d_off), layer_id)
        for part, s, s_off, d, d_off in _fit_rank(shape, source, contiguous_strides(shape))
    ]


def _fit_rank(shape, src_strides, dst_strides) -> list[tuple]:
    """One strided copy of `shape` as copies of at most MAX_RANK axes, each
    (shape, source strides, source offset, destination strides, destination
    offset) in elements: size-1 axes dropped, then axes that are one run in
    both tensors merged, then one copy per index of the leading axes left."""
    axes = [(n, s, d) for n, s, d in zip(shape, src_strides, dst_strides, strict=True) if n != 1]
    merged: list[tuple[int, int, int]] = []
    for n, s, d in axes:
        if merged and merged[-1][1] == s * n and merged[-1][2] == d * n:
            merged[-1] = (merged[-1][0] * n, s, d)
        else:
            merged.append((n, s, d))
    merged = merged or [(1, 1, 1)]
    lead, rest = merged[:-MAX_RANK] if len(merged) > MAX_RANK else [], merged[-MAX_RANK:]
    part = tuple(n for n, _, _ in rest)
    inner_s, inner_d = tuple(s for _, s, _ in rest), tuple(d for _, _, d in rest)
    copies = []
    for index in np.ndindex(*(n for n, _, _ in lead)):
        s_off = sum(i * s for i, (_, s, _) in zip(index, lead, strict=True))
        d_off = sum(i * d for i, (_, _, d) in zip(index, lead, strict=True))
        copies.append((part, inner_s, s_off, inner_d, d_off))
    return copies


@copy_rule(tpu.ExpandOp)
def _expand(op: Operation, layer_id: int) -> list[Command] | None:
    """Broadcast: one copy to the output, the source read with stride 0 on
    each axis it broadcasts."""
    if not (_same_type(op) and _plain(op)):
        return None
    src, dst = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    if len(src.shape) > len(dst.shape):
        return None
    dims, strides = _leading_ones(src, len(dst.shape))
    if any(d not in (1, o) for d, o in zip(dims, dst.shape, strict=True)):
        return None
    source = [0 if d == 1 else st for d, st in zip(dims, strides, strict=True)]
    return [copy_command(_view(src, dst.shape, source, 0), dst, layer_id)]


@copy_rule(tpu.Depth2SpaceOp)
def _depth2space(op: Operation, layer_id: int) -> list[Command] | None:
    """DepthToSpace / SpaceToDepth is a reshape, a transpose and a reshape:
    one copy of the transposed 6-D shape, the source the input's 6-D
    contiguous strides permuted, the destination the output viewed in it."""
    if not _same_type(op):
        return None
    src, dst = tensor_record(op.operands[0], op), tensor_record(op.results[0], op)
    if len(src.shape) != 4 or tuple(src.element_strides()) != contiguous_strides(src.shape):
        return None
    bh, bw = int(op.value("block_h")), int(op.value("block_w"))
    crd, inversed = bool(op.value("is_CRD")), bool(op.value("is_inversed"))
    n, c, h, w = src.shape
    if inversed:
        if h % bh or w % bw:
            return None
        split = (n, c, h // bh, bh, w // bw, bw)
        order = (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
    else:
        if c % (bh * bw):
            return None
        oc = c // (bh * bw)
        split = (n, oc, bh, bw, h, w) if crd else (n, bh, bw, oc, h, w)
        order = (0, 1, 4, 2, 5, 3) if crd else (0, 3, 4, 1, 5, 2)
    strides = contiguous_strides(split)
    shape = tuple(split[o] for o in order)
    if math.prod(shape) != math.prod(dst.shape):
        return None
    view = _view(src, shape, [strides[o] for o in order], 0)
    target = _view(dst, shape, contiguous_strides(shape), 0)
    return [copy_command(view, target, layer_id)]


@copy_rule(tpu.SplitOp)
def _split(op: Operation, layer_id: int) -> list[Command] | None:
    if not _same_type(op):
        return None
    return _pieces(op, op.operands[0], op.results, into_whole=False, layer_id=layer_id)


def has_commands(op_class: type[Operation]) -> bool:
    """Codegen has a rule for the class: a DMA form, engine-level commands,
    a host function (CPU subnets) or an in-place reshape."""
    from tpuc.passes.codegen.cpu_rules import CPU_RULES
    from tpuc.passes.codegen.engine_rules import ENGINE_RULES

    rules = (COPY_RULES, ENGINE_RULES, CPU_RULES)
    return op_class in RESHAPES or any(r.get(op_class) is not None for r in rules)


def no_command(op: Operation) -> TpucError:
    """The error for an op none of whose rules can express it."""
    return TpucError(
        f"{op.name} '{_name(op)}' has no command in tpuc's instruction set for this form "
        f"(types {', '.join(str(element_of(v)) for v in (*op.operands, *op.results))}); "
        "docs/isa.md lists the forms each op compiles"
    )


def op_commands(op: Operation, layer_id: int) -> list[Command]:
    """The commands of one TPU-subnet op: DMA where it is a plain copy, else
    its engine-level commands."""
    from tpuc.passes.codegen.engine_rules import engine_commands

    rule = COPY_RULES.get(type(op))
    commands = rule(op, layer_id) if rule is not None else None
    if commands is None:
        commands = engine_commands(op, layer_id)
    if commands is None:
        raise no_command(op)
    return commands
