"""Data movement of the TOP dialect: each op's attributes become a record of
the kernel library (`tpuc.kernels.data`), built once per op."""

from __future__ import annotations

from tpuc.dialects import top
from tpuc.interp.top_ops.registry import ints, library, relu_of
from tpuc.kernels import data


def _tuple(op, key: str) -> tuple[int, ...]:
    return tuple(ints(op, key))


def split_record(op) -> data.Split:
    return data.Split(int(op.value("axis")), _tuple(op, "split_size"), len(op.results))


def slice_record(op) -> data.Slice:
    return data.Slice(_tuple(op, "offset"), _tuple(op, "ends"), _tuple(op, "steps"))


def depth2space_record(op) -> data.Depth2Space:
    return data.Depth2Space(
        int(op.value("block_h")),
        int(op.value("block_w")),
        bool(op.value("is_CRD")),
        bool(op.value("is_inversed")),
    )


def pad_record(op) -> data.Pad:
    return data.Pad(_tuple(op, "paddings"), op.value("mode") or "constant", float(op.value("val")))


library(top.ConcatOp, lambda op: data.Concat(int(op.value("axis")), relu_of(op)), data.concat)
library(top.SplitOp, split_record, data.split)
library(top.SliceOp, slice_record, data.slice_)
library(top.ReshapeOp, lambda op: data.Reshape(_tuple(op, "shape")), data.reshape)
library(
    top.FlattenOp,
    lambda op: data.Flatten(int(op.value("start_dim")), int(op.value("end_dim"))),
    data.flatten,
)
library(top.SqueezeOp, lambda op: data.Squeeze(_tuple(op, "axes")), data.squeeze)
library(top.UnsqueezeOp, lambda op: data.Unsqueeze(_tuple(op, "axes")), data.unsqueeze)
library(top.PermuteOp, lambda op: data.Permute(_tuple(op, "order")), data.permute)
library(top.Depth2SpaceOp, depth2space_record, data.depth_to_space)
library(top.PadOp, pad_record, data.pad)
library(top.TileOp, lambda op: data.Tile(_tuple(op, "tile")), data.tile)
library(top.ExpandOp, lambda op: data.Expand(_tuple(op, "shape")), data.expand)
library(top.GatherOp, lambda op: data.Gather(int(op.value("axis"))), data.gather)
library(
    top.UpsampleOp,
    lambda op: data.Upsample(int(op.value("scale_h")), int(op.value("scale_w"))),
    data.upsample,
)
