"""Reduce and Arg, after TPU-MLIR's `Interfaces/BM1684X/{Reduce,Arg}.cpp`.

tpu.Reduce goes through `backend_api_reduce_full_global`
(`reduce_full_global_param_t`) over TPU-MLIR's canonical view of the input
(`parseParam`: (outer_n, outer_c, axis_dims, inner) reduced on axis 2), one
call per run of neighbouring axes, the innermost first, intermediate results
in scratch. The kernel's working buffer (TPU-MLIR asks the library for its
size first, which would have to run in the worker) is a scratch block twice
the input's element count at 4 bytes. tpu.Arg goes through
`backend_api_arg_global` (`arg_global_spec_t`, float indices).

Measured on the vendor's chip model:
- INT8 Mean/Sum (tpuc: requant(Σ (q − Z_in))): the library sums int8 into
  int32 exactly but refuses int32 inputs, so further runs of axes sum in f32
  between casts (exact below 2^24); − count·Z_in is a bcbinary ADD of an
  int32 coefficient (requant_int's zx is wrong past 16 bits), then
  requant_int. Bit-exact.
- Prod over the innermost axis (inner = 1) is wrong unless the axis length
  is a power of 2 (some rows come out wrong): such a run is transposed first
  so that the product runs over an outer axis.
- F16/BF16 Mean/Sum/L2/Prod over several runs run in f32 between casts
  (one rounding, as tpuc computes them).
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.ir import Operation

from tpuc.dialects import tpu
from tpuc.dialects.base import shape_of
from tpuc.passes.address_assign import align_up
from tpuc.passes.native.cast import CastGlobal, nchw, round_mode
from tpuc.passes.native.context import (
    DTYPE_F32,
    DTYPE_I32,
    ROUND_HALF_EVEN,
    NativeCall,
    NativeContext,
    NotExpressible,
    dtype_code,
    dtype_name,
    is_float,
    quant_of,
)
from tpuc.passes.native.conv import raw_spec
from tpuc.passes.native.data import Transpose
from tpuc.passes.native.requant import RequantInt
from tpuc.passes.native.rules import native_rule
from tpuc.target.vendor.params import BcBinaryGlobal, declare

declare(
    "reduce_full_common_spec_t",
    "i32 axis[8]; i32 axis_num; i32 method; f32 input_scale; f32 output_scale; i32 keep_dims",
)
declare("reduce_full_global_spec_t", "reduce_full_common_spec_t common; u64 buffer_addr")
ReduceFullGlobal = declare(
    "reduce_full_global_param_t",
    "reduce_full_global_spec_t spec; i32 if_getting_buffer_size; u64 buffer_size_ptr",
)
declare(
    "arg_common_spec_t",
    "i32 axis; i32 method; i32 is_index_int32; i32 select_last_index; i32 need_val",
)
ArgGlobal = declare("arg_global_spec_t", "arg_common_spec_t common")

METHODS = {  # sg_reduce_method_t (Param.h)
    "ReduceMean": 0,
    "ReduceSum": 1,
    "ReduceMax": 2,
    "ReduceMin": 3,
    "ReduceProd": 4,
    "ReduceL2": 5,
    "ReduceL1": 6,
}
BINARY_ADD = 0
SCRATCH_ALIGN = 64


def _size_to_2dim(size: int) -> tuple[int, int]:
    """TPU-MLIR's size_to_2dim: the largest divisor h of size in [2, √size], else 1."""
    for h in range(math.isqrt(size), 1, -1):
        if size % h == 0:
            return h, size // h
    return 1, size


def reduce_axes(op: Operation) -> list[int]:
    """The reduced axes, non-negative and ascending (empty: every axis)."""
    rank = len(shape_of(op.operands[0]))
    axes = [int(a) for a in op.value("axes") or []] or list(range(rank))
    return sorted({a + rank if a < 0 else a for a in axes})


def runs(axes: list[int]) -> list[tuple[int, int]]:
    """Runs [start, end) of neighbouring axes."""
    out: list[tuple[int, int]] = []
    for a in axes:
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], a + 1)
        else:
            out.append((a, a + 1))
    return out


def reduce_call(method: int, shape: list[int], run: tuple[int, int], src: tuple[int, int],
                dst: tuple[int, int], buffer: int) -> NativeCall:  # fmt: skip
    """One reduce_full call over `shape`'s axes `run`: `src`/`dst` are
    (address, dtype code), `buffer` the kernel's working buffer."""
    start, end = run
    outer_n, outer_c = _size_to_2dim(math.prod(shape[:start]))
    axis, inner = math.prod(shape[start:end]), math.prod(shape[end:])
    param = ReduceFullGlobal()
    common = param.spec.common
    common.axis_num, common.axis[0] = 1, 2
    common.method = method
    common.input_scale = common.output_scale = 1.0
    common.keep_dims = 1
    param.spec.buffer_addr = buffer
    inputs = [raw_spec(src[0], src[1], (outer_n, outer_c, axis, inner))]
    outputs = [raw_spec(dst[0], dst[1], (outer_n, outer_c, 1, inner))]
    return NativeCall("backend_api_reduce_full_global", param.to_bytes(), inputs, outputs)


