"""How engine parameter blocks are laid out in bytes: one `Layout` per
opcode (`BLOCKS`), the shared requant sub-block, and encode/decode with the
checks a simulator needs before it trusts a block (docs/isa.md
"Engine-level commands"). What the blocks mean lives in `engine`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tpuc.target.isa.engine import (
    ARG_MODES,
    CAST_TO,
    CPU_TOPK,
    CVT_RESCALE,
    ENGINE_NAMES,
    FARITH_CONST_REVERSED,
    FARITH_OPS,
    GDMA_FILL,
    GDMA_GATHER,
    MAX_AXES,
    MAX_INPUTS,
    MAX_RESIZE_AXES,
    MAX_SPATIAL,
    NORM_FUNCTIONS,
    RESIZE_COORD_MODES,
    RESIZE_MODES,
    RESIZE_NEAREST_MODES,
    RNN_BIAS,
    RNN_GRU,
    RNN_INITIAL_C,
    RNN_INITIAL_H,
    ROUND_MODES,
    SFU_FUNCTIONS,
    SFU_OPTIONS,
    TIU_ARG,
    TIU_ARITH,
    TIU_CONV,
    TIU_CVT,
    TIU_FARITH,
    TIU_LUT,
    TIU_MATMUL,
    TIU_NORM,
    TIU_POOL,
    TIU_REDUCE,
    TIU_RESIZE,
    TIU_RNN,
    TIU_SFU,
    ArgBlock,
    ArithBlock,
    ConvBlock,
    CvtBlock,
    FarithBlock,
    FillBlock,
    GatherBlock,
    LutBlock,
    MatMulBlock,
    NormBlock,
    PoolBlock,
    ReduceBlock,
    RequantBlock,
    ResizeBlock,
    RnnBlock,
    SfuBlock,
    TopkBlock,
)
from tpuc.target.isa.records import RECORD_BYTES


class BlockError(ValueError):
    """A parameter block that does not fit its opcode."""


REQUANT = struct.Struct("<iiBBbB4xd")  # 24 bytes
REQUANT_FIELDS = ("multiplier", "rshift", "round_mode", "relu", "axis", "per_channel", "relu_limit")


def _pack_requant(r: RequantBlock) -> tuple:
    return tuple(getattr(r, f) for f in REQUANT_FIELDS)


@dataclass(frozen=True)
class Layout:
    """One opcode's block: its struct, its record class, how fields map
    to struct items (a name, or (name, count) for a fixed-size array)."""

    fmt: struct.Struct
    cls: type
    items: tuple  # field names / (name, count) before the requant sub-block
    requant: bool
    tail_fmt: struct.Struct | None = None  # fields appended after the requant sub-block
    tail: tuple = ()  # (fields added later go here: older blocks read them as 0)

    @property
    def size(self) -> int:
        tail = self.tail_fmt.size if self.tail_fmt else 0
        return self.fmt.size + (REQUANT.size if self.requant else 0) + tail

    @property
    def records(self) -> int:
        return -(-self.size // RECORD_BYTES)


S = MAX_SPATIAL
BLOCKS: dict[int, Layout] = {
    TIU_CONV: Layout(
        struct.Struct(f"<BBBxI{S}I{S}I{S}I{S}I{S}I{S}I"),
        ConvBlock,
        (
            "mode",
            "n_spatial",
            "n_output_padding",
            "group",
            ("kernel", S),
            ("strides", S),
            ("dilations", S),
            ("pad_begins", S),
            ("pad_ends", S),
            ("output_padding", S),
        ),
        True,
    ),
    TIU_MATMUL: Layout(struct.Struct("<B7x"), MatMulBlock, ("right_transpose",), True),
    TIU_ARITH: Layout(
        struct.Struct(f"<BB2x{MAX_INPUTS}i"),
        ArithBlock,
        ("op", "n_inputs", ("multipliers", MAX_INPUTS)),
        True,
        struct.Struct(f"<{MAX_INPUTS}b"),
        (("rshifts", MAX_INPUTS),),
    ),
    TIU_POOL: Layout(
        struct.Struct(f"<BBBBBB2x{S}I{S}I{2 * S}I"),
        PoolBlock,
        (
            "mode",
            "ceil_mode",
            "n_kernel",
            "n_strides",
            "n_pads",
            "count_include_pad",
            ("kernel", S),
            ("strides", S),
            ("pads", 2 * S),
        ),
        True,
    ),
    TIU_REDUCE: Layout(
        struct.Struct(f"<BBB5x{MAX_AXES}b"),
        ReduceBlock,
        ("mode", "keepdims", "n_axes", ("axes", MAX_AXES)),
        True,
    ),
    TIU_LUT: Layout(struct.Struct("<B7x"), LutBlock, ("per_channel",), False),
    TIU_CVT: Layout(struct.Struct("<BB6x"), CvtBlock, ("mode", "to"), True),
    TIU_SFU: Layout(
        struct.Struct("<BB6xdd"), SfuBlock, ("function", "option", "alpha", "beta"), False
    ),
    TIU_FARITH: Layout(
        struct.Struct(f"<BBBBB3x{MAX_INPUTS}ddd"),
        FarithBlock,
        (
            "op",
            "n_inputs",
            "n_coeff",
            "form",
            "relu",
            ("coeff", MAX_INPUTS),
            "const_val",
            "relu_limit",
        ),
        False,
    ),
    TIU_NORM: Layout(
        struct.Struct("<BB2xii4xdddd"),
        NormBlock,
        ("function", "flags", "axis", "count", "eps", "beta", "bias", "relu_limit"),
        False,
    ),
    TIU_ARG: Layout(
        struct.Struct("<BBBxi"), ArgBlock, ("mode", "keepdims", "select_last_index", "axis"), False
    ),
    GDMA_FILL: Layout(struct.Struct("<d"), FillBlock, ("value",), False),
    GDMA_GATHER: Layout(struct.Struct("<i4x"), GatherBlock, ("axis",), False),
    TIU_RESIZE: Layout(
        struct.Struct(f"<BBBBBB2xd{MAX_RESIZE_AXES}I{MAX_RESIZE_AXES}d"),
        ResizeBlock,
        (
            "mode",
            "coord_mode",
            "nearest_mode",
            "exclude_outside",
            "n_target",
            "n_scales",
            "cubic_coeff_a",
            ("target_shape", MAX_RESIZE_AXES),
            ("scales", MAX_RESIZE_AXES),
        ),
        False,
    ),
    TIU_RNN: Layout(
        struct.Struct("<BBBBB3xI4x"),
        RnnBlock,
        ("cell", "directions", "batch_first", "linear_before_reset", "present", "hidden"),
        False,
    ),
    CPU_TOPK: Layout(
        struct.Struct("<iIBB6x"), TopkBlock, ("axis", "k", "largest", "sorted"), False
    ),
}
"""opcode -> its parameter block (GDMA_MOVE, LOAD, STORE and L2L have none)."""

COUNTS = {
    ("kernel", ConvBlock): "n_spatial",
    ("strides", ConvBlock): "n_spatial",
    ("dilations", ConvBlock): "n_spatial",
    ("pad_begins", ConvBlock): "n_spatial",
    ("pad_ends", ConvBlock): "n_spatial",
    ("output_padding", ConvBlock): "n_output_padding",
    ("multipliers", ArithBlock): "n_inputs",
    ("rshifts", ArithBlock): "n_inputs",
    ("kernel", PoolBlock): "n_kernel",
    ("strides", PoolBlock): "n_strides",
    ("pads", PoolBlock): "n_pads",
    ("axes", ReduceBlock): "n_axes",
    ("coeff", FarithBlock): "n_coeff",
    ("target_shape", ResizeBlock): "n_target",
    ("scales", ResizeBlock): "n_scales",
}
"""Array field -> the field holding how many of its slots are used (the rest are 0)."""

CODES: dict[int, dict[str, range]] = {
    TIU_CVT: {"mode": range(CVT_RESCALE + 1), "to": range(len(CAST_TO))},
    TIU_SFU: {"function": range(len(SFU_FUNCTIONS)), "option": range(len(SFU_OPTIONS))},
    TIU_FARITH: {"op": range(len(FARITH_OPS)), "form": range(FARITH_CONST_REVERSED + 1)},
    TIU_NORM: {"function": range(len(NORM_FUNCTIONS))},
    TIU_ARG: {"mode": range(len(ARG_MODES))},
    TIU_RESIZE: {
        "mode": range(len(RESIZE_MODES)),
        "coord_mode": range(len(RESIZE_COORD_MODES)),
        "nearest_mode": range(len(RESIZE_NEAREST_MODES)),
    },
    TIU_RNN: {
        "cell": range(RNN_GRU + 1),
        "directions": range(1, 3),
        "present": range((RNN_BIAS | RNN_INITIAL_H | RNN_INITIAL_C) + 1),
    },
}
"""Enumeration fields -> their valid codes: a decoded block outside them is refused."""


def block_size(opcode: int) -> int:
    """Bytes of the opcode's block before padding (0: no block)."""
    layout = BLOCKS.get(opcode)
    return layout.size if layout else 0


