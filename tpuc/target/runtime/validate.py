"""Checks of every command of a bmodel before anything runs.

`check_command` runs when a program is loaded, before the command's step
is built: every tensor record must be well-formed (known dtype, a sane
element count for the memory it lies in, quantization fields inside their
storage range), and for the engine-level opcodes in `SHAPE_RULES` the
result shapes are derived from the parameter block and the operand shapes
and compared with the result records, so a damaged command (e.g. a conv
whose pads would make a huge output) fails at load with one line instead of
allocating memory or running to a wrong result. An opcode without an entry
(added by later work, or a transitional per-op command) gets the generic
record checks only, which bound the memory it can touch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tpuc.base.dtypes import ELEMENT_TYPES
from tpuc.base.errors import TpucError
from tpuc.kernels.conv_plan import out_size
from tpuc.kernels.pool_geometry import PoolGeometry
from tpuc.target.isa import block_codec
from tpuc.target.isa import engine as isa
from tpuc.target.isa.records import (
    SPACE_LOCAL,
    TENSOR_LANES,
    TENSOR_QUANTIZED,
    Command,
    TensorRecord,
    element_bytes,
)
from tpuc.target.runtime.device import Device

# A record may name at most this many times the bytes of the memory it lies
# in (stride-0 broadcasts read less than they name), plus SLACK_BYTES.
SPREAD = 16
SLACK_BYTES = 1 << 20
MAX_STRIDE = 1 << 40  # elements; (numpy takes byte strides up to 2^63)
QUANT_RANGES = {
    "i8": (-128, 127),
    "u8": (0, 255),
    "i16": (-(1 << 15), (1 << 15) - 1),
    "u16": (0, (1 << 16) - 1),
    "i32": (-(1 << 31), (1 << 31) - 1),
    "u32": (0, (1 << 32) - 1),
}

Shapes = list[tuple[int, ...]]
ShapeRule = Callable[[Command, object], Shapes]


class CommandError(ValueError):
    """A command whose records or parameters contradict each other."""


def check_command(command: Command, device: Device, what: str) -> None:
    """One-line TpucError naming `what` if the command is malformed."""
    try:
        for record in command.operands:
            _check_record(record, device)
        for i, record in enumerate(command.results):
            if record.absent:
                raise CommandError(f"result {i} is absent")
            _check_record(record, device)
        _check_shapes(command)
    except (CommandError, TpucError) as exc:
        raise TpucError(f"{what}: {exc}") from None
    except (block_codec.BlockError, ValueError, IndexError, TypeError, OverflowError) as exc:
        raise TpucError(f"{what}: malformed command: {exc}") from None


def build_step(make: Callable, command: Command, device: Device, what: str):
    """`make(command, device, what)` after `check_command`; whatever else a
    damaged command makes the step's constructor raise becomes one line."""
    check_command(command, device, what)
    try:
        return make(command, device, what)
    except TpucError:
        raise
    except Exception as exc:  # noqa: BLE001 - a step built from a damaged command
        raise TpucError(f"{what}: malformed command: {type(exc).__name__}: {exc}") from None


# --- tensor records ---------------------------------------------------------------------------


def _check_record(record: TensorRecord, device: Device) -> None:
    if record.absent:
        return
    if record.dtype not in ELEMENT_TYPES:
        raise CommandError(f"record of unknown element type {record.dtype!r}")
    if any(abs(s) > MAX_STRIDE for s in record.strides):
        raise CommandError(f"strides {list(record.strides)} exceed any memory")
    if record.flags & TENSOR_LANES and record.space != SPACE_LOCAL:
        raise CommandError(f"lane flags {record.flags & TENSOR_LANES} on a global record")
    if record.addr % element_bytes(record.dtype):
        raise CommandError(f"address {record.addr:#x} is not aligned to its {record.dtype}")
    # TpucError: outside memory; local: outside a lane (lane records: per plane group)
    region = device.region(record, f"a {record.dtype} record")
    count = math.prod(record.shape)
    if count * element_bytes(record.dtype) > SPREAD * region.size + SLACK_BYTES:
        raise CommandError(
            f"a {list(record.shape)} {record.dtype} record names far more memory than its "
            f"{region.size}-byte {region.name} holds"
        )
    if record.flags & TENSOR_QUANTIZED:
        _check_quantized(record)


def _check_quantized(r: TensorRecord) -> None:
    bounds = QUANT_RANGES.get(r.dtype)
    if bounds is None:
        raise CommandError(f"a quantized record of {r.dtype}")
    if not (math.isfinite(r.scale) and r.scale > 0):
        raise CommandError(f"quantization scale {r.scale} is not a positive number")
    lo, hi = bounds
    if not lo <= r.storage_min <= r.storage_max <= hi:
        raise CommandError(
            f"storage range [{r.storage_min}, {r.storage_max}] does not fit {r.dtype}"
        )
    if not r.storage_min <= r.zero_point <= r.storage_max:
        raise CommandError(f"zero point {r.zero_point} outside [{r.storage_min}, {r.storage_max}]")


