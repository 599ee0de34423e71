"""A local Add (INT8, F16, BF16) of an activation and a per-channel weight [1, C, 1, 1]
(ppocr_det's head: the ConvTranspose's bias, an ONNX Add after it): the
weight is a coefficient loaded once and held, one EU-aligned plane per
lane as TPU-MLIR keeps an Add's weight operand (`is_eu_align`), and the
chip's bcbinary_local broadcasts it over H and W, as the global call does
(binary.operand_specs). Without this the Add is a global layer and cuts
the head's group in two.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import top
from tpuc.dialects.base import shape_of
from tpuc.passes.native.cast import nchw
from tpuc.passes.native.context import NativeContext, NotExpressible, dtype_name
from tpuc.passes.native.local.ops import ELEMENT_BYTES, EU_BYTES, Coeff, lane_major, spec
from tpuc.passes.native.local.plan import GroupPlan


def applies(op: Operation) -> bool:
    """Whether the Add's second operand is a weight (its first an activation)."""
    return len(op.operands) == 2 and isinstance(op.operands[1].owner, top.WeightOp)


def check(op: Operation) -> None:
    weight, out = op.operands[1], op.results[0]
    oc = nchw(out)[1]
    if isinstance(op.operands[0].owner, top.WeightOp):
        raise NotExpressible("a local Add of two weights")
    if shape_of(op.operands[0]) != shape_of(out):
        raise NotExpressible("a local Add with its activation broadcast")
    if tuple(nchw(weight)) != (1, oc, 1, 1):
        raise NotExpressible("a local Add with a weight other than one value per channel")
    kinds = {dtype_name(weight), dtype_name(op.operands[0]), dtype_name(out)}
    if kinds - {"i8", "u8"} and (len(kinds) != 1 or kinds - {"f16", "bf16"}):
        raise NotExpressible("a local Add with a weight of another type")


def coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """The weight's raw values, one EU row per channel (an EU-aligned plane)."""
    from tpuc.ir.weights import read_weight

    check(op)
    weight = op.operands[1]
    dtype = dtype_name(weight)
    values = np.asarray(read_weight(weight.owner)).reshape(-1, 1)
    width = EU_BYTES // ELEMENT_BYTES[dtype]
    rows = np.zeros((values.shape[0], width), values.dtype)
    rows[:, :1] = values
    return [lane_major(ctx, f"{op.names[0]}_bias_eu", rows, dtype)]


def weight_spec(op: Operation, plan: GroupPlan) -> bytes:
    """tensor_spec_t of the held weight: its local address, shape [1, C, 1, 1]."""
    weight = op.operands[1]
    return spec(
        None, dtype_name(weight), (1, nchw(weight)[1], 1, 1), plan.tensors[(op, 0)].addrs[0]
    )
