"""tpu.Lut (INT8 lookup table), after TPU-MLIR's `Interfaces/BM1684X/Lut.cpp`:
the old-style `backend_api_lut` (`lut_param_t`, addresses in the struct,
shape = getNCHW of the input, table_length 256). The chip indexes the table
by the raw input byte; tpuc's table is ordered from qmin_in, so a signed
input's table is rotated by 128 into a coefficient of its own. A per-channel
table ([C, 256]) becomes one call per (batch, channel) plane.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import Operation

from tpuc.base.dtypes import STORAGE
from tpuc.dialects import top, tpu
from tpuc.dialects.base import shape_of
from tpuc.ir.weights import read_weight
from tpuc.passes.native.context import (
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
)
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import declare

LutParam = declare(
    "lut_param_t",
    "u64 input_addr; u64 table_addr; u64 output_addr; u32 buffer_addr; i32 shape[8]; "
    "i32 shape_dim; i32 table_length; i32 input_dtype; i32 table_dtype; i32 output_dtype; "
    "i32 is_local_layer",
)


def chip_table(op: Operation) -> np.ndarray:
    """The table as [tables, 256] in the chip's order (raw input byte)."""
    table = op.operands[1]
    if not isinstance(table.owner, top.WeightOp):
        raise NotExpressible("a table that is not a weight")
    stored = np.asarray(read_weight(table.owner)).astype(STORAGE[dtype_name(table)])
    stored = stored.reshape(-1, 256)
    if dtype_name(op.operands[0]) == "i8":
        stored = np.roll(stored, 128, axis=1)  # byte b of q = b - 256·(b > 127) at q + 128
    elif dtype_name(op.operands[0]) != "u8":
        raise NotExpressible(f"a {dtype_name(op.operands[0])} input (the table takes 8 bits)")
    return np.ascontiguousarray(stored)


def lut_call(op, ctx, in_addr: int, out_addr: int, table_addr: int, nchw) -> NativeCall:
    param = LutParam()
    param.input_addr, param.output_addr, param.table_addr = in_addr, out_addr, table_addr
    for i, d in enumerate(nchw):
        param.shape[i] = d
    param.shape_dim = 4
    param.table_length = 256
    param.input_dtype = dtype_code(op.operands[0])
    param.table_dtype = dtype_code(op.operands[1])
    param.output_dtype = dtype_code(op.results[0])
    return NativeCall("backend_api_lut", param.to_bytes(), plain=True)


@native_rule(tpu.LutOp)
def lut(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    tables = chip_table(op)
    shape = list(shape_of(op.operands[0]) or ())
    shape += [1] * (4 - len(shape))
    n, c, h = shape[:3]
    w = math.prod(shape[3:])
    in_addr, out_addr = ctx.address(op.operands[0]), ctx.address(op.results[0])
    name = op.operands[1].owner.names[0]
    if len(tables) == 1:
        addr = ctx.coeffs.add(name, tables[0])
        return [lut_call(op, ctx, in_addr, out_addr, addr, (n, c, h, w))]
    if len(tables) != c:
        raise NotExpressible(f"{len(tables)} tables for {c} channels")
    in_size = np.dtype(STORAGE[dtype_name(op.operands[0])]).itemsize
    out_size = np.dtype(STORAGE[dtype_name(op.results[0])]).itemsize
    calls = []
    for b in range(n):
        for ch in range(c):
            offset = (b * c + ch) * h * w
            addr = ctx.coeffs.add(f"{name}_{ch}", tables[ch])
            calls.append(lut_call(op, ctx, in_addr + offset * in_size,
                                  out_addr + offset * out_size, addr, (1, 1, h, w)))  # fmt: skip
    return calls
