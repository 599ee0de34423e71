"""Binary elementwise ops, after TPU-MLIR's `Interfaces/BM1684X/{Add,Sub,Mul,
Max,Min,AddConst,SubConst,MulConst}.cpp`: tensor-tensor ops through
`backend_api_bcbinary_global` (`bcbinary_global_param_t`, the backend
broadcasts), tensor-constant ops through `backend_api_constbinary_global`
(`constbinary_global_spec_t`).

INT8 (measured on the vendor's chip model): MUL computes
(A·B·scale_A + 2^(rshift_A−1)) >> rshift_A with a u8 scale_A, whatever the
round mode, which bm168x's lowering chooses (HalfUp); ADD/SUB compute
((A·scale_A + 2^(rshift_A−1)) >> rshift_A) ± ((B·scale_B + 2^(rshift_B−1))
>> rshift_B), u8 scales, each term rounded on its own, where tpuc's Add
contract rounds Σ once: the two agree only without a shift, so an INT8
Add/Sub with rshift > 0 is refused until tpuc's contract changes.
"""

from __future__ import annotations

from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.native.context import (
    NativeCall,
    NativeContext,
    NotExpressible,
    is_float,
    quant_of,
)
from tpuc.passes.native.rules import native_rule
from tpuc.vendor.params import BcBinaryGlobal, ConstBinaryGlobal

BINARY_ADD, BINARY_SUB, BINARY_MUL, BINARY_MAX, BINARY_MIN = 0, 1, 2, 4, 10000
DTYPE_FP32, DTYPE_INT8, DTYPE_INT32, DTYPE_UINT32 = 0, 2, 6, 7


def relu_fields(op: Operation) -> tuple[int, float]:
    """(if_relu, relu_upper_limit) from do_relu / relu_limit (-1: no limit)."""
    limit = op.value("relu_limit")
    return int(bool(op.value("do_relu"))), -1.0 if limit is None else float(limit)


def operand_specs(op: Operation, ctx: NativeContext) -> list[bytes]:
    """Both operands at the output's rank (leading 1s), as TPU-MLIR's shape
    inference leaves them; the backend broadcasts the unit dims."""
    if len(op.operands) != 2:
        raise NotExpressible(f"{len(op.operands)} inputs (the chip's binary ops take two)")
    rank = len(shape_of(op.results[0]))
    specs = []
    for value in op.operands:
        shape = tuple(shape_of(value))
        if len(shape) > rank:
            raise NotExpressible(f"an input of rank {len(shape)} above the output's {rank}")
        specs.append(ctx.spec(value, (1,) * (rank - len(shape)) + shape))
    return specs


def bcbinary(op: Operation, ctx: NativeContext, binary_type: int) -> BcBinaryGlobal:
    param = BcBinaryGlobal()
    spec = param.spec
    spec.binary_type = binary_type
    spec.if_relu, spec.relu_upper_limit = relu_fields(op)
    spec.scale_A = spec.scale_B = 1
    spec.f8_scale_A = spec.f8_scale_B = 1.0
    return param


def all_float(op: Operation) -> bool:
    return all(is_float(v) for v in (*op.operands, *op.results))


def int8_add(op: Operation, param: BcBinaryGlobal) -> None:
    """scale_A/B = multipliers, rshift_A = rshift_B = the shared rshift, the
    zero points in izp_A/B and ozp (TPU-MLIR's Add.cpp fields)."""
    multipliers = [int(m) for m in op.value("multiplier") or [1, 1]]
    rshift = [int(r) for r in op.value("rshift") or [0]]
    if len(multipliers) != 2 or len(rshift) != 1:
        raise NotExpressible(f"multipliers {multipliers}, rshifts {rshift}")
    if rshift[0] != 0 or not all(0 <= m <= 255 for m in multipliers):
        raise NotExpressible(
            f"INT8 Add/Sub with multipliers {multipliers} >> {rshift[0]}: the chip rounds "
            "each input's (q·M >> r) on its own (u8 M), tpuc's contract rounds the sum once"
        )
    spec = param.spec
    spec.scale_A, spec.scale_B = multipliers
    a, b, out = (quant_of(v) for v in (*op.operands, op.results[0]))
    spec.izp_A = a.zero_point if a is not None else 0
    spec.izp_B = b.zero_point if b is not None else 0
    spec.ozp = out.zero_point if out is not None else 0


