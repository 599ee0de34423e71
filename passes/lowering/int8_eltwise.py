"""INT8 rules of the elementwise arithmetic ops that rescale their inputs:
Add/Sub (one multiplier per input on a shared rshift, or on bm168x one
multiplier and rshift per input, each term rounded by the chip), Mul (one multiplier
for the product) and Concat (one requant per input).

Parameters follow the integer contract in dialects/tpu/ops.py; widths come
from the chip (`eltwise_multiplier_bits` for Add/Sub, `multiplier_bits` for
Mul and Concat; bm168x's symmetric Add/Sub/Concat take the chip's u8 per-term
form), so cv18xx's 8-bit multipliers need no rule of their own.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue

from tpuc.base.errors import TpucError
from tpuc.base.numerics import multiplier_rshift, shared_rshift_multipliers
from tpuc.dialects import top, tpu
from tpuc.ir.core import element_of
from tpuc.ir.qparams import QuantParams
from tpuc.passes.canonicalize.common import is_pre_quantized
from tpuc.passes.lowering.context import Lowering
from tpuc.passes.lowering.registry import lowering
from tpuc.target.isa.engine import MAX_INPUTS

INT32_LIMIT = 2**31
CENTERED_MAX = 255  # |q − Z| of an 8-bit value whose Z lies in the storage range


def read_int8(lw: Lowering, index: int) -> tuple[SSAValue, QuantParams]:
    """Operand `index` as the op reads it in INT8, with its parameters taken
    from the value's own type (weights become per-tensor int8 here, so they
    have no calibrated range to look up)."""
    value = lw.operand(index)
    return value, QuantParams.of(element_of(value))


def requant_attrs(lw: Lowering, multipliers: list[int], rshifts: list[int]) -> dict:
    return {"multiplier": multipliers, "rshift": rshifts, "round_mode": lw.chip.round_mode}


# --- Add / Sub ----------------------------------------------------------------------------


def check_add_bound(lw: Lowering, multipliers: list[int]) -> None:
    """acc = Σ ±(q_i − Z_i)·M_i with |q_i − Z_i| <= 255 and |M_i| < 2^(b−1):
    |acc| <= 255·Σ|M_i| < n·2^(b+7), which stays below 2^31 for up to 256
    inputs at b = 16 (bm168x) and 2^16 inputs at b = 8 (cv18xx)."""
    bound = CENTERED_MAX * sum(abs(m) for m in multipliers)
    if bound >= INT32_LIMIT:
        raise TpucError(
            f"{lw.op.name} '{lw.op.names[0]}': {len(multipliers)} inputs overflow the "
            "int32 accumulator of the INT8 form; run it in float (qtable)"
        )


def add_multipliers(lw: Lowering, scales: list[float]) -> tuple[list[int], int]:
    """The shared-rshift form. bm168x (asymmetric Add/Sub): 8-bit multipliers
    (the largest in [128, 256), the others rounded on its rshift, |M| <= 255),
    which the chip's bcbinary ADD/SUB takes as its u8 scales (the native
    target sums into int32 with them and requantizes once); else the chip's
    eltwise width; in a pre-quantized module (a TFLite model's own scales)
    the widest multipliers TIU_ARITH's i32 fields and int32 accumulator
    take for these inputs, so that the sum rounds as TFLite's ADD
    (2^20-scaled inputs, 31-bit multipliers) does: 16-bit multipliers put
    ~0.02% of the elements 1 LSB off, and each grows through the layers
    after it."""
    if u8_multiplier_form(lw):
        return shared_rshift_multipliers(scales, U8_MULTIPLIER_BITS)
    bits = lw.chip.eltwise_multiplier_bits
    found = shared_rshift_multipliers(scales, bits)
    if not is_pre_quantized(lw.op):
        return found
    for wide in range(31, bits, -1):
        multipliers, rshift = shared_rshift_multipliers(scales, wide)
        if CENTERED_MAX * sum(abs(m) for m in multipliers) < INT32_LIMIT:
            return multipliers, rshift
    return found


def term_rshift_form(lw: Lowering, inputs: list, out: QuantParams) -> bool:
    """Whether the Add/Sub takes the chip's per-term form (`eltwise_term_rshift`:
    bm168x's bcbinary ADD/SUB rounds each input's u8-scaled term by its own
    rshift). Zero points keep the shared-rshift form: the chip saturates
    q − Z to 8 bits, so its native code sums exactly in int32 scratch and
    requantizes once; a pre-quantized module keeps TFLite's arithmetic."""
    symmetric = not out.zero_point and not any(q.zero_point for _, q in inputs)
    return lw.chip.eltwise_term_rshift and symmetric and not is_pre_quantized(lw.op)


