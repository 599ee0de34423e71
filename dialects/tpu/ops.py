"""The TPU dialect: chip-specific ops after lowering.

Precision lives in the tensor types: `f32`, `f16`, `bf16`, or
`!quant.uniform<i8|u8:f32, S:Z>` (real = S·(q − Z)). Most ops mirror a TOP op
(same operands and attributes, see `mirror`); in a float type they compute
exactly as TOP does and round the result to their element type. In a
quantized type their integer meaning is below. Weights are `si8` filters,
`i32` biases, `f16`/`bf16`/`f32` floats, in the weight npz.

Integer conventions (the TPU interpreter implements them exactly; the
lowering chooses the parameters):
- requant(acc, M, r) = round(acc·M / 2^r) with `round_mode` (default
  HalfAwayFromZero), then + Z_out, fused relu (clamp below at Z_out, and
  above at Z_out + round(relu_limit/S_out) when relu_limit >= 0), then
  saturation to the output's storage range. `multiplier`/`rshift` are one
  value, or one per output channel (axis 1; the last axis for MatMul).
- Conv2D/Deconv/MatMul: acc = Σ (q_in − Z_in)·q_w + bias (int32, padding
  contributes 0); MatMul with two activations: Σ (q_l − Z_l)(q_r − Z_r).
  With quantized inputs and a FLOAT result (the float epilogue), the
  accumulator is dequantized instead, as the chip computes it:
  f32(acc)·f32(M·2^−r) in float32, fused relu on that, then rounded to the
  result type.
- Add/Sub: acc = Σ_i ±(q_i − Z_i)·multiplier[i]; one rshift. Or one rshift
  per input (bm168x's form, the chip's bcbinary ADD/SUB): each term is
  rounded on its own, acc = Σ_i ±round((q_i − Z_i)·multiplier[i] / 2^rshift[i])
  with `round_mode` (Sub rounds the subtrahend, then negates it), and the
  epilogue shifts by 0.
- Mul: acc = Π_i (q_i − Z_i); one multiplier and rshift.
- Pool2D Avg: acc = Σ_window (q − Z_in) (padding contributes 0), then
  requant; Max: the max of q (input and output share their type).
- Concat: input i is requant(q_i − Z_i, multiplier[i], rshift[i]).
- Reduce (ReduceMean/ReduceSum): acc = Σ (q − Z_in), then requant; Max/Min:
  on q, sharing the input's type.
- Lut: out = table[q − qmin_in] (256 entries; or [C, 256], one per channel).
- Data movement (Reshape, Permute, Slice, Pad, Upsample, …) move q values;
  input and output share their type; Pad's `val` is already quantized.
"""

from __future__ import annotations

from xdsl.irdl import operand_def, result_def, traits_def

from tpuc.dialects import top
from tpuc.dialects.base import AnyTensor, TensorOp
from tpuc.dialects.top.base import ints, text
from tpuc.dialects.tpu.mirror import tpu_op
from tpuc.dialects.tpu.mirrored import (
    AddConstOp,
    ArgOp,
    BatchNormOp,
    ClipOp,
    CompareConstOp,
    CompareOp,
    Depth2SpaceOp,
    DivOp,
    EluOp,
    ExpandOp,
    FlattenOp,
    GatherOp,
    GELUOp,
    GroupNormOp,
    GRUOp,
    HardSigmoidOp,
    InstanceNormOp,
    InterpOp,
    LayerNormOp,
    LeakyReluOp,
    LRNOp,
    LSTMOp,
    MaxOp,
    MinOp,
    MulConstOp,
    NotOp,
    PadOp,
    PermuteOp,
    PowOp,
    PowTensorOp,
    PReluOp,
    ReciprocalOp,
    ReluOp,
    ReshapeOp,
    ScaleOp,
    SigmoidOp,
    SliceOp,
    SoftmaxOp,
    SplitOp,
    SqueezeOp,
    SubConstOp,
    TileOp,
    TopKOp,
    UnsqueezeOp,
    UpsampleOp,
    WhereOp,
)
from tpuc.dialects.traits import FloatFormOf, HasCanonicalizationPatterns, Mirrors


class Requantized(TensorOp):
    """Requantization parameters of an integer op (see the module docstring)."""

    multiplier = ints()
    rshift = ints()
    quant_mode = text("MultiplierShift")
    round_mode = text("HalfAwayFromZero")


# --- compute ops with requantization ------------------------------------------------


@tpu_op(top.ConvOp)
class Conv2DOp(Requantized):
    """Convolution (1-3 spatial dims)."""

    name = "tpu.Conv2D"


@tpu_op(top.DeconvOp)
class DeconvOp(Requantized):
    """Transposed convolution."""

    name = "tpu.Deconv"


@tpu_op(top.MatMulOp)
class MatMulOp(Requantized):
    """Batched matmul."""

    name = "tpu.MatMul"


@tpu_op(fields_from=top.AvgPoolOp)
class Pool2DOp(Requantized):
    """Max or average pooling, by `pool_mode` (Max | Avg)."""

    name = "tpu.Pool2D"
    pool_mode = text("Max")
    traits = traits_def(FloatFormOf((top.MaxPoolOp, top.AvgPoolOp)))


@tpu_op(top.AddOp)
class AddOp(Requantized):
    """Sum (coeff folded into multipliers)."""

    name = "tpu.Add"


@tpu_op(top.SubOp)
class SubOp(Requantized):
    """lhs − rhs."""

    name = "tpu.Sub"


