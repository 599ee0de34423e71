"""The chip-independent TOP dialect, with TPU-MLIR's op names and attributes.

Tensors are float32 until lowering. Conventions the kernels, shape rules and
frontends share (all attributes are fully resolved by the frontend):
- spatial attributes (`kernel_shape`, `strides`, `dilations`) have one entry
  per spatial dim; `pads` lists all begins then all ends (ONNX order);
- `Slice` carries `offset`, `ends`, `steps` for every axis of its input;
- `Pad.paddings` lists all begins then all ends, one per axis;
- `do_relu`/`relu_limit` (limit < 0: unbounded) fuse a trailing ReLU/ReLU6;
- optional operands (a Conv without bias) are the result of `top.None`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    ArrayAttr,
    BoolAttr,
    FloatAttr,
    IntegerAttr,
    NoneType,
    StringAttr,
    f64,
    i64,
)
from xdsl.ir import Dialect
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure

from tpuc.dialects.base import AnyTensor, TensorOp, TensorOrNone


def flag(default: bool = False):
    """An optional boolean attribute with a default."""
    return opt_attr_def(IntegerAttr, BoolAttr.from_bool(default))


def integer(default: int | None = None):
    return opt_attr_def(IntegerAttr, None if default is None else IntegerAttr(default, i64))


def real(default: float | None = None):
    return opt_attr_def(FloatAttr, None if default is None else FloatAttr(default, f64))


def ints():
    return opt_attr_def(ArrayAttr)


def text(default: str | None = None):
    return opt_attr_def(StringAttr, None if default is None else StringAttr(default))


class UnaryOp(TensorOp):
    """One tensor in, one tensor out."""

    input = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    traits = traits_def(Pure())


class ReluFusedOp(TensorOp):
    """Ops that can absorb a trailing ReLU (relu_limit < 0: no upper bound)."""

    do_relu = flag()
    relu_limit = real(-1.0)


class VariadicOp(ReluFusedOp):
    inputs = var_operand_def(AnyTensor)
    output = result_def(AnyTensor)
    traits = traits_def(Pure())


class BinaryOp(TensorOp):
    lhs = operand_def(AnyTensor)
    rhs = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    traits = traits_def(Pure())


# --- graph boundary -------------------------------------------------------------


@irdl_op_definition
class InputOp(UnaryOp):
    """A network input, with the preprocessing that produced it."""

    name = "top.Input"
    channel_format = text()
    pixel_format = text()
    resize_dims = ints()
    keep_aspect_ratio = flag()
    mean = ints()
    scale = ints()


@irdl_op_definition
class WeightOp(TensorOp):
    """A constant whose bytes live in the module's weight npz under `name`."""

    name = "top.Weight"
    output = result_def(AnyTensor)
    traits = traits_def(Pure())


@irdl_op_definition
class NoneOp(IRDLOperation):
    """Stands for an absent optional operand."""

    name = "top.None"
    output = result_def(NoneType)
    traits = traits_def(Pure())


# --- convolution, matmul, pooling -----------------------------------------------


class ConvLikeOp(ReluFusedOp):
    input = operand_def(AnyTensor)
    filter = operand_def(AnyTensor)
    bias = operand_def(TensorOrNone)
    output = result_def(AnyTensor)
    kernel_shape = ints()
    strides = ints()
    pads = ints()
    dilations = ints()
    group = integer(1)
    traits = traits_def(Pure())


@irdl_op_definition
class ConvOp(ConvLikeOp):
    """N-d convolution; filter is [oc, ic/group, *kernel]."""

    name = "top.Conv"


@irdl_op_definition
class DeconvOp(ConvLikeOp):
    """Transposed convolution; filter is [ic, oc/group, *kernel]."""

    name = "top.Deconv"
    output_padding = ints()


