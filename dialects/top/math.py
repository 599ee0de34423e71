"""TOP elementwise ops: arithmetic with numpy broadcasting and activations."""

from __future__ import annotations

from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from tpuc.dialects.base import AnyTensor, TensorOp, TensorOrNone
from tpuc.dialects.top import shape_rules
from tpuc.dialects.top.base import (
    BinaryOp,
    ReluFusedOp,
    UnaryOp,
    VariadicOp,
    flag,
    integer,
    ints,
    real,
    text,
)
from tpuc.dialects.traits import (
    ElementwiseUnary,
    F32Operands,
    FusesRelu,
    HasCanonicalizationPatterns,
    HasShapeRule,
    IndexOperands,
    Untuned,
)

# --- elementwise arithmetic (numpy broadcasting) ---------------------------------


@irdl_op_definition
class AddOp(VariadicOp):
    """Sum of the inputs, each times `coeff[i]` when given."""

    name = "top.Add"
    traits = traits_def(
        FusesRelu(), HasShapeRule(shape_rules.variadic_broadcast), HasCanonicalizationPatterns()
    )
    coeff = ints()


@irdl_op_definition
class MulOp(VariadicOp):
    name = "top.Mul"
    traits = traits_def(
        FusesRelu(), HasShapeRule(shape_rules.variadic_broadcast), HasCanonicalizationPatterns()
    )


@irdl_op_definition
class MaxOp(VariadicOp):
    name = "top.Max"
    traits = traits_def(HasShapeRule(shape_rules.variadic_broadcast))


@irdl_op_definition
class MinOp(VariadicOp):
    name = "top.Min"
    traits = traits_def(HasShapeRule(shape_rules.variadic_broadcast))


@irdl_op_definition
class SubOp(BinaryOp):
    name = "top.Sub"
    traits = traits_def(FusesRelu(), HasShapeRule(shape_rules.binary_broadcast))
    do_relu = flag()
    relu_limit = real(-1.0)


@irdl_op_definition
class DivOp(BinaryOp):
    name = "top.Div"
    traits = traits_def(HasShapeRule(shape_rules.binary_broadcast), HasCanonicalizationPatterns())


@irdl_op_definition
class PowTensorOp(BinaryOp):
    """lhs ** rhs with a tensor exponent (TPU-MLIR's Pow2/Pow3 family)."""

    name = "top.PowTensor"
    traits = traits_def(HasShapeRule(shape_rules.binary_broadcast))


@irdl_op_definition
class CompareOp(BinaryOp):
    """1.0 where `lhs mode rhs` holds, else 0.0. Modes: Equal, NotEqual,
    Greater, GreaterOrEqual, Less, LessOrEqual, And, Or, Xor."""

    name = "top.Compare"
    traits = traits_def(Untuned(), HasShapeRule(shape_rules.binary_broadcast))
    mode = text()


@irdl_op_definition
class AddConstOp(UnaryOp):
    name = "top.AddConst"
    traits = traits_def(
        ElementwiseUnary(),
        FusesRelu(),
        HasShapeRule(shape_rules.same_shape),
        HasCanonicalizationPatterns(),
    )
    const_val = real(0.0)
    do_relu = flag()
    relu_limit = real(-1.0)


@irdl_op_definition
class SubConstOp(UnaryOp):
    """input - c, or c - input when `is_reverse`."""

    name = "top.SubConst"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))
    const_val = real(0.0)
    is_reverse = flag()


@irdl_op_definition
class MulConstOp(UnaryOp):
    name = "top.MulConst"
    traits = traits_def(
        ElementwiseUnary(),
        FusesRelu(),
        HasShapeRule(shape_rules.same_shape),
        HasCanonicalizationPatterns(),
    )
    const_val = real(1.0)
    do_relu = flag()
    relu_limit = real(-1.0)


@irdl_op_definition
class CompareConstOp(UnaryOp):
    """`input mode c`, or `c mode input` when `inversed`."""

    name = "top.CompareConst"
    traits = traits_def(ElementwiseUnary(), Untuned(), HasShapeRule(shape_rules.same_shape))
    mode = text()
    const_val = real(0.0)
    inversed = flag()


@irdl_op_definition
class WhereOp(TensorOp):
    """cond != 0 ? tbrn : fbrn."""

    name = "top.Where"
    cond = operand_def(AnyTensor)
    tbrn = operand_def(AnyTensor)
    fbrn = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    traits = traits_def(Pure(), IndexOperands(0), HasShapeRule(shape_rules.binary_broadcast))