@tpu_op(top.MulOp)
class MulOp(Requantized):
    """Product."""

    name = "tpu.Mul"


@tpu_op(top.ConcatOp)
class ConcatOp(Requantized):
    """Concatenation."""

    name = "tpu.Concat"


@tpu_op(top.ReduceOp)
class ReduceOp(Requantized):
    """Reduction by `mode`."""

    name = "tpu.Reduce"


# --- activations without parameters -----------------------------------------------------

ACTIVE_MODES: dict[str, type] = {
    "SILU": top.SiLUOp,
    "HSWISH": top.HardSwishOp,
    "MISH": top.MishOp,
    "SOFT_PLUS": top.SoftplusOp,
    "TANH": top.TanhOp,
    "EXP": top.ExpOp,
    "LN": top.LogOp,
    "SQRT": top.SqrtOp,
    "RSQRT": top.RsqrtOp,
    "ERF": top.ErfOp,
    "ABSVAL": top.AbsOp,
    "FLOOR": top.FloorOp,
    "CEIL": top.CeilOp,
    "ROUND": top.RoundOp,
    "SIN": top.SinOp,
    "COS": top.CosOp,
    "SIGN": top.SignOp,
}
"""tpu.Active `mode` -> the TOP op it computes (TPU-MLIR's ActiveMode names)."""


@tpu_op()
class ActiveOp(TensorOp):
    """A parameterless activation chosen by `mode` (see ACTIVE_MODES)."""

    name = "tpu.Active"
    input = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    mode = text()
    traits = traits_def(FloatFormOf(ACTIVE_MODES.values()))


# --- precision changes -------------------------------------------------------------------


@tpu_op()
class CastOp(TensorOp):
    """Conversion to the result type: float -> quantized is clamp(round(x/S) + Z);
    quantized -> float is S·(q − Z) rounded to the float type; float -> float
    rounds (f16/bf16: to nearest even). `to` (from top.Cast: INT32, BOOL …)
    first converts values as TOP does."""

    name = "tpu.Cast"
    input = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    round_mode = text("HalfAwayFromZero")
    to = text()
    traits = traits_def(FloatFormOf((top.CastOp,)), HasCanonicalizationPatterns())


@tpu_op()
class LutOp(TensorOp):
    """Table lookup on an 8-bit input: out = table[q − qmin_in]; `table` is a
    weight of 256 output values (or C x 256: one table per channel, axis 1)."""

    name = "tpu.Lut"
    input = operand_def(AnyTensor)
    table = operand_def(AnyTensor)
    output = result_def(AnyTensor)


@tpu_op()
class RequantIntOp(Requantized):
    """Integer rescale: requant(q − Z_in, multiplier, rshift) + Z_out."""

    name = "tpu.RequantInt"
    input = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    traits = traits_def(HasCanonicalizationPatterns())


@tpu_op()
class RequantIntAxisOp(Requantized):
    """RequantInt with one multiplier/rshift per channel (axis 1)."""

    name = "tpu.RequantIntAxis"
    input = operand_def(AnyTensor)
    output = result_def(AnyTensor)


@tpu_op()
class DequantIntOp(Requantized):
    """Quantized -> float by an integer multiplier and shift:
    (q − Z_in)·multiplier / 2^rshift, rounded to the float result type."""

    name = "tpu.DequantInt"
    input = operand_def(AnyTensor)
    output = result_def(AnyTensor)


TPU_OPS: list[type[TensorOp]] = [
    Conv2DOp,
    DeconvOp,
    MatMulOp,
    AddOp,
    SubOp,
    MulOp,
    ConcatOp,
    ReduceOp,
    MaxOp,
    MinOp,
    DivOp,
    PowTensorOp,
    CompareOp,
    AddConstOp,
    SubConstOp,
    MulConstOp,
    CompareConstOp,
    WhereOp,
    ScaleOp,
    ReluOp,
    LeakyReluOp,
    PReluOp,
    SigmoidOp,
    GELUOp,
    HardSigmoidOp,
    EluOp,
    ReciprocalOp,
    PowOp,
    NotOp,
    ClipOp,
    SoftmaxOp,
    BatchNormOp,
    LayerNormOp,
    InstanceNormOp,
    GroupNormOp,
    LRNOp,
    SplitOp,
    SliceOp,
    ReshapeOp,
    FlattenOp,
    SqueezeOp,
    UnsqueezeOp,
    PermuteOp,
    Depth2SpaceOp,
    PadOp,
    UpsampleOp,
    InterpOp,
    TileOp,
    ExpandOp,
    GatherOp,
    ArgOp,
    TopKOp,
    LSTMOp,
    GRUOp,
    Pool2DOp,
    ActiveOp,
    CastOp,
    LutOp,
    RequantIntOp,
    RequantIntAxisOp,
    DequantIntOp,
]

MIRRORS: dict[type, type] = {
    trait.source: cls for cls in TPU_OPS if (trait := cls.get_trait(Mirrors)) is not None
}
"""TOP op class -> the TPU op class with the same operands and attributes."""


def float_forms(top_class: type) -> tuple[type[TensorOp], ...]:
    """The TPU ops that declare themselves the float form of a TOP op class
    (their `Mirrors` or `FloatFormOf` trait)."""
    forms = []
    for cls in TPU_OPS:
        mirror, formed = cls.get_trait(Mirrors), cls.get_trait(FloatFormOf)
        if (mirror is not None and mirror.source is top_class) or (
            formed is not None and top_class in formed.sources
        ):
            forms.append(cls)
    return tuple(forms)