@native_rule(tpu.AddOp, tpu.SubOp)
def add_sub(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """bcbinary ADD/SUB; float coeff other than 1 has no field."""
    kind = BINARY_ADD if isinstance(op, tpu.AddOp) else BINARY_SUB
    param = bcbinary(op, ctx, kind)
    inputs = operand_specs(op, ctx)
    if all_float(op):
        coeff = op.value("coeff") if isinstance(op, tpu.AddOp) else None
        if coeff and any(float(c) != 1.0 for c in coeff):
            raise NotExpressible(f"coeff {list(coeff)} (bcbinary has no float coefficients)")
    elif quant_of(op.results[0]) is not None:
        int8_add(op, param)
    else:
        raise NotExpressible("mixed float and integer operands")
    return [ctx.call("backend_api_bcbinary_global", param, op, inputs=inputs)]


@native_rule(tpu.MulOp)
def mul(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """bcbinary MUL: scale_A = multiplier, rshift_A = rshift (Mul.cpp)."""
    param = bcbinary(op, ctx, BINARY_MUL)
    inputs = operand_specs(op, ctx)
    if not all_float(op):
        if quant_of(op.results[0]) is None:
            raise NotExpressible("mixed float and integer operands")
        if any(q.zero_point for q in map(quant_of, (*op.operands, op.results[0])) if q):
            raise NotExpressible("asymmetric INT8 Mul (Mul.cpp sets no zero points)")
        multiplier = [int(m) for m in op.value("multiplier") or [1]]
        rshift = [int(r) for r in op.value("rshift") or [0]]
        if len(multiplier) != 1 or not 0 <= multiplier[0] <= 255 or not 0 <= rshift[0] < 32:
            raise NotExpressible(f"multiplier {multiplier} >> {rshift} (the chip takes u8 >> n)")
        if rshift[0] and op.value("round_mode") != "HalfUp":
            raise NotExpressible(f"round mode {op.value('round_mode')} (the chip rounds half up)")
        param.spec.scale_A, param.spec.rshift_A = multiplier[0], rshift[0]
    return [ctx.call("backend_api_bcbinary_global", param, op, inputs=inputs)]


@native_rule(tpu.MaxOp, tpu.MinOp)
def max_min(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """bcbinary MAX/MIN; INT8 only when every operand shares the output's type."""
    kind = BINARY_MAX if isinstance(op, tpu.MaxOp) else BINARY_MIN
    if not all_float(op):
        types = {v.type.element_type for v in (*op.operands, *op.results)}
        if len(types) != 1:
            raise NotExpressible("INT8 Max/Min over operands of different scales")
    param = bcbinary(op, ctx, kind)
    return [ctx.call("backend_api_bcbinary_global", param, op, inputs=operand_specs(op, ctx))]


CONST_KINDS = {tpu.AddConstOp: BINARY_ADD, tpu.SubConstOp: BINARY_SUB, tpu.MulConstOp: BINARY_MUL}


@native_rule(tpu.AddConstOp, tpu.SubConstOp, tpu.MulConstOp)
def const_binary(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """constbinary: B_const_val = const_val (FP32), inversed = is_reverse
    (SubConst: const − x), scale_A = 1 (AddConst.cpp / MulConst.cpp float form)."""
    if not all_float(op):
        raise NotExpressible("integer constant arithmetic (INT8 lowers it to tpu.Lut)")
    param = ConstBinaryGlobal()
    c = param.common
    c.binary_type = CONST_KINDS[type(op)]
    c.B_const_val = float(op.value("const_val"))
    c.B_dtype = DTYPE_FP32
    c.inversed = int(bool(op.value("is_reverse"))) if isinstance(op, tpu.SubConstOp) else 0
    c.if_relu, c.relu_upper_limit = relu_fields(op)
    c.scale_A = 1
    c.f8_scale_A = 1.0
    return [ctx.call("backend_api_constbinary_global", param, op)]