@irdl_op_definition
class ScaleOp(ReluFusedOp):
    """Per-channel (axis 1) input * scale + bias."""

    name = "top.Scale"
    input = operand_def(AnyTensor)
    scale = operand_def(AnyTensor)
    bias = operand_def(TensorOrNone)
    output = result_def(AnyTensor)
    traits = traits_def(
        Pure(),
        FusesRelu(),
        F32Operands(2),
        HasShapeRule(shape_rules.per_channel_affine),
        HasCanonicalizationPatterns(),
    )


# --- activations ------------------------------------------------------------------


@irdl_op_definition
class ReluOp(UnaryOp):
    name = "top.Relu"
    traits = traits_def(
        ElementwiseUnary(), HasShapeRule(shape_rules.same_shape), HasCanonicalizationPatterns()
    )
    relu_limit = real(-1.0)


@irdl_op_definition
class LeakyReluOp(UnaryOp):
    name = "top.LeakyRelu"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))
    alpha = real(0.01)


@irdl_op_definition
class PReluOp(TensorOp):
    """Leaky ReLU with a learned slope broadcast against the input."""

    name = "top.PRelu"
    input = operand_def(AnyTensor)
    slope = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    traits = traits_def(Pure(), HasShapeRule(shape_rules.prelu))


@irdl_op_definition
class SigmoidOp(UnaryOp):
    """scale * sigmoid(x) + bias (log: log of it)."""

    name = "top.Sigmoid"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))
    scale = real(1.0)
    bias = real(0.0)
    log = flag()


@irdl_op_definition
class SiLUOp(UnaryOp):
    name = "top.SiLU"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class GELUOp(UnaryOp):
    """approx_mode: "normal" (erf) or "tanh"."""

    name = "top.GELU"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))
    approx_mode = text("normal")


@irdl_op_definition
class HardSigmoidOp(UnaryOp):
    name = "top.HardSigmoid"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))
    alpha = real(0.2)
    beta = real(0.5)


@irdl_op_definition
class HardSwishOp(UnaryOp):
    name = "top.HardSwish"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class MishOp(UnaryOp):
    name = "top.Mish"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class EluOp(UnaryOp):
    name = "top.Elu"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))
    alpha = real(1.0)


@irdl_op_definition
class SoftplusOp(UnaryOp):
    name = "top.Softplus"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class TanhOp(UnaryOp):
    name = "top.Tanh"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class ExpOp(UnaryOp):
    name = "top.Exp"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class LogOp(UnaryOp):
    name = "top.Log"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class SqrtOp(UnaryOp):
    name = "top.Sqrt"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class RsqrtOp(UnaryOp):
    name = "top.Rsqrt"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class ReciprocalOp(UnaryOp):
    """const_val / input."""

    name = "top.Reciprocal"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))
    const_val = real(1.0)


@irdl_op_definition
class PowOp(UnaryOp):
    """input ** exponent, a constant exponent."""

    name = "top.Pow"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))
    exponent = real(1.0)


@irdl_op_definition
class ErfOp(UnaryOp):
    name = "top.Erf"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class AbsOp(UnaryOp):
    name = "top.Abs"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class FloorOp(UnaryOp):
    name = "top.Floor"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class CeilOp(UnaryOp):
    name = "top.Ceil"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class RoundOp(UnaryOp):
    """Round half to even, as ONNX Round."""

    name = "top.Round"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class SinOp(UnaryOp):
    name = "top.Sin"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class CosOp(UnaryOp):
    name = "top.Cos"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class SignOp(UnaryOp):
    name = "top.Sign"
    traits = traits_def(ElementwiseUnary(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class NotOp(UnaryOp):
    """Logical not: 1.0 where input == 0."""

    name = "top.Not"
    traits = traits_def(ElementwiseUnary(), Untuned(), HasShapeRule(shape_rules.same_shape))


@irdl_op_definition
class ClipOp(UnaryOp):
    name = "top.Clip"
    traits = traits_def(
        ElementwiseUnary(), HasShapeRule(shape_rules.same_shape), HasCanonicalizationPatterns()
    )
    min = real()
    max = real()


@irdl_op_definition
class SoftmaxOp(UnaryOp):
    """Softmax along `axis` (log: log-softmax)."""

    name = "top.Softmax"
    traits = traits_def(HasShapeRule(shape_rules.softmax))
    axis = integer(1)
    log = flag()


@irdl_op_definition
class CastOp(UnaryOp):
    """Conversion to `to` ("F32", "INT32", "INT64", "BOOL", ...); the float
    interpreter keeps values in float32 after converting through `to`."""

    name = "top.Cast"
    traits = traits_def(HasShapeRule(shape_rules.same_shape), HasCanonicalizationPatterns())
    to = text("F32")
