"""address-assign: global-memory addresses (TPU_DIVIDED -> TPU_ADDRESSED).

Layout, from `chip.gmem_start` up:
- the coefficient region: every weight of func @main in the order of its
  first reader, each at a multiple of `chip.gmem_align`, no reuse; its size
  is rounded up to 4 KiB;
- the neuron region, at the next 4 KiB boundary: every activation (network
  inputs and outputs included) at a multiple of `chip.neuron_align`, packed
  by liveness (passes/liveness.py) with reuse. The allocator is greedy:
  buffers by size, largest first (ties in graph order), each at the lowest
  offset that overlaps no placed buffer whose live range meets its own.
  Live ranges are inclusive, so an op's result never shares memory with an
  operand it reads; reshape-family ops are in place (their result has their
  input's address, and codegen emits nothing for them), and so are the
  inputs a channel concat alone reads (at their windows of its result).

Layer groups (`tpu.Group`, from the layer-group pass) are one op of the
function body: the tensors inside a group live in local memory and get no
address; the group's operands and results live in DDR across the whole
group (its loop loads slices of every input and stores slices of every
output throughout), as an op's operands and results overlap.

Each address is the result type's tensor encoding,
`tensor<1x64xf32, 4294971392 : i64>` (`address_of` reads it); top.None has
none. The function signature follows its returned types, and the module gets
`module.coeff_addr/coeff_size/neuron_addr/neuron_size`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from tpuc.base.errors import TpucError
from tpuc.dialects.quant import QuantizedType
from tpuc.passes.liveness import Buffer, buffers, weight_order
from tpuc.target.chips import Chip

REGION_ALIGN = 4096
"""Alignment of the coefficient and neuron regions and of coeff_size."""


def align_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


# --- sizes and addresses of values -------------------------------------------------------


def element_bytes(element: Attribute) -> int | None:
    """Bytes per element: f32/i32 4, f16/bf16 2, i8/u8/quant i8/u8 1 …"""
    if isinstance(element, QuantizedType):
        return max(1, element.storage_width // 8)
    if isinstance(element, IntegerType):
        return max(1, element.width.data // 8)
    if isinstance(element, Float16Type | BFloat16Type):
        return 2
    if isinstance(element, Float32Type):
        return 4
    if isinstance(element, Float64Type | IndexType):
        return 8
    return None


def tensor_label(value: SSAValue) -> str:
    """The tensor name of `value` for error messages."""
    owner = value.owner
    names = getattr(owner, "names", None)
    if isinstance(owner, Operation) and names:
        return f"tensor '{names[value.index]}' ({owner.name})"
    return f"value #{value.index} of {getattr(owner, 'name', 'a block')}"


def tensor_bytes(value: SSAValue) -> int:
    """numel × element bytes of a statically shaped tensor value."""
    t = value.type
    if not isinstance(t, TensorType) or any(d < 0 for d in t.get_shape()):
        raise TpucError(f"address-assign: {tensor_label(value)} has no static shape ({t})")
    size = element_bytes(t.element_type)
    if size is None:
        raise TpucError(
            f"address-assign: {tensor_label(value)} has element type {t.element_type} "
            "of unknown size"
        )
    return math.prod(t.get_shape()) * size


def address_of(value: SSAValue) -> int | None:
    """The device address address-assign gave `value`, None if it has none."""
    t = value.type
    if isinstance(t, TensorType) and isinstance(t.encoding, IntegerAttr):
        return t.encoding.value.data
    return None


def set_address(value: SSAValue, address: int) -> None:
    """Write `address` as the encoding of `value`'s tensor type."""
    from tpuc.passes.shape_infer import set_type

    t = value.type
    assert isinstance(t, TensorType)
    set_type(value, TensorType(t.element_type, t.get_shape(), IntegerAttr(address, i64)))


# --- the allocator -------------------------------------------------------------------------