TERM_ZERO_RSHIFT = 18
"""From this rshift on, every 8-bit term |q·M| < 2^16 rounds to 0."""


def term_multiplier(scale: float) -> tuple[int, int]:
    """A scale as the chip's u8 multiplier (in [128, 256) where the rshift
    allows) and its own rshift >= 0; a scale of 256 or more saturates any
    non-zero input anyway: 255, 0; one so small that every term rounds to 0
    (rshift >= 18) is 0, 0, the same values in a shift the chip takes."""
    multiplier, rshift = multiplier_rshift(abs(scale), U8_MULTIPLIER_BITS)
    if rshift < 0:
        multiplier, rshift = 255, 0
    if rshift >= TERM_ZERO_RSHIFT:
        multiplier, rshift = 0, 0
    return (-multiplier if scale < 0 else multiplier), rshift


def lower_add_sub(lw: Lowering):
    """q_out = requant(Σ ±(q_i − Z_i)·M_i, rshift) with M_i/2^rshift ≈
    coeff_i·S_i/S_out (Sub: lhs − rhs, the kernel applies the sign); on a
    chip that rounds each term (term_rshift_form), Σ ±round((q_i·M_i) >> r_i)
    with M_i/2^r_i ≈ coeff_i·S_i/S_out, rounded half up as the chip does."""
    inputs = [read_int8(lw, i) for i in range(len(lw.op.operands))]
    out = lw.out_quant()
    coeff = lw.op.value("coeff") if isinstance(lw.op, top.AddOp) else None
    coeff = [float(c) for c in coeff] if coeff else [1.0] * len(inputs)
    if len(coeff) != len(inputs):
        raise TpucError(
            f"{lw.op.name} '{lw.op.names[0]}': {len(coeff)} coeff for {len(inputs)} inputs"
        )
    scales = [c * q.scale / out.scale for c, (_, q) in zip(coeff, inputs, strict=True)]
    if term_rshift_form(lw, inputs, out):
        pairs = [term_multiplier(s) for s in scales]
        attrs = {
            "multiplier": [m for m, _ in pairs],
            "rshift": [r for _, r in pairs],
            "round_mode": "HalfUp",
        }
    else:
        multipliers, rshift = add_multipliers(lw, scales)
        check_add_bound(lw, multipliers)
        attrs = requant_attrs(lw, multipliers, [rshift])
    cls = tpu.AddOp if isinstance(lw.op, top.AddOp) else tpu.SubOp
    if cls is tpu.AddOp:
        attrs["coeff"] = None  # folded into the multipliers
    return lw.build(cls, [v for v, _ in inputs], attrs)


# --- Mul ------------------------------------------------------------------------------------


MAX_ADD_INPUTS = MAX_INPUTS
"""Add/Sub inputs one INT8 command takes (TIU_ARITH's per-input multiplier
slots): a wider Sum keeps the float fallback, whose TIU_FARITH takes any
count (there is no int32 scratch tensor to split the sum over several
commands)."""


def arith_inputs(op: top.AddOp) -> bool:
    return len(op.operands) <= MAX_ADD_INPUTS and within_int8_span(op)


MAX_SPAN = 1024.0
"""The widest ratio of ranges one INT8 Add/Sub carries: beyond it (INT8's 7
bits and 3 more) either the small operands round to zero on the output's
scale, or the large one saturates at the output's rails."""


def operand_ranges(op: Operation) -> tuple[list[float], list[float]]:
    """max |x| of the activations (operands and results, calibrated ranges)
    and of the weight operands (their values; inf when one is not finite)."""
    from tpuc.dialects.quant import CalibratedQuantizedType
    from tpuc.ir.weights import read_weight

    activations, weights = [], []
    for value in [*op.operands, *op.results]:
        element = element_of(value)
        if isinstance(value.owner, top.WeightOp):
            data = np.asarray(read_weight(value.owner), np.float64)
            finite = bool(np.isfinite(data).all())
            weights.append(float(np.abs(data).max(initial=0.0)) if finite else np.inf)
        elif isinstance(element, CalibratedQuantizedType):
            activations.append(max(abs(element.min), abs(element.max)))
    return activations, weights