@irdl_op_definition
class MatMulOp(ReluFusedOp):
    """Batched matmul with numpy broadcasting; `right_transpose` swaps the
    last two dims of `right`. Bias adds along the last dim."""

    name = "top.MatMul"
    input = operand_def(AnyTensor)
    right = operand_def(AnyTensor)
    bias = operand_def(TensorOrNone)
    output = result_def(AnyTensor)
    right_transpose = flag()
    traits = traits_def(Pure())


class PoolOp(ReluFusedOp):
    input = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    kernel_shape = ints()
    strides = ints()
    pads = ints()
    ceil_mode = flag()
    traits = traits_def(Pure())


@irdl_op_definition
class MaxPoolOp(PoolOp):
    name = "top.MaxPool"


@irdl_op_definition
class AvgPoolOp(PoolOp):
    name = "top.AvgPool"
    count_include_pad = flag()


# --- elementwise arithmetic (numpy broadcasting) ---------------------------------


@irdl_op_definition
class AddOp(VariadicOp):
    """Sum of the inputs, each times `coeff[i]` when given."""

    name = "top.Add"
    coeff = ints()


@irdl_op_definition
class MulOp(VariadicOp):
    name = "top.Mul"


@irdl_op_definition
class MaxOp(VariadicOp):
    name = "top.Max"


@irdl_op_definition
class MinOp(VariadicOp):
    name = "top.Min"


@irdl_op_definition
class SubOp(BinaryOp):
    name = "top.Sub"
    do_relu = flag()
    relu_limit = real(-1.0)


@irdl_op_definition
class DivOp(BinaryOp):
    name = "top.Div"


@irdl_op_definition
class PowTensorOp(BinaryOp):
    """lhs ** rhs with a tensor exponent (TPU-MLIR's Pow2/Pow3 family)."""

    name = "top.PowTensor"


@irdl_op_definition
class CompareOp(BinaryOp):
    """1.0 where `lhs mode rhs` holds, else 0.0. Modes: Equal, NotEqual,
    Greater, GreaterOrEqual, Less, LessOrEqual, And, Or, Xor."""

    name = "top.Compare"
    mode = text()


@irdl_op_definition
class AddConstOp(UnaryOp):
    name = "top.AddConst"
    const_val = real(0.0)
    do_relu = flag()
    relu_limit = real(-1.0)


@irdl_op_definition
class SubConstOp(UnaryOp):
    """input - c, or c - input when `is_reverse`."""

    name = "top.SubConst"
    const_val = real(0.0)
    is_reverse = flag()


@irdl_op_definition
class MulConstOp(UnaryOp):
    name = "top.MulConst"
    const_val = real(1.0)
    do_relu = flag()
    relu_limit = real(-1.0)


@irdl_op_definition
class CompareConstOp(UnaryOp):
    """`input mode c`, or `c mode input` when `inversed`."""

    name = "top.CompareConst"
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
    traits = traits_def(Pure())


@irdl_op_definition
class ScaleOp(ReluFusedOp):
    """Per-channel (axis 1) input * scale + bias."""

    name = "top.Scale"
    input = operand_def(AnyTensor)
    scale = operand_def(AnyTensor)
    bias = operand_def(TensorOrNone)
    output = result_def(AnyTensor)
    traits = traits_def(Pure())


# --- activations ------------------------------------------------------------------


@irdl_op_definition
class ReluOp(UnaryOp):
    name = "top.Relu"
    relu_limit = real(-1.0)


@irdl_op_definition
class LeakyReluOp(UnaryOp):
    name = "top.LeakyRelu"
    alpha = real(0.01)


@irdl_op_definition
class PReluOp(TensorOp):
    """Leaky ReLU with a learned slope broadcast against the input."""

    name = "top.PRelu"
    input = operand_def(AnyTensor)
    slope = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    traits = traits_def(Pure())


@irdl_op_definition
class SigmoidOp(UnaryOp):
    """scale * sigmoid(x) + bias (log: log of it)."""

    name = "top.Sigmoid"
    scale = real(1.0)
    bias = real(0.0)
    log = flag()


