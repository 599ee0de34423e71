"""TOP data-movement, indexing and reduction ops."""

from __future__ import annotations

from typing import ClassVar

from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    result_def,
    traits_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from tpuc.dialects.base import AnyTensor, TensorOp
from tpuc.dialects.top import shape_rules_data
from tpuc.dialects.top.base import (
    UnaryOp,
    VariadicOp,
    flag,
    integer,
    ints,
    real,
    text,
)
from tpuc.dialects.traits import (
    F32Operands,
    F32Results,
    FusesRelu,
    HasCanonicalizationPatterns,
    HasShapeRule,
    IndexOperands,
    Untuned,
    ValueMove,
)

# --- data movement ----------------------------------------------------------------


@irdl_op_definition
class ConcatOp(VariadicOp):
    name = "top.Concat"
    traits = traits_def(FusesRelu(), HasShapeRule(shape_rules_data.concat))
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
    traits = traits_def(Pure(), ValueMove(), HasShapeRule(shape_rules_data.split))


@irdl_op_definition
class SliceOp(UnaryOp):
    """input[offset:ends:steps] on every axis (negative steps allowed)."""

    name = "top.Slice"
    traits = traits_def(
        ValueMove(), HasShapeRule(shape_rules_data.slice_), HasCanonicalizationPatterns()
    )
    offset = ints()
    ends = ints()
    steps = ints()


@irdl_op_definition
class ReshapeOp(UnaryOp):
    """`shape` may hold one -1; otherwise it is the output shape."""

    name = "top.Reshape"
    traits = traits_def(
        ValueMove(), HasShapeRule(shape_rules_data.reshape), HasCanonicalizationPatterns()
    )
    shape = ints()


@irdl_op_definition
class FlattenOp(UnaryOp):
    """Merge dims [start_dim, end_dim] into one."""

    name = "top.Flatten"
    traits = traits_def(
        ValueMove(), HasShapeRule(shape_rules_data.flatten), HasCanonicalizationPatterns()
    )
    start_dim = integer(1)
    end_dim = integer(-1)


@irdl_op_definition
class SqueezeOp(UnaryOp):
    name = "top.Squeeze"
    traits = traits_def(
        ValueMove(), HasShapeRule(shape_rules_data.squeeze), HasCanonicalizationPatterns()
    )
    axes = ints()


@irdl_op_definition
class UnsqueezeOp(UnaryOp):
    name = "top.Unsqueeze"
    traits = traits_def(
        ValueMove(), HasShapeRule(shape_rules_data.unsqueeze), HasCanonicalizationPatterns()
    )
    axes = ints()


@irdl_op_definition
class PermuteOp(UnaryOp):
    name = "top.Permute"
    traits = traits_def(
        ValueMove(), HasShapeRule(shape_rules_data.permute), HasCanonicalizationPatterns()
    )
    order = ints()


@irdl_op_definition
class Depth2SpaceOp(UnaryOp):
    """DepthToSpace (or SpaceToDepth when `is_inversed`); `is_CRD` picks
    ONNX's CRD channel order over DCR."""

    name = "top.Depth2Space"
    traits = traits_def(ValueMove(), HasShapeRule(shape_rules_data.depth2space))
    block_h = integer(1)
    block_w = integer(1)
    is_CRD = flag()
    is_inversed = flag()


@irdl_op_definition
class PadOp(UnaryOp):
    """mode: "constant", "reflect" or "edge"."""

    name = "top.Pad"
    traits = traits_def(HasShapeRule(shape_rules_data.pad), HasCanonicalizationPatterns())
    paddings = ints()
    mode = text("constant")
    val = real(0.0)


@irdl_op_definition
class UpsampleOp(UnaryOp):
    """Nearest upsampling of the last two dims by integer factors."""

    name = "top.Upsample"
    traits = traits_def(
        ValueMove(), HasShapeRule(shape_rules_data.upsample), HasCanonicalizationPatterns()
    )
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
    traits = traits_def(HasShapeRule(shape_rules_data.interp))
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
    traits = traits_def(
        ValueMove(), HasShapeRule(shape_rules_data.tile), HasCanonicalizationPatterns()
    )
    tile = ints()


@irdl_op_definition
class ExpandOp(UnaryOp):
    """Broadcast to `shape` (numpy rules, as ONNX Expand)."""

    name = "top.Expand"
    traits = traits_def(
        ValueMove(), HasShapeRule(shape_rules_data.expand), HasCanonicalizationPatterns()
    )
    shape = ints()


@irdl_op_definition
class GatherOp(TensorOp):
    """numpy.take(input, indices, axis); indices are float-valued integers."""

    name = "top.Gather"
    input = operand_def(AnyTensor)
    indices = operand_def(AnyTensor)
    output = result_def(AnyTensor)
    axis = integer(0)
    traits = traits_def(
        Pure(), F32Operands(1), IndexOperands(1), HasShapeRule(shape_rules_data.gather)
    )


@irdl_op_definition
class ReduceOp(UnaryOp):
    """A reduction over `axes`; `mode` is one of MODES (ONNX's names)."""

    name = "top.Reduce"
    traits = traits_def(HasShapeRule(shape_rules_data.reduce))
    axes = ints()
    keepdims = flag(True)
    mode = text("ReduceMean")

    MODES: ClassVar[tuple[str, ...]] = (
        "ReduceMean",
        "ReduceSum",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceSumSquare",
    )

    def verify_(self) -> None:
        if self.value("mode") not in self.MODES:
            raise VerifyException(
                f"top.Reduce mode {self.value('mode')!r} is not one of {self.MODES}"
            )


@irdl_op_definition
class ArgOp(UnaryOp):
    """mode: ArgMax or ArgMin; indices as float32."""

    name = "top.Arg"
    traits = traits_def(F32Results(0), Untuned(), HasShapeRule(shape_rules_data.arg))
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
    traits = traits_def(Pure(), F32Results(1), Untuned(), HasShapeRule(shape_rules_data.topk))