class Scratch:
    """Seven blocks of scratch buffer 0, each the input's element count at 4
    bytes (the widest type here): 0-1 a chain's intermediate results, 2-3
    the kernel's working buffer (twice the input at 4 bytes: a bound on
    what TPU-MLIR would ask the library for), 4-5 staging in f32/int32, 6
    a transposed input."""

    def __init__(self, ctx: NativeContext, shape: list[int]):
        self.block = align_up(4 * math.prod(shape), SCRATCH_ALIGN)
        self.base = ctx.scratch(7 * self.block)

    def __getitem__(self, index: int) -> int:
        return self.base + index * self.block


def reduce_chain(scratch: Scratch, method: int, shape: list[int], axes: list[int],
                 src: tuple[int, int], dst: tuple[int, int]) -> list[NativeCall]:  # fmt: skip
    """One call per run of `axes`, the innermost first; intermediate
    results (in the result's type) alternate between scratch blocks 0 and 1."""
    shape = list(shape)
    calls = []
    pending = runs(axes)[::-1]
    for i, run in enumerate(pending):
        out = dst if i == len(pending) - 1 else (scratch[i % 2], dst[1])
        outer, axis = math.prod(shape[: run[0]]), math.prod(shape[run[0] : run[1]])
        if (
            method == METHODS["ReduceProd"]
            and run[1] == len(shape)
            and outer > 1
            and (axis & (axis - 1))
        ):  # the kernel's innermost product is wrong unless its length is a power of 2
            calls.append(transpose_call((outer, axis), src, (scratch[6], src[1])))
            view = [1, axis, outer]
            calls.append(reduce_call(method, view, (1, 2), (scratch[6], src[1]), out, scratch[2]))
        else:
            calls.append(reduce_call(method, shape, run, src, out, scratch[2]))
        shape = shape[: run[0]] + [1] * (run[1] - run[0]) + shape[run[1] :]
        src = out
    return calls


def transpose_call(shape: tuple[int, int], src: tuple[int, int], dst: tuple[int, int]
                   ) -> NativeCall:  # fmt: skip
    """transpose_param_t: the (rows, columns) matrix `shape` transposed."""
    param = Transpose()
    for i, o in enumerate((0, 1, 3, 2)):
        param.spec.order[i] = o
    param.num_core = 1
    rows, cols = shape
    ins = [raw_spec(src[0], src[1], (1, 1, rows, cols))]
    outs = [raw_spec(dst[0], dst[1], (1, 1, cols, rows))]
    return NativeCall("backend_api_transpose_global", param.to_bytes(), ins, outs)


def cast_call(src: tuple[int, int], dst: tuple[int, int], count: int) -> NativeCall:
    """cast_global_spec_t over `count` elements (round half to even)."""
    spec = CastGlobal()
    spec.common.src_dtype, spec.common.dst_dtype = src[1], dst[1]
    spec.common.round_mode = ROUND_HALF_EVEN
    dims = (1, *_size_to_2dim(count), 1)
    return NativeCall("backend_api_cast_global", spec.to_bytes(), [raw_spec(src[0], src[1], dims)],
                      [raw_spec(dst[0], dst[1], dims)])  # fmt: skip