def within_int8_span(op: Operation) -> bool:
    """Whether one INT8 scale per operand can hold this Add/Sub. An attention
    mask (±1e38, ±inf, -10000) added to scores of magnitude ~10 cannot: the
    scores round to 0 on the mask's scale, or the mask saturates to a few
    units on theirs and no longer masks (a -inf mask calibrates to ±1e-5, its
    finite values being 0). Such an op keeps the float fallback, where it is
    exact. A small constant next to large activations is harmless (it only
    rounds away), so weights count on the large side only."""
    activations, weights = operand_ranges(op)
    activations = [r for r in activations if r > 0]
    if not activations:
        return True
    low, high = min(activations), max([*activations, *weights])
    return bool(np.isfinite(high)) and high < MAX_SPAN * low


def two_inputs(op: top.MulOp) -> bool:
    """Products of more than two 9-bit values leave int32 at four inputs
    and lose precision before that: only a x b runs in INT8."""
    return len(op.operands) == 2


U8_MULTIPLIER_BITS = 9  # multiplier_rshift's signed width 9: M in [128, 256)


def u8_multiplier_form(lw: Lowering) -> bool:
    """bm168x's own INT8 Mul and average pooling (TPU-MLIR's bcbinary MUL
    and pooling backends) take an unsigned 8-bit multiplier and round the
    shift half up, whatever round mode they are given (measured on the
    vendor's chip model); a pre-quantized model keeps TFLite's arithmetic."""
    return lw.chip.family == "bm168x" and not is_pre_quantized(lw.op)


def u8_requant_attrs(lw: Lowering, scale: float) -> dict:
    multiplier, rshift = multiplier_rshift(scale, U8_MULTIPLIER_BITS)
    return {"multiplier": [multiplier], "rshift": [rshift], "round_mode": "HalfUp"}


def lower_mul(lw: Lowering):
    """q_out = requant((q_a − Z_a)(q_b − Z_b), M, r), M/2^r ≈ S_a·S_b/S_out;
    |acc| <= 255² < 2^16."""
    (a, qa), (b, qb) = read_int8(lw, 0), read_int8(lw, 1)
    out = lw.out_quant()
    scales = [qa.scale, qb.scale, out.scale]
    if u8_multiplier_form(lw):
        attrs = u8_requant_attrs(lw, scales[0] * scales[1] / scales[2])
        return lw.build(tpu.MulOp, [a, b], attrs)
    pre_quantized = is_pre_quantized(lw.op) and lw.chip.multiplier_bits == 32
    if pre_quantized:  # TFLite's MUL: the model's float32 scales, its double rounding
        scales = [float(np.float32(s)) for s in scales]
    multiplier, rshift = multiplier_rshift(
        scales[0] * scales[1] / scales[2], lw.chip.multiplier_bits
    )
    attrs = requant_attrs(lw, [multiplier], [rshift])
    if pre_quantized:
        attrs["round_mode"] = "DoubleRound"
    return lw.build(tpu.MulOp, [a, b], attrs)


# --- Concat ---------------------------------------------------------------------------------


def concat_requant(
    lw: Lowering, quant: QuantParams, out: QuantParams, term: bool
) -> tuple[int, int]:
    """(multiplier, rshift) taking input values onto the output's scale; the
    identity (1, 0) when both types are the same (a plain copy). `term`
    (bm168x, symmetric): the chip's MulShift form, a u8 multiplier and its
    own rshift, as TPU-MLIR's do_transfer (8-bit multipliers) lowers it."""
    if quant.scale == out.scale and quant.zero_point == out.zero_point:
        return 1, 0
    if term:
        return term_multiplier(quant.scale / out.scale)
    return multiplier_rshift(quant.scale / out.scale, lw.chip.multiplier_bits)


@lowering(top.ConcatOp, modes=("INT8",))
def lower_concat(lw: Lowering):
    """Input i is requant(q_i − Z_i, M_i, r_i) + Z_out, M_i/2^r_i ≈ S_i/S_out;
    on a chip with the per-term form (term_rshift_form) M_i is a u8
    multiplier rounded half up, what the chip's MulShift computes (one AR
    multiply-shift, where a 32-bit multiplier takes the chip's requant
    path at four times the cycles)."""
    inputs = [read_int8(lw, i) for i in range(len(lw.op.operands))]
    out = lw.out_quant()
    term = term_rshift_form(lw, inputs, out)
    pairs = [concat_requant(lw, q, out, term) for _, q in inputs]
    attrs = requant_attrs(lw, [m for m, _ in pairs], [r for _, r in pairs])
    if term:
        attrs["round_mode"] = "HalfUp"
    return lw.build(tpu.ConcatOp, [v for v, _ in inputs], attrs)