@irdl_op_definition
class SiLUOp(UnaryOp):
    name = "top.SiLU"


@irdl_op_definition
class GELUOp(UnaryOp):
    """approx_mode: "normal" (erf) or "tanh"."""

    name = "top.GELU"
    approx_mode = text("normal")


@irdl_op_definition
class HardSigmoidOp(UnaryOp):
    name = "top.HardSigmoid"
    alpha = real(0.2)
    beta = real(0.5)


@irdl_op_definition
class HardSwishOp(UnaryOp):
    name = "top.HardSwish"


@irdl_op_definition
class MishOp(UnaryOp):
    name = "top.Mish"


@irdl_op_definition
class EluOp(UnaryOp):
    name = "top.Elu"
    alpha = real(1.0)


@irdl_op_definition
class SoftplusOp(UnaryOp):
    name = "top.Softplus"


@irdl_op_definition
class TanhOp(UnaryOp):
    name = "top.Tanh"


@irdl_op_definition
class ExpOp(UnaryOp):
    name = "top.Exp"


@irdl_op_definition
class LogOp(UnaryOp):
    name = "top.Log"


@irdl_op_definition
class SqrtOp(UnaryOp):
    name = "top.Sqrt"


@irdl_op_definition
class RsqrtOp(UnaryOp):
    name = "top.Rsqrt"


@irdl_op_definition
class ReciprocalOp(UnaryOp):
    """const_val / input."""

    name = "top.Reciprocal"
    const_val = real(1.0)


@irdl_op_definition
class PowOp(UnaryOp):
    """input ** exponent, a constant exponent."""

    name = "top.Pow"
    exponent = real(1.0)


@irdl_op_definition
class ErfOp(UnaryOp):
    name = "top.Erf"


@irdl_op_definition
class AbsOp(UnaryOp):
    name = "top.Abs"


@irdl_op_definition
class FloorOp(UnaryOp):
    name = "top.Floor"


@irdl_op_definition
class CeilOp(UnaryOp):
    name = "top.Ceil"


@irdl_op_definition
class RoundOp(UnaryOp):
    """Round half to even, as ONNX Round."""

    name = "top.Round"


@irdl_op_definition
class SinOp(UnaryOp):
    name = "top.Sin"


@irdl_op_definition
class CosOp(UnaryOp):
    name = "top.Cos"


@irdl_op_definition
class SignOp(UnaryOp):
    name = "top.Sign"


@irdl_op_definition
class NotOp(UnaryOp):
    """Logical not: 1.0 where input == 0."""

    name = "top.Not"


@irdl_op_definition
class ClipOp(UnaryOp):
    name = "top.Clip"
    min = real()
    max = real()


@irdl_op_definition
class SoftmaxOp(UnaryOp):
    """Softmax along `axis` (log: log-softmax)."""

    name = "top.Softmax"
    axis = integer(1)
    log = flag()


@irdl_op_definition
class CastOp(UnaryOp):
    """Conversion to `to` ("F32", "INT32", "INT64", "BOOL", ...); the float
    interpreter keeps values in float32 after converting through `to`."""

    name = "top.Cast"
    to = text("F32")


# --- normalization ----------------------------------------------------------------


@irdl_op_definition
class BatchNormOp(ReluFusedOp):
    name = "top.BatchNorm"
    input = operand_def(AnyTensor)
    mean = operand_def(AnyTensor)
    variance = operand_def(AnyTensor)
    gamma = operand_def(TensorOrNone)
    beta = operand_def(TensorOrNone)
    output = result_def(AnyTensor)
    epsilon = real(1e-5)
    traits = traits_def(Pure())


class AffineNormOp(TensorOp):
    input = operand_def(AnyTensor)
    weight = operand_def(TensorOrNone)
    bias = operand_def(TensorOrNone)
    output = result_def(AnyTensor)
    eps = real(1e-5)
    traits = traits_def(Pure())


