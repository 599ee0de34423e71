"""TPU ops that mirror a TOP op field for field and add nothing: float-only
ops and data movement (see `ops` for what they mean on quantized tensors).
Each class takes its operands, results and attributes from the TOP op it
names (`tpu_op(top.XOp)`)."""

from __future__ import annotations

from xdsl.irdl import traits_def

from tpuc.dialects import top
from tpuc.dialects.base import TensorOp
from tpuc.dialects.tpu.mirror import tpu_op
from tpuc.dialects.traits import InPlaceView


@tpu_op(top.MaxOp)
class MaxOp(TensorOp):
    """The TPU form of top.Max (same attributes)."""

    name = "tpu.Max"


@tpu_op(top.MinOp)
class MinOp(TensorOp):
    """The TPU form of top.Min (same attributes)."""

    name = "tpu.Min"


@tpu_op(top.DivOp)
class DivOp(TensorOp):
    """The TPU form of top.Div (same attributes)."""

    name = "tpu.Div"


@tpu_op(top.PowTensorOp)
class PowTensorOp(TensorOp):
    """The TPU form of top.PowTensor (same attributes)."""

    name = "tpu.PowTensor"


@tpu_op(top.CompareOp)
class CompareOp(TensorOp):
    """The TPU form of top.Compare (same attributes)."""

    name = "tpu.Compare"


@tpu_op(top.AddConstOp)
class AddConstOp(TensorOp):
    """The TPU form of top.AddConst (same attributes)."""

    name = "tpu.AddConst"


@tpu_op(top.SubConstOp)
class SubConstOp(TensorOp):
    """The TPU form of top.SubConst (same attributes)."""

    name = "tpu.SubConst"


@tpu_op(top.MulConstOp)
class MulConstOp(TensorOp):
    """The TPU form of top.MulConst (same attributes)."""

    name = "tpu.MulConst"


@tpu_op(top.CompareConstOp)
class CompareConstOp(TensorOp):
    """The TPU form of top.CompareConst (same attributes)."""

    name = "tpu.CompareConst"


@tpu_op(top.WhereOp)
class WhereOp(TensorOp):
    """The TPU form of top.Where (same attributes)."""

    name = "tpu.Where"


@tpu_op(top.ScaleOp)
class ScaleOp(TensorOp):
    """The TPU form of top.Scale (same attributes)."""

    name = "tpu.Scale"


@tpu_op(top.ReluOp)
class ReluOp(TensorOp):
    """The TPU form of top.Relu (same attributes)."""

    name = "tpu.Relu"


@tpu_op(top.LeakyReluOp)
class LeakyReluOp(TensorOp):
    """The TPU form of top.LeakyRelu (same attributes)."""

    name = "tpu.LeakyRelu"


@tpu_op(top.PReluOp)
class PReluOp(TensorOp):
    """The TPU form of top.PRelu (same attributes)."""

    name = "tpu.PRelu"


@tpu_op(top.SigmoidOp)
class SigmoidOp(TensorOp):
    """The TPU form of top.Sigmoid (same attributes)."""

    name = "tpu.Sigmoid"


@tpu_op(top.GELUOp)
class GELUOp(TensorOp):
    """The TPU form of top.GELU (same attributes)."""

    name = "tpu.GELU"


@tpu_op(top.HardSigmoidOp)
class HardSigmoidOp(TensorOp):
    """The TPU form of top.HardSigmoid (same attributes)."""

    name = "tpu.HardSigmoid"


@tpu_op(top.EluOp)
class EluOp(TensorOp):
    """The TPU form of top.Elu (same attributes)."""

    name = "tpu.Elu"


@tpu_op(top.ReciprocalOp)
class ReciprocalOp(TensorOp):
    """The TPU form of top.Reciprocal (same attributes)."""

    name = "tpu.Reciprocal"


@tpu_op(top.PowOp)
class PowOp(TensorOp):
    """The TPU form of top.Pow (same attributes)."""

    name = "tpu.Pow"


@tpu_op(top.NotOp)
class NotOp(TensorOp):
    """The TPU form of top.Not (same attributes)."""

    name = "tpu.Not"


@tpu_op(top.ClipOp)
class ClipOp(TensorOp):
    """The TPU form of top.Clip (same attributes)."""

    name = "tpu.Clip"