def block_records(opcode: int) -> int:
    layout = BLOCKS.get(opcode)
    return layout.records if layout else 0


def _values(items: tuple, block) -> list:
    """The struct items of `items` from the block (arrays zero-filled)."""
    values: list = []
    for item in items:
        if isinstance(item, tuple):
            name, count = item
            array = tuple(getattr(block, name))
            if len(array) > count:
                raise BlockError(f"{name} has {len(array)} values, the block holds {count}")
            values += [*array, *[0] * (count - len(array))]
        else:
            values.append(getattr(block, item))
    return values


def encode_block(opcode: int, block) -> bytes:
    """The opcode's parameter area: its block, zero-padded to whole records."""
    layout = BLOCKS[opcode]
    if not isinstance(block, layout.cls):
        raise BlockError(f"opcode {opcode:#x} takes a {layout.cls.__name__}")
    try:
        data = layout.fmt.pack(*_values(layout.items, block))
        if layout.requant:
            data += REQUANT.pack(*_pack_requant(block.requant))
        if layout.tail_fmt:
            data += layout.tail_fmt.pack(*_values(layout.tail, block))
    except struct.error as exc:
        raise BlockError(f"opcode {opcode:#x}: {exc}") from None
    return data + bytes(layout.records * RECORD_BYTES - len(data))