# --- result shapes by opcode ------------------------------------------------------------------


def _check_shapes(command: Command) -> None:
    opcode = command.header.opcode
    if opcode in COPY_OPCODES:
        _check_copy(command)
        return
    rule = SHAPE_RULES.get(opcode)
    if rule is None:
        return  # an opcode added later: the record checks above bound its memory
    block = block_codec.decode_block(opcode, command.params)
    expected = rule(command, block)
    found = [tuple(r.shape) for r in command.results]
    if expected != found:
        raise CommandError(
            f"result shapes {[list(s) for s in found]}, but the parameters and operand "
            f"shapes give {[list(s) for s in expected]}"
        )


def _check_copy(command: Command) -> None:
    if len(command.operands) != 1 or len(command.results) != 1 or command.operands[0].absent:
        raise CommandError("a GDMA command has one source and one destination")
    src, dst = command.operands[0], command.results[0]
    if src.dtype != dst.dtype or math.prod(src.shape) != math.prod(dst.shape):
        raise CommandError("source and destination differ in dtype or size")


def _operands(command: Command, count: int) -> list[tuple[int, ...]]:
    """The shapes of the first `count` operands (the first must be present)."""
    if len(command.operands) < count or command.operands[0].absent:
        raise CommandError(f"{len(command.operands)} operands, at least {count} needed")
    return [tuple(r.shape) for r in command.operands[:count]]


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise CommandError(message)


def _conv(command: Command, b: isa.ConvBlock) -> Shapes:
    x, w = _operands(command, 2)
    n = b.n_spatial
    _need(len(x) == n + 2 and len(w) == n + 2, f"conv operands {list(x)}, {list(w)} for {n}-D")
    _need(tuple(w[2:]) == tuple(b.kernel), f"filter {list(w)} for kernel {list(b.kernel)}")
    _need(b.group >= 1 and x[1] % b.group == 0, f"group {b.group} for {x[1]} channels")
    _need(min(b.strides + b.dilations, default=1) >= 1, "strides and dilations must be >= 1")
    _need(min(b.pad_begins + b.pad_ends, default=0) >= 0, "negative pads")
    if b.mode == isa.CONV_TRANSPOSED:
        _need(w[0] == x[1], f"transposed filter {list(w)} for {x[1]} input channels")
        extra = tuple(b.output_padding) or (0,) * n
        _need(len(extra) == n, "output_padding count")
        spatial = tuple(
            (s - 1) * st + (k - 1) * d + 1 + e - pb - pe
            for s, st, k, d, e, pb, pe in zip(
                x[2:], b.strides, b.kernel, b.dilations, extra, b.pad_begins, b.pad_ends,
                strict=True,
            )
        )  # fmt: skip
        oc = w[1] * b.group
    else:
        _need(w[1] * b.group == x[1], f"filter {list(w)}, group {b.group}, input {list(x)}")
        _need(w[0] % b.group == 0, f"{w[0]} output channels for group {b.group}")
        spatial = tuple(
            out_size(s, k, st, d, pb, pe)
            for s, k, st, d, pb, pe in zip(
                x[2:], b.kernel, b.strides, b.dilations, b.pad_begins, b.pad_ends, strict=True
            )
        )
        oc = w[0]
    _need(min(spatial, default=1) >= 1, f"empty conv output {list(spatial)}")
    _bias(command, oc)
    return [(x[0], oc, *spatial)]


def _bias(command: Command, channels: int) -> None:
    if len(command.operands) > 2 and not command.operands[2].absent:
        size = math.prod(command.operands[2].shape)
        _need(size in (channels, 3 * channels), f"bias of {size} values for {channels} channels")


def _matmul(command: Command, b: isa.MatMulBlock) -> Shapes:
    x, w = _operands(command, 2)
    _need(len(x) >= 1 and len(w) >= 1, "matmul of a scalar")
    if b.right_transpose and len(w) >= 2:
        w = (*w[:-2], w[-1], w[-2])
    try:
        shape = np.matmul(_probe(x), _probe(w)).shape
    except ValueError as exc:
        raise CommandError(f"matmul of {list(x)} and {list(w)}: {exc}") from None
    return [tuple(shape)]


