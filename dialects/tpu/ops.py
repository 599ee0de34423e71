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
  accumulator is dequantized instead: acc·M·2^−r, fused relu on the real
  values, rounded once to the result type.
- Add/Sub: acc = Σ_i ±(q_i − Z_i)·multiplier[i]; one rshift.
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

from xdsl.irdl import operand_def, result_def

from tpuc.dialects import top
from tpuc.dialects.base import AnyTensor
from tpuc.dialects.top.base import ints, real, text
from tpuc.dialects.tpu.mirror import tpu_op


def requant_fields() -> dict:
    """Requantization parameters of an integer op."""
    return {
        "multiplier": ints(),
        "rshift": ints(),
        "quant_mode": text("MultiplierShift"),
        "round_mode": text("HalfAwayFromZero"),
    }


# --- compute ops with requantization ------------------------------------------------

Conv2DOp = tpu_op("Conv2D", top.ConvOp, "Convolution (1-3 spatial dims).", **requant_fields())
DeconvOp = tpu_op("Deconv", top.DeconvOp, "Transposed convolution.", **requant_fields())
MatMulOp = tpu_op("MatMul", top.MatMulOp, "Batched matmul.", **requant_fields())
Pool2DOp = tpu_op(
    "Pool2D",
    top.AvgPoolOp,
    "Max or average pooling, by `pool_mode` (Max | Avg).",
    pool_mode=text("Max"),
    **requant_fields(),
)
AddOp = tpu_op("Add", top.AddOp, "Sum (coeff folded into multipliers).", **requant_fields())
SubOp = tpu_op("Sub", top.SubOp, "lhs − rhs.", **requant_fields())
MulOp = tpu_op("Mul", top.MulOp, "Product.", **requant_fields())
ConcatOp = tpu_op("Concat", top.ConcatOp, "Concatenation.", **requant_fields())
ReduceOp = tpu_op("Reduce", top.ReduceOp, "Reduction by `mode`.", **requant_fields())

# --- float-only or pass-through mirrors ------------------------------------------------

_MIRRORED = {
    "Max": top.MaxOp,
    "Min": top.MinOp,
    "Div": top.DivOp,
    "PowTensor": top.PowTensorOp,
    "Compare": top.CompareOp,
    "AddConst": top.AddConstOp,
    "SubConst": top.SubConstOp,
    "MulConst": top.MulConstOp,
    "CompareConst": top.CompareConstOp,
    "Where": top.WhereOp,
    "Scale": top.ScaleOp,
    "Relu": top.ReluOp,
    "LeakyRelu": top.LeakyReluOp,
    "PRelu": top.PReluOp,
    "Sigmoid": top.SigmoidOp,
    "GELU": top.GELUOp,
    "HardSigmoid": top.HardSigmoidOp,
    "Elu": top.EluOp,
    "Reciprocal": top.ReciprocalOp,
    "Pow": top.PowOp,
    "Not": top.NotOp,
    "Clip": top.ClipOp,
    "Softmax": top.SoftmaxOp,
    "BatchNorm": top.BatchNormOp,
    "LayerNorm": top.LayerNormOp,
    "InstanceNorm": top.InstanceNormOp,
    "GroupNorm": top.GroupNormOp,
    "LRN": top.LRNOp,
    "Split": top.SplitOp,
    "Slice": top.SliceOp,
    "Reshape": top.ReshapeOp,
    "Flatten": top.FlattenOp,
    "Squeeze": top.SqueezeOp,
    "Unsqueeze": top.UnsqueezeOp,
    "Permute": top.PermuteOp,
    "Depth2Space": top.Depth2SpaceOp,
    "Pad": top.PadOp,
    "Upsample": top.UpsampleOp,
    "Interp": top.InterpOp,
    "Tile": top.TileOp,
    "Expand": top.ExpandOp,
    "Gather": top.GatherOp,
    "Arg": top.ArgOp,
    "TopK": top.TopKOp,
    "LSTM": top.LSTMOp,
    "GRU": top.GRUOp,
}

MIRRORS: dict[type, type] = {
    top.ConvOp: Conv2DOp,
    top.DeconvOp: DeconvOp,
    top.MatMulOp: MatMulOp,
    top.AddOp: AddOp,
    top.SubOp: SubOp,
    top.MulOp: MulOp,
    top.ConcatOp: ConcatOp,
    top.ReduceOp: ReduceOp,
}
"""TOP op class -> the TPU op class with the same operands and attributes."""

for _name, _source in _MIRRORED.items():
    _cls = tpu_op(_name, _source, f"The TPU form of top.{_name} (same attributes).")
    globals()[f"{_name}Op"] = _cls
    MIRRORS[_source] = _cls

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

ActiveOp = tpu_op(
    "Active",
    None,
    "A parameterless activation chosen by `mode` (see ACTIVE_MODES).",
    input=operand_def(AnyTensor),
    output=result_def(AnyTensor),
    mode=text(),
)

# --- precision changes -------------------------------------------------------------------

CastOp = tpu_op(
    "Cast",
    None,
    "Conversion to the result type: float -> quantized is "
    "clamp(round(x/S) + Z); quantized -> float is S·(q − Z) rounded to the "
    "float type; float -> float rounds (f16/bf16: to nearest even). `to` "
    "(from top.Cast: INT32, BOOL …) first converts values as TOP does.",
    input=operand_def(AnyTensor),
    output=result_def(AnyTensor),
    round_mode=text("HalfAwayFromZero"),
    to=text(),
)
LutOp = tpu_op(
    "Lut",
    None,
    "Table lookup on an 8-bit input: out = table[q − qmin_in]; `table` is a "
    "weight of 256 output values (or C x 256: one table per channel, axis 1).",
    input=operand_def(AnyTensor),
    table=operand_def(AnyTensor),
    output=result_def(AnyTensor),
)
RequantIntOp = tpu_op(
    "RequantInt",
    None,
    "Integer rescale: requant(q − Z_in, multiplier, rshift) + Z_out.",
    input=operand_def(AnyTensor),
    output=result_def(AnyTensor),
    **requant_fields(),
)
RequantIntAxisOp = tpu_op(
    "RequantIntAxis",
    None,
    "RequantInt with one multiplier/rshift per channel (axis 1).",
    input=operand_def(AnyTensor),
    output=result_def(AnyTensor),
    **requant_fields(),
)
RequantFpOp = tpu_op(
    "RequantFp",
    None,
    "Integer rescale through a float32 scale: clamp(round((q − Z_in)·scale) + Z_out).",
    input=operand_def(AnyTensor),
    output=result_def(AnyTensor),
    scale=real(1.0),
    round_mode=text("HalfAwayFromZero"),
)
DequantIntOp = tpu_op(
    "DequantInt",
    None,
    "Quantized -> float by an integer multiplier and shift: "
    "(q − Z_in)·multiplier / 2^rshift, rounded to the float result type.",
    input=operand_def(AnyTensor),
    output=result_def(AnyTensor),
    **requant_fields(),
)

TPU_OPS: list[type] = [
    *MIRRORS.values(),
    Pool2DOp,
    ActiveOp,
    CastOp,
    LutOp,
    RequantIntOp,
    RequantIntAxisOp,
    RequantFpOp,
    DequantIntOp,
]