def decode_block(opcode: int, params: bytes):
    """The opcode's block from its parameter area (BlockError: wrong size,
    a count past its array, or an opcode without one)."""
    layout = BLOCKS.get(opcode)
    if layout is None:
        raise BlockError(f"opcode {opcode:#x} has no parameter block")
    expected = layout.records * RECORD_BYTES
    if len(params) != expected:
        raise BlockError(
            f"parameter block of {len(params)} bytes, {ENGINE_NAMES[opcode]} takes {expected}"
        )
    raw = layout.fmt.unpack_from(params, 0)
    requant_at = layout.fmt.size
    if layout.tail_fmt:
        raw += layout.tail_fmt.unpack_from(params, requant_at + REQUANT.size * layout.requant)
    fields, pos, arrays = {}, 0, {}
    for item in (*layout.items, *layout.tail):
        if isinstance(item, tuple):
            name, count = item
            arrays[name] = raw[pos : pos + count]
            pos += count
        else:
            fields[item] = raw[pos]
            pos += 1
    for name, values in arrays.items():
        used = fields[COUNTS[name, layout.cls]]
        if used > len(values):
            raise BlockError(f"{name} count {used} exceeds the block's {len(values)}")
        fields[name] = tuple(values[:used])
    if layout.requant:
        fields["requant"] = RequantBlock(*REQUANT.unpack_from(params, requant_at))
        if fields["requant"].round_mode >= len(ROUND_MODES):
            raise BlockError(f"unknown round mode code {fields['requant'].round_mode}")
    for field, valid in CODES.get(opcode, {}).items():
        if fields[field] not in valid:
            raise BlockError(f"unknown {ENGINE_NAMES[opcode]} {field} code {fields[field]}")
    return layout.cls(**fields)