def _probe(shape: tuple[int, ...]) -> np.ndarray:
    """A zero-byte array with `shape`'s shape (strides 0), for shape rules."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.bool_), shape, (0,) * len(shape))


def _broadcast(command: Command, count: int) -> Shapes:
    shapes = _operands(command, count)
    _need(all(not r.absent for r in command.operands[:count]), "an absent operand")
    try:
        return [tuple(np.broadcast_shapes(*shapes))]
    except ValueError:
        raise CommandError(f"operands {[list(s) for s in shapes]} do not broadcast") from None


def _arith(command: Command, b: isa.ArithBlock) -> Shapes:
    _need(len(command.operands) == b.n_inputs >= 1, f"{len(command.operands)} operands")
    _need(all(0 <= r < 64 for r in b.rshifts), f"term rshifts {list(b.rshifts)}")
    return _broadcast(command, b.n_inputs)


def _farith(command: Command, b: isa.FarithBlock) -> Shapes:
    _need(len(command.operands) == b.n_inputs >= 1, f"{len(command.operands)} operands")
    if b.form != isa.FARITH_TENSORS or isa.FARITH_OPS[b.op] == "Scale":
        return [_operands(command, 1)[0]]
    return _broadcast(command, b.n_inputs)


def _same(command: Command, _block) -> Shapes:
    return [_operands(command, 1)[0]]


def _pool(command: Command, b: isa.PoolBlock) -> Shapes:
    (x,) = _operands(command, 1)
    n = b.n_kernel
    _need(1 <= n <= len(x) - 2, f"{n}-D pool window on {list(x)}")
    _need(b.n_strides in (0, n) and b.n_pads in (0, 2 * n), "pool strides/pads counts")
    _need(min(b.kernel) >= 1 and min(b.strides, default=1) >= 1, "pool kernel/strides < 1")
    _need(min(b.pads, default=0) >= 0, "negative pool pads")
    spatial = x[len(x) - n :]
    geometry = PoolGeometry(b.kernel, b.strides, b.pads, bool(b.ceil_mode), spatial)
    _need(min(geometry.out) >= 1, f"empty pool output {geometry.out}")
    return [tuple(x[: len(x) - n]) + tuple(geometry.out)]


def _reduce(command: Command, b: isa.ReduceBlock) -> Shapes:
    (x,) = _operands(command, 1)
    rank = len(x)
    _need(all(-rank <= a < rank for a in b.axes), f"axes {list(b.axes)} for rank {rank}")
    axes = {a % rank for a in b.axes} if b.axes else set(range(rank))
    if b.keepdims:
        return [tuple(1 if i in axes else d for i, d in enumerate(x))]
    return [tuple(d for i, d in enumerate(x) if i not in axes)]


def _norm(command: Command, b: isa.NormBlock) -> Shapes:
    (x,) = _operands(command, 1)
    _need(-len(x) <= b.axis < max(1, len(x)), f"axis {b.axis} for rank {len(x)}")
    return [x]


def _lut(command: Command, b: isa.LutBlock) -> Shapes:
    x, table = _operands(command, 2)
    _need(math.prod(table) <= 1 << 16, f"a lookup table of {list(table)}")
    return [x]


def _axis(axis: int, rank: int) -> int:
    _need(-rank <= axis < max(1, rank), f"axis {axis} for rank {rank}")
    return axis % max(1, rank)


def _fill(command: Command, _block) -> Shapes:
    _need(not command.operands and len(command.results) == 1, "a fill has one destination only")
    return [tuple(command.results[0].shape)]


def _gather(command: Command, b: isa.GatherBlock) -> Shapes:
    x, idx = _operands(command, 2)
    axis = _axis(b.axis, len(x))
    return [x[:axis] + idx + x[axis + 1 :]]


def _arg(command: Command, b: isa.ArgBlock) -> Shapes:
    (x,) = _operands(command, 1)
    axis = _axis(b.axis, len(x))
    if b.keepdims:
        return [x[:axis] + (1,) + x[axis + 1 :]]
    return [x[:axis] + x[axis + 1 :]]


def _topk(command: Command, b: isa.TopkBlock) -> Shapes:
    (x,) = _operands(command, 1)
    axis = _axis(b.axis, len(x))
    _need(0 <= b.k <= x[axis], f"K={b.k} outside [0, {x[axis]}] on axis {axis}")
    out = x[:axis] + (b.k,) + x[axis + 1 :]
    return [out, out]


def _resize(command: Command, b: isa.ResizeBlock) -> Shapes:
    (x,) = _operands(command, 1)
    _need(b.n_target <= len(x), f"{b.n_target} resized dims of a rank-{len(x)} input")
    _need(min(b.target_shape, default=1) >= 1, f"empty resize target {list(b.target_shape)}")
    return [x[: len(x) - b.n_target] + tuple(b.target_shape)]


COPY_OPCODES = frozenset((isa.GDMA_MOVE, isa.GDMA_LOAD, isa.GDMA_STORE, isa.GDMA_L2L))
"""The plain strided copies: one source, one destination of its dtype and size."""

SHAPE_RULES: dict[int, ShapeRule] = {
    isa.TIU_CONV: _conv,
    isa.TIU_MATMUL: _matmul,
    isa.TIU_ARITH: _arith,
    isa.TIU_POOL: _pool,
    isa.TIU_REDUCE: _reduce,
    isa.TIU_LUT: _lut,
    isa.TIU_CVT: _same,
    isa.TIU_SFU: _same,
    isa.TIU_FARITH: _farith,
    isa.TIU_NORM: _norm,
    isa.TIU_ARG: _arg,
    isa.TIU_RESIZE: _resize,
    isa.GDMA_FILL: _fill,
    isa.GDMA_GATHER: _gather,
    isa.CPU_TOPK: _topk,
}
"""Engine opcode -> (command, decoded block) -> the result shapes it must have."""
