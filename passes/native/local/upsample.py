"""The local rule of tpu.Upsample (nearest, the same integer scale on H and
W: ppocr_det's FPN), after TPU-MLIR's Upsample.cpp `codegen_local_bm1684x`:
`backend_api_upsample_local` with `upsample_spec_t` {size, if_relu}, the
slice in `local_sec_info_t`, no scratch. The kernel gathers each output
element through an index table, its second input: TPU-MLIR builds it
after layer grouping (AfterLayerGroupWeightReorder) as a u16 weight
[1, 64, 1, K], one entry per output element of the slice, the element's
flat position (row * input width + column) in the input slice, the
entries padded to a multiple of 64 and dealt out lane by lane (entry i
at lane i % 64, column i // 64); without it the vendor runtime asserts.

The group holding an upsample is never cut along H (`splits_h`), as
TPU-MLIR keeps ppocr_det's (h_slice = the whole output in its
layer_group_config): cut in H slices, the slices from the fourth on came
out wrong in the vendor runtime (test_local_upsample.py's conv, relu,
upsample, add with the conv's output stored too: the upsample right on
every slice, the conv's output wrong from the fourth slice on, and only
with the upsample and the add's loaded operand in the group; the same
whether the table was held or reloaded every slice); not understood,
so not done. Slices along N are whole planes
and work.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.cast import nchw
from tpuc.passes.native.context import NativeContext, NotExpressible
from tpuc.passes.native.local.ops import (
    Coeff,
    LocalRule,
    local_command,
    local_rule,
    no_buffer,
    sec_info,
    spec,
    value_spec,
)
from tpuc.passes.native.local.plan import NPU_NUM, GroupPlan, Slice

TABLE_DTYPE = "u16"


def scale(op: Operation) -> int:
    return op.value("scale_h") or 1


def index_table(out_h: int, out_w: int, s: int) -> np.ndarray:
    """The kernel's gather table for `out_h` output rows of width `out_w`,
    lane-major [64, K]: entry i (output row i // out_w, column i % out_w)
    holds the input slice position (row // s) * (out_w // s) + column // s."""
    rows, cols = np.divmod(np.arange(out_h * out_w), out_w)
    flat = (rows // s) * (out_w // s) + cols // s
    k = -(-flat.size // NPU_NUM)
    padded = np.zeros(k * NPU_NUM, np.uint16)
    padded[: flat.size] = flat
    return np.ascontiguousarray(padded.reshape(k, NPU_NUM).T)


def upsample_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    """The index table for the whole output; refuses what the global rule
    refuses."""
    from tpuc.passes.native.data import _same_quant

    _same_quant(op)
    s = scale(op)
    if s != (op.value("scale_w") or 1):
        raise NotExpressible("a local upsample with other scales on H and W")
    if len(shape_of(op.operands[0])) != 4:
        raise NotExpressible("a local upsample of a tensor that is not 4-D")
    _, _, oh, ow = nchw(op.results[0])
    if oh * ow >= 1 << 16:
        raise NotExpressible("a local upsample of more than 65,535 elements a plane")
    table = index_table(oh, ow, s)
    addr = ctx.coeffs.add(f"{op.names[0]}_indices", table)
    return [Coeff(addr, (1, NPU_NUM, 1, table.shape[1]), TABLE_DTYPE)]


def upsample_backward(op: Operation, out: Slice) -> Slice:
    """The whole input plane of the images of `out` (the group is not cut
    along H)."""
    return Slice(out.n_idx, out.n_slice, 0, nchw(op.operands[0])[2])


def whole_plane(op: Operation) -> bool:
    """False: a group holding an upsample is never cut along H (see the
    module docstring)."""
    return False


def upsample_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list:
    from tpuc.passes.native.data import Upsample

    p = Upsample()
    p.size, p.if_relu = scale(op), bool(op.value("do_relu"))
    coeff = plan.tensors[(op, 0)]
    table = spec(None, TABLE_DTYPE, coeff.dims, coeff.addrs[0])
    inputs = [value_spec(plan, op.operands[0], step), table]
    outputs = [value_spec(plan, op.results[0], step)]
    info = sec_info(op, plan, step)
    return [local_command(op, "backend_api_upsample_local", p, info, inputs, outputs)]


local_rule(tpu.UpsampleOp, rule=LocalRule(upsample_backward, upsample_coeffs, no_buffer,
                                          upsample_command, splits_h=whole_plane))  # fmt: skip