@dataclass
class Placed:
    buffer: Buffer
    size: int
    offset: int = 0

    @property
    def end(self) -> int:
        return self.offset + self.size


def lowest_offset(size: int, busy: Iterable[Placed], alignment: int) -> int:
    """The lowest aligned offset where `size` bytes miss every busy range."""
    offset = 0
    for other in sorted(busy, key=lambda p: p.offset):
        if offset + size <= other.offset:
            break
        offset = max(offset, align_up(other.end, alignment))
    return offset


def pack(found: list[Buffer], sizes: list[int], alignment: int) -> tuple[list[int], int]:
    """Offsets of the buffers (greedy, see the module docstring) and the
    extent of the region they use."""
    items = [Placed(b, align_up(max(s, 1), alignment)) for b, s in zip(found, sizes, strict=True)]
    order = sorted(range(len(items)), key=lambda i: (-items[i].size, items[i].buffer.start, i))
    placed: list[Placed] = []
    for i in order:
        item = items[i]
        busy = (p for p in placed if p.buffer.overlaps(item.buffer))
        item.offset = lowest_offset(item.size, busy, alignment)
        placed.append(item)
    return [p.offset for p in items], max((p.end for p in items), default=0)


# --- the layout ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    coeff_addr: int
    coeff_size: int
    neuron_addr: int
    neuron_size: int


def assign_weights(weights: list[SSAValue], start: int, alignment: int) -> int:
    """Consecutive aligned addresses from `start`; the bytes used."""
    offset = 0
    for value in weights:
        offset = align_up(offset, alignment)
        set_address(value, start + offset)
        offset += tensor_bytes(value)
    return offset


def assign(block, chip: Chip) -> Layout:
    """Address every weight and activation of `block` (a function body)."""
    coeff_addr = chip.gmem_start
    coeff_size = align_up(
        assign_weights(weight_order(block), coeff_addr, chip.gmem_align), REGION_ALIGN
    )
    neuron_addr = align_up(coeff_addr + coeff_size, REGION_ALIGN)
    found = buffers(block)
    active = [b for b in found if not b.constant]
    sizes = [max(tensor_bytes(v) for v in b.values) for b in active]
    offsets, neuron_size = pack(active, sizes, chip.neuron_align)
    for buffer, offset in zip(active, offsets, strict=True):
        for value in buffer.values:
            set_address(value, neuron_addr + offset + buffer.offsets.get(value, 0))
    for buffer in found:
        if buffer.constant:
            for value in buffer.values[1:]:
                set_address(value, address_of(buffer.root))  # type: ignore[arg-type]
    end = neuron_addr + neuron_size
    if end > chip.gmem_start + chip.gmem_bytes:
        raise TpucError(
            f"address-assign: the model needs {end - chip.gmem_start} bytes of global memory, "
            f"{chip.name} has {chip.gmem_bytes}"
        )
    return Layout(coeff_addr, coeff_size, neuron_addr, neuron_size)


@dataclass(frozen=True)
class AddressAssignPass(ModulePass):
    """Address weights and activations of func @main; `chip` defaults to
    module.chip."""

    name = "address-assign"

    chip: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.base.module_state import ModuleState, advance_state, require_state
        from tpuc.ir.core import main_function
        from tpuc.ir.module_io import set_module_attr
        from tpuc.passes.finalize import module_chip

        require_state(op, self.name, ModuleState.TPU_DIVIDED)
        chip = module_chip(op, self.name, self.chip)
        main = main_function(op)
        layout = assign(main.body.block, chip)
        main.update_function_type()
        for key, value in asdict(layout).items():
            set_module_attr(op, key, value)
        advance_state(op, ModuleState.TPU_ADDRESSED)


__all__ = [
    "AddressAssignPass",
    "Layout",
    "address_of",
    "align_up",
    "assign",
    "element_bytes",
    "pack",
    "tensor_bytes",
]
