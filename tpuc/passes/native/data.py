"""Ops that move data: Reshape (nothing to do when address-assign placed it
in place)."""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.passes.native.context import NativeCall, NativeContext, NotExpressible
from tpuc.passes.native.rules import native_rule


@native_rule(tpu.ReshapeOp, tpu.FlattenOp, tpu.SqueezeOp, tpu.UnsqueezeOp)
def reshape(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    if ctx.address(op.operands[0]) != ctx.address(op.results[0]):
        raise NotExpressible("a reshape that is not in place")
    return []
