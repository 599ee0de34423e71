"""The chip's MulShift, after TPU-MLIR's `Interfaces/BM1684X/MulShift.cpp`:
`backend_api_mulshift_global/local(mulshift_param_t*, sizeof)`, one AR
multiply by an 8-bit scale and a rounding right shift, saturated to the
output's 8-bit type. TPU-MLIR's do_transfer rescales INT8 inputs (a
Concat's) this way; tpuc's symmetric bm168x Concat carries the same
numbers (a u8 multiplier and its rshift, rounded half up: the lowering's
per-term form), and the requant_int path it replaces costs about four
times the TIU cycles (RQDQ with a 32-bit multiplier).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from tpuc.passes.native.context import NativeCall, dtype_code, dtype_name, quant_of
from tpuc.target.vendor.params import declare

MulShiftParam = declare(
    "mulshift_param_t",
    "u64 input_addr; u64 output_addr; u32 buffer_addr; i32 input_n; i32 input_c; i32 input_h; "
    "i32 input_w; i32 scale_val; i32 rshift_num; i32 input_dtype; i32 scale_dtype; "
    "i32 output_dtype; i32 round_mode",
)
ROUND_UP = 1  # ROUND_MODE_T ROUND_UP: half up, what MulShift.cpp passes
DTYPE_UINT8 = 3
MAX_RSHIFT = 31


def fits(value: SSAValue, out: SSAValue, pair: tuple[int, int], round_mode: str) -> bool:
    """Whether requant(q, M, r) from `value` into `out` is the chip's
    MulShift: 8-bit types without zero points, a u8 multiplier, a right
    shift, half-up rounding."""
    m, r = pair
    if round_mode != "HalfUp" or not (0 <= m <= 255 and 0 <= r <= MAX_RSHIFT):
        return False
    quants = (quant_of(value), quant_of(out))
    if any(q is None or q.zero_point for q in quants):
        return False
    return {dtype_name(value), dtype_name(out)} <= {"i8", "u8"}


def buffer_bytes(value: SSAValue, out: SSAValue, in_bytes: int) -> int:
    """getBufferSize_bm1684x: a signed input into a u8 result needs twice
    the input's local bytes."""
    return 2 * in_bytes if dtype_name(value) != "u8" and dtype_name(out) == "u8" else 0


def param(value: SSAValue, out: SSAValue, addrs: tuple[int, int], dims, pair) -> MulShiftParam:
    """mulshift_param_t from addrs[0] (value) into addrs[1] over NCHW `dims`."""
    p = MulShiftParam()
    p.input_addr, p.output_addr = addrs
    p.input_n, p.input_c, p.input_h, p.input_w = dims
    p.scale_val, p.rshift_num = (int(x) for x in pair)
    p.input_dtype, p.output_dtype = dtype_code(value), dtype_code(out)
    p.scale_dtype, p.round_mode = DTYPE_UINT8, ROUND_UP
    return p


def global_call(value: SSAValue, out: SSAValue, addrs: tuple[int, int], dims, pair) -> NativeCall:
    p = param(value, out, addrs, dims, pair)
    return NativeCall("backend_api_mulshift_global", p.to_bytes(), plain=True)