@tpu_op(top.SoftmaxOp)
class SoftmaxOp(TensorOp):
    """The TPU form of top.Softmax (same attributes)."""

    name = "tpu.Softmax"


@tpu_op(top.BatchNormOp)
class BatchNormOp(TensorOp):
    """The TPU form of top.BatchNorm (same attributes)."""

    name = "tpu.BatchNorm"


@tpu_op(top.LayerNormOp)
class LayerNormOp(TensorOp):
    """The TPU form of top.LayerNorm (same attributes)."""

    name = "tpu.LayerNorm"


@tpu_op(top.InstanceNormOp)
class InstanceNormOp(TensorOp):
    """The TPU form of top.InstanceNorm (same attributes)."""

    name = "tpu.InstanceNorm"


@tpu_op(top.GroupNormOp)
class GroupNormOp(TensorOp):
    """The TPU form of top.GroupNorm (same attributes)."""

    name = "tpu.GroupNorm"


@tpu_op(top.LRNOp)
class LRNOp(TensorOp):
    """The TPU form of top.LRN (same attributes)."""

    name = "tpu.LRN"


@tpu_op(top.SplitOp)
class SplitOp(TensorOp):
    """The TPU form of top.Split (same attributes)."""

    name = "tpu.Split"


@tpu_op(top.SliceOp)
class SliceOp(TensorOp):
    """The TPU form of top.Slice (same attributes)."""

    name = "tpu.Slice"


@tpu_op(top.ReshapeOp)
class ReshapeOp(TensorOp):
    """The TPU form of top.Reshape (same attributes)."""

    name = "tpu.Reshape"
    traits = traits_def(InPlaceView())


@tpu_op(top.FlattenOp)
class FlattenOp(TensorOp):
    """The TPU form of top.Flatten (same attributes)."""

    name = "tpu.Flatten"
    traits = traits_def(InPlaceView())


@tpu_op(top.SqueezeOp)
class SqueezeOp(TensorOp):
    """The TPU form of top.Squeeze (same attributes)."""

    name = "tpu.Squeeze"
    traits = traits_def(InPlaceView())


@tpu_op(top.UnsqueezeOp)
class UnsqueezeOp(TensorOp):
    """The TPU form of top.Unsqueeze (same attributes)."""

    name = "tpu.Unsqueeze"
    traits = traits_def(InPlaceView())


@tpu_op(top.PermuteOp)
class PermuteOp(TensorOp):
    """The TPU form of top.Permute (same attributes)."""

    name = "tpu.Permute"


@tpu_op(top.Depth2SpaceOp)
class Depth2SpaceOp(TensorOp):
    """The TPU form of top.Depth2Space (same attributes)."""

    name = "tpu.Depth2Space"


@tpu_op(top.PadOp)
class PadOp(TensorOp):
    """The TPU form of top.Pad (same attributes)."""

    name = "tpu.Pad"


@tpu_op(top.UpsampleOp)
class UpsampleOp(TensorOp):
    """The TPU form of top.Upsample (same attributes)."""

    name = "tpu.Upsample"


@tpu_op(top.InterpOp)
class InterpOp(TensorOp):
    """The TPU form of top.Interp (same attributes)."""

    name = "tpu.Interp"


@tpu_op(top.TileOp)
class TileOp(TensorOp):
    """The TPU form of top.Tile (same attributes)."""

    name = "tpu.Tile"


@tpu_op(top.ExpandOp)
class ExpandOp(TensorOp):
    """The TPU form of top.Expand (same attributes)."""

    name = "tpu.Expand"


@tpu_op(top.GatherOp)
class GatherOp(TensorOp):
    """The TPU form of top.Gather (same attributes)."""

    name = "tpu.Gather"


@tpu_op(top.ArgOp)
class ArgOp(TensorOp):
    """The TPU form of top.Arg (same attributes)."""

    name = "tpu.Arg"


@tpu_op(top.TopKOp)
class TopKOp(TensorOp):
    """The TPU form of top.TopK (same attributes)."""

    name = "tpu.TopK"


@tpu_op(top.LSTMOp)
class LSTMOp(TensorOp):
    """The TPU form of top.LSTM (same attributes)."""

    name = "tpu.LSTM"


@tpu_op(top.GRUOp)
class GRUOp(TensorOp):
    """The TPU form of top.GRU (same attributes)."""

    name = "tpu.GRU"