@irdl_op_definition
class LayerNormOp(AffineNormOp):
    """Normalize over dims [axis, rank); weight/bias have that trailing shape."""

    name = "top.LayerNorm"
    axis = integer(-1)
    normalized_shape = ints()


@irdl_op_definition
class InstanceNormOp(AffineNormOp):
    name = "top.InstanceNorm"


@irdl_op_definition
class GroupNormOp(AffineNormOp):
    name = "top.GroupNorm"
    num_groups = integer(1)


@irdl_op_definition
class LRNOp(UnaryOp):
    name = "top.LRN"
    size = integer(1)
    alpha = real(1e-4)
    beta = real(0.75)
    bias = real(1.0)


# --- data movement ----------------------------------------------------------------


@irdl_op_definition
class ConcatOp(VariadicOp):
    name = "top.Concat"
    axis = integer(1)


@irdl_op_definition
class SplitOp(TensorOp):
    """Split along `axis` into pieces of `split_size`; tensor names are in
    `result_names`."""

    name = "top.Split"
    input = operand_def(AnyTensor)
    outputs = var_result_def(AnyTensor)
    axis = integer(0)
    split_size = ints()
    traits = traits_def(Pure())


@irdl_op_definition
class SliceOp(UnaryOp):
    """input[offset:ends:steps] on every axis (negative steps allowed)."""

    name = "top.Slice"
    offset = ints()
    ends = ints()
    steps = ints()


@irdl_op_definition
class ReshapeOp(UnaryOp):
    """`shape` may hold one -1; otherwise it is the output shape."""

    name = "top.Reshape"
    shape = ints()


@irdl_op_definition
class FlattenOp(UnaryOp):
    """Merge dims [start_dim, end_dim] into one."""

    name = "top.Flatten"
    start_dim = integer(1)
    end_dim = integer(-1)


@irdl_op_definition
class SqueezeOp(UnaryOp):
    name = "top.Squeeze"
    axes = ints()


@irdl_op_definition
class UnsqueezeOp(UnaryOp):
    name = "top.Unsqueeze"
    axes = ints()


@irdl_op_definition
class PermuteOp(UnaryOp):
    name = "top.Permute"
    order = ints()


@irdl_op_definition
class Depth2SpaceOp(UnaryOp):
    """DepthToSpace (or SpaceToDepth when `is_inversed`); `is_CRD` picks
    ONNX's CRD channel order over DCR."""

    name = "top.Depth2Space"
    block_h = integer(1)
    block_w = integer(1)
    is_CRD = flag()
    is_inversed = flag()


@irdl_op_definition
class PadOp(UnaryOp):
    """mode: "constant", "reflect" or "edge"."""

    name = "top.Pad"
    paddings = ints()
    mode = text("constant")
    val = real(0.0)


@irdl_op_definition
class UpsampleOp(UnaryOp):
    """Nearest upsampling of the last two dims by integer factors."""

    name = "top.Upsample"
    scale_h = integer(1)
    scale_w = integer(1)


@irdl_op_definition
class InterpOp(UnaryOp):
    """Resize of the spatial dims (ONNX Resize semantics) to `target_shape`.
    mode: "nearest", "linear", "cubic"; coord_mode: ONNX's
    coordinate_transformation_mode; nearest_mode: ONNX's nearest_mode.
    `scales` (optional, one per dim of `target_shape`) keeps the scale
    factors an ONNX model gave: they, not out/in, map the coordinates."""

    name = "top.Interp"
    target_shape = ints()
    scales = ints()
    mode = text("nearest")
    coord_mode = text("half_pixel")
    nearest_mode = text("round_prefer_floor")
    cubic_coeff_a = real(-0.75)
    exclude_outside = flag()


@irdl_op_definition
class TileOp(UnaryOp):
    name = "top.Tile"
    tile = ints()


