"""The local rule of tpu.Lut (an INT8 activation as a 256-entry table:
hard-swish, hard-sigmoid, sigmoid …), after TPU-MLIR's Lut.cpp
`codegen_local_bm1684x`: the old-style `backend_api_lut` with
`is_local_layer` set, the slice's local addresses and its
(n, c, h, w) in the struct, no scratch.

Every lane looks its channels up in the same table, so the table is a
coefficient copied to all 64 lanes by one load reading its 256 bytes with
C stride 0 (`Coeff.lanes_copy`; TPU-MLIR's GDMA broadcast of the table),
laid out as the global rule lays it out (lut.chip_table: indexed by the
raw input byte). Per-channel tables stay global layers.
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.passes.native.cast import nchw
from tpuc.passes.native.context import NativeContext, NotExpressible, dtype_code
from tpuc.passes.native.local.ops import Coeff, LocalRule, identity, local_rule, no_buffer
from tpuc.passes.native.local.plan import NPU_NUM, GroupPlan
from tpuc.passes.native.lut import LutParam, chip_table

TABLE = 256


def lut_coeffs(op: Operation, ctx: NativeContext) -> list[Coeff]:
    from tpuc.passes.native.context import dtype_name

    tables = chip_table(op)
    if len(tables) != 1:
        raise NotExpressible("a local Lut with a table per channel")
    addr = ctx.coeffs.add(op.operands[1].owner.names[0], tables[0])
    return [Coeff(addr, (1, NPU_NUM, 1, TABLE), dtype_name(op.operands[1]), lanes_copy=True)]


def lut_command(op: Operation, ctx: NativeContext, plan: GroupPlan, step: int) -> list[tuple]:
    out = plan.tensors[op.results[0]].slice_at(step)
    p = LutParam()
    p.input_addr = plan.tensors[op.operands[0]].addr_at(step)
    p.output_addr = plan.tensors[op.results[0]].addr_at(step)
    p.table_addr = plan.tensors[(op, 0)].addrs[0]
    _, c, _, w = nchw(op.results[0])
    for i, d in enumerate((out.n_slice, c, out.h_slice, w)):
        p.shape[i] = d
    p.shape_dim = 4
    p.table_length = TABLE
    p.input_dtype = dtype_code(op.operands[0])
    p.table_dtype = dtype_code(op.operands[1])
    p.output_dtype = dtype_code(op.results[0])
    p.is_local_layer = 1
    name = getattr(op, "names", ["op"])[0]
    return [("plain_local", name, "backend_api_lut", p.to_bytes())]


local_rule(tpu.LutOp, rule=LocalRule(identity, lut_coeffs, no_buffer, lut_command))