@native_rule(tpu.ReduceOp)
def reduce(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """Float: reduce_full in the op's type (F16/BF16 Mean/Sum/L2/Prod over
    axes in several runs: in f32 between casts, rounded once as tpuc does);
    INT8 Max/Min on the stored values; INT8 Mean/Sum: int8_sum."""
    mode = op.value("mode")
    if mode not in METHODS:
        raise NotExpressible(f"mode {mode} (reduce_full has no such method)")
    if op.value("do_relu"):
        raise NotExpressible("a reduction with a fused relu")
    src, dst = op.operands[0], op.results[0]
    shape = list(shape_of(src))
    axes = reduce_axes(op)
    scratch = Scratch(ctx, shape)
    io = ((ctx.address(src), dtype_code(src)), (ctx.address(dst), dtype_code(dst)))
    if is_float(src) and is_float(dst):
        if dtype_name(src) != dtype_name(dst):
            raise NotExpressible("a reduction between float types")
        selects = mode in ("ReduceMax", "ReduceMin")
        if len(runs(axes)) == 1 or selects or dtype_name(src) == "f32":
            return reduce_chain(scratch, METHODS[mode], shape, axes, *io)
        count, out_count = math.prod(shape), math.prod(shape_of(dst))
        wide, narrow = (scratch[4], DTYPE_F32), (scratch[5], DTYPE_F32)
        return [
            cast_call(io[0], wide, count),
            *reduce_chain(scratch, METHODS[mode], shape, axes, wide, narrow),
            cast_call(narrow, io[1], out_count),
        ]
    if mode in ("ReduceMax", "ReduceMin"):
        if dtype_name(src) != dtype_name(dst):
            raise NotExpressible("an integer ReduceMax/Min between storage types")
        return reduce_chain(scratch, METHODS[mode], shape, axes, *io)
    return int8_sum(op, ctx, scratch, shape, axes)


def int8_sum(op: Operation, ctx: NativeContext, scratch: Scratch, shape: list[int],
             axes: list[int]) -> list[NativeCall]:  # fmt: skip
    """tpuc's requant(Σ (q − Z_in), M, r) + Z_out: reduce_full SUM of the
    stored values into int32 (exact; the library reduces int8 into int32
    but not int32 itself, so further runs of axes sum in f32 between casts,
    exact below 2^24), − count·Z_in by a bcbinary ADD of an int32
    coefficient, then requant_int_param_t int32 -> the output."""
    src, dst = op.operands[0], op.results[0]
    qin, qout = quant_of(src), quant_of(dst)
    if qin is None or qout is None:
        raise NotExpressible("a reduction between integer and float types")
    if (op.value("quant_mode") or "MultiplierShift") != "MultiplierShift":
        raise NotExpressible(f"quant_mode {op.value('quant_mode')}")
    multiplier = [int(m) for m in op.value("multiplier") or [1]]
    rshift = [int(r) for r in op.value("rshift") or [0]]
    count = math.prod(shape[a] for a in axes)
    pending = runs(axes)[::-1]
    first, rest = pending[0], [a for start, end in pending[1:] for a in range(start, end)]
    acc = (scratch[4], DTYPE_I32)
    step = acc if not rest else (scratch[5], DTYPE_I32)
    calls = [reduce_call(METHODS["ReduceSum"], shape, first, (ctx.address(src), dtype_code(src)),
                         step, scratch[2])]  # fmt: skip
    if rest:
        if count * 256 >= 1 << 24:
            raise NotExpressible(f"an INT8 sum of {count} values over separate axes")
        shape = shape[: first[0]] + [1] * (first[1] - first[0]) + shape[first[1] :]
        wide, total = (scratch[4], DTYPE_F32), (scratch[5], DTYPE_F32)
        calls.append(cast_call(step, wide, math.prod(shape)))
        calls += reduce_chain(scratch, METHODS["ReduceSum"], shape, rest, wide, total)
        calls.append(cast_call(total, acc, math.prod(shape_of(dst))))
    offset = count * qin.zero_point
    if offset:  # − count·Z_in as an int32 coefficient (exact; requant's zx is not, past 16 bits)
        coeff = ctx.coeffs.add(f"{op.names[0]}_zero_point", np.array([-offset], np.int32))
        calls.append(add_int32(acc[0], coeff, nchw(dst)))
    calls.append(
        RequantInt(
            (acc[0], ctx.address(dst)),
            nchw(dst),
            (DTYPE_I32, dtype_code(dst)),
            multiplier,
            rshift,
            (0, qout.zero_point),
            round_mode(op),
        ).call()
    )
    return calls


def add_int32(acc: int, coeff: int, dims: tuple[int, ...]) -> NativeCall:
    """acc += coeff[0] over the int32 tensor `dims`: bcbinary ADD, scales 1."""
    param = BcBinaryGlobal()
    spec = param.spec
    spec.binary_type = BINARY_ADD
    spec.scale_A = spec.scale_B = 1
    spec.f8_scale_A = spec.f8_scale_B = 1.0
    spec.relu_upper_limit = -1.0
    tensor = raw_spec(acc, DTYPE_I32, dims)
    const = raw_spec(coeff, DTYPE_I32, (1,) * len(dims))
    return NativeCall("backend_api_bcbinary_global", param.to_bytes(), [tensor, const], [tensor])


@native_rule(tpu.ArgOp)
def arg(op: Operation, ctx: NativeContext) -> list[NativeCall]:
    """arg_global_spec_t; float indices (is_index_int32 = 0)."""
    mode = op.value("mode")
    if mode not in ("ArgMax", "ArgMin"):
        raise NotExpressible(f"mode {mode}")
    rank = len(shape_of(op.operands[0]))
    axis = int(op.value("axis") or 0)
    spec = ArgGlobal()
    spec.common.axis = axis + rank if axis < 0 else axis
    spec.common.method = 0 if mode == "ArgMax" else 1
    spec.common.is_index_int32 = int(not is_float(op.results[0]))
    spec.common.select_last_index = int(bool(op.value("select_last_index")))
    spec.common.need_val = 0
    src = op.operands[0]
    out_shape = list(shape_of(src))
    out_shape[spec.common.axis] = 1
    inputs = [ctx.spec(src)]
    outputs = [ctx.spec(op.results[0], tuple(out_shape))]
    return [ctx.call("backend_api_arg_global", spec, op, inputs, outputs)]


__all__ = ["arg", "reduce"]
