"""Resize of the TOP dialect: the op's attributes become the kernel
library's `Interp` record (`tpuc.kernels.resize`)."""

from __future__ import annotations

from tpuc.dialects import top
from tpuc.interp.top_ops.registry import ints, library
from tpuc.kernels import resize as lib


def interp_record(op) -> lib.Interp:
    a = op.value("cubic_coeff_a")
    return lib.Interp(
        tuple(ints(op, "target_shape")),
        tuple(float(s) for s in (op.value("scales") or [])),
        op.value("mode") or "nearest",
        op.value("coord_mode") or "half_pixel",
        op.value("nearest_mode") or "round_prefer_floor",
        None if a is None else float(a),
        bool(op.value("exclude_outside")),
    )


library(top.InterpOp, interp_record, lib.interp)
