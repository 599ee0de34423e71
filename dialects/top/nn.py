"""TOP ops of the network structure: graph boundary, convolution, matmul,
pooling, normalization and recurrent layers."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    NoneType,
    TensorType,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from tpuc.dialects.base import AnyTensor, TensorOp, TensorOrNone
from tpuc.dialects.top import shape_rules, shape_rules_nn
from tpuc.dialects.top.base import (
    ReluFusedOp,
    UnaryOp,
    flag,
    integer,
    ints,
    real,
    text,
)
from tpuc.dialects.traits import (
    F32Operands,
    FusesRelu,
    HasCanonicalizationPatterns,
    HasShapeRule,
    Leaf,
    Untuned,
    WeightAxes,
)

# --- graph boundary -------------------------------------------------------------


@irdl_op_definition
class InputOp(UnaryOp):
    """A network input, with the preprocessing that produced it."""

    name = "top.Input"
    traits = traits_def(Leaf(), Untuned(), HasShapeRule(shape_rules.same_shape))
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
    traits = traits_def(Pure(), Leaf())


@irdl_op_definition
class NoneOp(IRDLOperation):
    """Stands for an absent optional operand."""

    name = "top.None"
    output = result_def(NoneType)
    traits = traits_def(Pure(), Leaf())


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

    def verify_(self) -> None:
        """kernel_shape agrees with the filter: a module edited by hand (or a
        damaged one) would otherwise carry a kernel_shape that no pass checks
        again into the bmodel."""
        given, filter_type = self.value("kernel_shape"), self.filter.type
        if given is None or not isinstance(filter_type, TensorType):
            return
        kernel = list(filter_type.get_shape()[2:])
        if list(given) != kernel:
            label = self.value("name")
            raise VerifyException(
                f"{self.name} '{label}': kernel_shape {list(given)} does not match "
                f"the filter's {kernel}"
            )


@irdl_op_definition
class ConvOp(ConvLikeOp):
    """N-d convolution; filter is [oc, ic/group, *kernel]."""

    name = "top.Conv"
    traits = traits_def(
        FusesRelu(), F32Operands(2), WeightAxes({1: 0}), HasShapeRule(shape_rules_nn.conv)
    )


@irdl_op_definition
class DeconvOp(ConvLikeOp):
    """Transposed convolution; filter is [ic, oc/group, *kernel]."""

    name = "top.Deconv"
    traits = traits_def(
        FusesRelu(), F32Operands(2), WeightAxes({1: None}), HasShapeRule(shape_rules_nn.deconv)
    )
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
    traits = traits_def(
        Pure(),
        FusesRelu(),
        F32Operands(2),
        WeightAxes({1: None}),
        HasShapeRule(shape_rules_nn.matmul),
    )


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
    traits = traits_def(FusesRelu(), HasShapeRule(shape_rules_nn.pool))


@irdl_op_definition
class AvgPoolOp(PoolOp):
    name = "top.AvgPool"
    traits = traits_def(FusesRelu(), HasShapeRule(shape_rules_nn.pool))
    count_include_pad = flag()


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
    traits = traits_def(
        Pure(), FusesRelu(), HasShapeRule(shape_rules.batch_norm), HasCanonicalizationPatterns()
    )


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
    traits = traits_def(HasShapeRule(shape_rules.layer_norm))
    axis = integer(-1)
    normalized_shape = ints()


@irdl_op_definition
class InstanceNormOp(AffineNormOp):
    name = "top.InstanceNorm"
    traits = traits_def(HasShapeRule(shape_rules.per_channel_affine))


@irdl_op_definition
class GroupNormOp(AffineNormOp):
    name = "top.GroupNorm"
    traits = traits_def(HasShapeRule(shape_rules.group_norm))
    num_groups = integer(1)


@irdl_op_definition
class LRNOp(UnaryOp):
    name = "top.LRN"
    traits = traits_def(HasShapeRule(shape_rules.same_shape))
    size = integer(1)
    alpha = real(1e-4)
    beta = real(0.75)
    bias = real(1.0)


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
    traits = traits_def(HasShapeRule(shape_rules_nn.lstm))
    # all operands again, in order: xDSL lists a subclass's own fields first
    input = operand_def(AnyTensor)
    filter = operand_def(AnyTensor)
    recurrence = operand_def(AnyTensor)
    bias = operand_def(TensorOrNone)
    initial_h = operand_def(TensorOrNone)
    initial_c = operand_def(TensorOrNone)
    y = result_def(AnyTensor)
    y_h = result_def(AnyTensor)
    y_c = result_def(AnyTensor)


@irdl_op_definition
class GRUOp(RecurrentOp):
    """Gates in ONNX order (z, r, h). Results: Y, Y_h."""

    name = "top.GRU"
    traits = traits_def(HasShapeRule(shape_rules_nn.gru))
    linear_before_reset = flag()
    y = result_def(AnyTensor)
    y_h = result_def(AnyTensor)