@irdl_op_definition
class ExpandOp(UnaryOp):
    """Broadcast to `shape` (numpy rules, as ONNX Expand)."""

    name = "top.Expand"
    shape = ints()


@irdl_op_definition
class GatherOp(TensorOp):
    """numpy.take(input, indices, axis); indices are float-valued integers."""

    name = "top.Gather"
    input = operand_def(AnyTensor)
    indices = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    axis = integer(0)
    traits = traits_def(Pure())


@irdl_op_definition
class ReduceOp(UnaryOp):
    """mode: ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd,
    ReduceL1, ReduceL2, ReduceLogSumExp, ReduceSumSquare."""

    name = "top.Reduce"
    axes = ints()
    keepdims = flag(True)
    mode = text("ReduceMean")


@irdl_op_definition
class ArgOp(UnaryOp):
    """mode: ArgMax or ArgMin; indices as float32."""

    name = "top.Arg"
    axis = integer(0)
    keepdims = flag(True)
    mode = text("ArgMax")
    select_last_index = flag()


@irdl_op_definition
class TopKOp(TensorOp):
    """Results: values, indices (float32)."""

    name = "top.TopK"
    input = operand_def(AnyTensor)
    values = result_def(AnyTensor)
    indices = result_def(AnyTensor)
    axis = integer(-1)
    K = integer(1)
    largest = flag(True)
    sorted = flag(True)
    traits = traits_def(Pure())


# --- recurrent --------------------------------------------------------------------


class RecurrentOp(TensorOp):
    """ONNX layouts: filter [dirs, gates*hidden, input], recurrence
    [dirs, gates*hidden, hidden], bias [dirs, 2*gates*hidden]; input is
    [seq, batch, input] unless `batch_first`."""

    input = operand_def(AnyTensor)
    filter = operand_def(AnyTensor)
    recurrence = operand_def(AnyTensor)
    bias = operand_def(TensorOrNone)
    initial_h = operand_def(TensorOrNone)
    hidden_size = integer()
    bidirectional = flag()
    batch_first = flag()
    traits = traits_def(Pure())


@irdl_op_definition
class LSTMOp(RecurrentOp):
    """Gates in ONNX order (i, o, f, c). Results: Y [seq, dirs, batch, hidden],
    Y_h and Y_c [dirs, batch, hidden]."""

    name = "top.LSTM"
    initial_c = operand_def(TensorOrNone)
    y = result_def(AnyTensor)
    y_h = result_def(AnyTensor)
    y_c = result_def(AnyTensor)


@irdl_op_definition
class GRUOp(RecurrentOp):
    """Gates in ONNX order (z, r, h). Results: Y, Y_h."""

    name = "top.GRU"
    linear_before_reset = flag()
    y = result_def(AnyTensor)
    y_h = result_def(AnyTensor)


TOP_OPS = [
    InputOp,
    WeightOp,
    NoneOp,
    ConvOp,
    DeconvOp,
    MatMulOp,
    MaxPoolOp,
    AvgPoolOp,
    AddOp,
    MulOp,
    MaxOp,
    MinOp,
    SubOp,
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
    SiLUOp,
    GELUOp,
    HardSigmoidOp,
    HardSwishOp,
    MishOp,
    EluOp,
    SoftplusOp,
    TanhOp,
    ExpOp,
    LogOp,
    SqrtOp,
    RsqrtOp,
    ReciprocalOp,
    PowOp,
    ErfOp,
    AbsOp,
    FloorOp,
    CeilOp,
    RoundOp,
    SinOp,
    CosOp,
    SignOp,
    NotOp,
    ClipOp,
    SoftmaxOp,
    CastOp,
    BatchNormOp,
    LayerNormOp,
    InstanceNormOp,
    GroupNormOp,
    LRNOp,
    ConcatOp,
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
    ReduceOp,
    ArgOp,
    TopKOp,
    LSTMOp,
    GRUOp,
]

Top = Dialect("top", TOP_OPS, [])
