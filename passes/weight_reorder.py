"""weight-reorder: the chip's weight layouts (TPU_LOWERED -> TPU_REORDERED).

- tpu.Conv2D with a 2-D kernel: the filter [oc, ic/g, kh, kw] becomes the
  weight `<conv>_filter_reordered` of shape [1, oc, ic/g, kh·kw], TPU-MLIR's
  form (same element type, same bytes in the same order).
- INT8 tpu.Conv2D / tpu.Deconv (quantized input, with an int8 or a float
  epilogue): bias, multiplier and rshift become one i32 weight
  `<conv>_coeff_merged` of shape [1, oc, 1, 3] holding [bias (0 without
  one), multiplier, rshift] per output channel (per-tensor values repeated).
  It replaces the bias operand, and the op gets `coeff_merged = true`; the
  multiplier/rshift attributes stay for readers of the IR.
- INT8 tpu.MatMul with per-column multipliers or rshifts: the same merge,
  [1, n, 1, 3] per column of the result's last axis (so its engine-level
  command takes them as tensors, docs/isa.md).

The TPU interpreter reads the lowered layouts, so it runs modules from
before this pass; codegen reads the reordered ones. New weights go into the
module's WeightStore; replaced weights nothing reads any more are erased
from the IR and the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerType, ModuleOp, Signedness, TensorType, i32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from tpuc.base.errors import TpucError
from tpuc.base.registry import Registry
from tpuc.dialects import top, tpu
from tpuc.dialects.base import TensorOp, shape_of
from tpuc.dialects.quant import UniformQuantizedType
from tpuc.ir.core import inline_weight
from tpuc.ir.weights import WeightStore, weights_of

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
FILTER, BIAS = 1, 2  # operand indices of Conv2D / Deconv


class Reorderer:
    """What the rules share: the store, and the weights they replaced."""

    def __init__(self, module: ModuleOp, store: WeightStore):
        self.module = module
        self.store = store
        self.replaced: list[top.WeightOp] = []

    def data(self, op: TensorOp, index: int) -> np.ndarray:
        """The stored form (int8, int32, f16, bf16 bits …) of weight operand `index`."""
        owner = op.operands[index].owner
        if not isinstance(owner, top.WeightOp):
            raise TpucError(f"{op.name} '{op.names[0]}': operand {index} is not a weight")
        name = owner.names[0]
        element = _element(owner.results[0])
        inline = inline_weight(owner, element)
        if inline is not None:
            return inline.astype(_integer_dtype(element) or inline.dtype)
        if name not in self.store:
            raise TpucError(f"weight '{name}' has no data (inline value or weight file)")
        return np.asarray(self.store[name])

    def replace(self, op: TensorOp, index: int, base: str, array, element: Attribute) -> None:
        """Operand `index` of `op` becomes a new weight holding `array`."""
        name = self.store.add(base, array)
        weight = top.WeightOp.make([], name, result_types=[TensorType(element, array.shape)])
        Rewriter.insert_op(weight, InsertPoint.before(op))
        old = op.operands[index].owner
        operands = list(op.operands)
        operands[index] = weight.results[0]
        op.operands = operands
        if isinstance(old, top.WeightOp):
            self.replaced.append(old)

    def erase_replaced(self) -> None:
        """Drop replaced weights nothing reads, from the IR and the store."""
        for old in dict.fromkeys(self.replaced):
            if old.results[0].uses:
                continue
            Rewriter.erase_op(old)
        live = {op.names[0] for op in self.module.walk() if isinstance(op, top.WeightOp)}
        for old in dict.fromkeys(self.replaced):
            name = old.names[0]
            if name not in live:
                self.store.pop(name, None)


Rule = Callable[[Reorderer, TensorOp], None]
RULES: Registry[type[Operation], Rule] = Registry("weight-reorder rules")
"""Op class -> the layout rules applied to each op of that class, highest
priority first."""


def reorder(*classes: type[Operation], priority: int = 0) -> Callable[[Rule], Rule]:
    """Register a layout rule of each op class."""
    return RULES.register(*classes, priority=priority)


def _element(value: SSAValue) -> Attribute:
    t = value.type
    return t.element_type if isinstance(t, TensorType) else t


def _integer_dtype(element: Attribute) -> np.dtype | None:
    """The numpy dtype npz files use for an integer element type."""
    if not isinstance(element, IntegerType):
        return None
    unsigned = element.signedness.data == Signedness.UNSIGNED
    return np.dtype(f"{'u' if unsigned else 'i'}{max(1, element.width.data // 8)}")


def _label(op: TensorOp) -> str:
    return f"{op.name} '{op.names[0]}'"


def out_channels(op: TensorOp) -> int:
    shape = shape_of(op.results[0])
    if shape is None or len(shape) < 2 or shape[1] < 0:
        raise TpucError(f"{_label(op)}: output channels unknown (shape {shape})")
    return shape[1]


# --- conv filters -----------------------------------------------------------------------


def lowered_filter_shape(op: TensorOp) -> tuple[int, ...] | None:
    """[oc, ic/g, kh, kw] for a 2-D Conv2D with known shapes, else None."""
    x, y = shape_of(op.operands[0]), shape_of(op.results[0])
    kernel = op.value("kernel_shape") or []
    if x is None or y is None or len(x) != 4 or len(kernel) != 2:
        return None
    group = int(op.value("group") or 1)
    return (y[1], x[1] // group, *kernel)


@reorder(tpu.Conv2DOp, priority=1)  # before merge_coeff
def conv_filter(rw: Reorderer, op: TensorOp) -> None:
    """[oc, ic/g, kh, kw] -> [1, oc, ic/g, kh·kw] (a filter already in that
    form, or not a weight, is left alone)."""
    filt = op.operands[FILTER]
    expected = lowered_filter_shape(op)
    if expected is None or shape_of(filt) != expected:
        return
    if not isinstance(filt.owner, top.WeightOp):
        return
    oc, icg, kh, kw = expected
    data = rw.data(op, FILTER).reshape(1, oc, icg, kh * kw)
    rw.replace(op, FILTER, f"{op.names[0]}_filter_reordered", data, _element(filt))


# --- merged bias / requant coefficients -------------------------------------------------


def per_channel(op: TensorOp, values, channels: int, what: str) -> np.ndarray:
    """One value per output channel (a single value is repeated), int64."""
    array = np.asarray(values, np.int64).reshape(-1)
    if array.size not in (1, channels):
        raise TpucError(f"{_label(op)}: {what} has {array.size} values for {channels} channels")
    if array.size and (array.min() < INT32_MIN or array.max() > INT32_MAX):
        raise TpucError(f"{_label(op)}: {what} does not fit int32")
    return np.broadcast_to(array, (channels,))


def bias_values(rw: Reorderer, op: TensorOp, channels: int) -> np.ndarray:
    owner = op.operands[BIAS].owner
    if isinstance(owner, top.NoneOp):
        return np.zeros(channels, np.int64)
    if not isinstance(owner, top.WeightOp):
        raise TpucError(f"{_label(op)}: an INT8 conv needs a weight bias to merge")
    data = rw.data(op, BIAS)
    if data.dtype.kind not in "iu":
        raise TpucError(f"{_label(op)}: bias '{owner.names[0]}' holds {data.dtype}, not int32")
    return per_channel(op, data, channels, "bias")


def merged_coeff(rw: Reorderer, op: TensorOp) -> np.ndarray:
    """[1, oc, 1, 3] int32: bias, multiplier, rshift per output channel."""
    oc = out_channels(op)
    columns = (
        bias_values(rw, op, oc),
        per_channel(op, op.value("multiplier") or [1], oc, "multiplier"),
        per_channel(op, op.value("rshift") or [0], oc, "rshift"),
    )
    return np.stack(columns, axis=-1).astype(np.int32).reshape(1, oc, 1, 3)


@reorder(tpu.Conv2DOp, tpu.DeconvOp)
def merge_coeff(rw: Reorderer, op: TensorOp) -> None:
    """INT8 convs only (quantized input), once."""
    if not isinstance(_element(op.operands[0]), UniformQuantizedType):
        return
    if op.value("coeff_merged"):
        return
    coeff = merged_coeff(rw, op)
    rw.replace(op, BIAS, f"{op.names[0]}_coeff_merged", coeff, i32)
    op.set_value("coeff_merged", True)


@reorder(tpu.MatMulOp)
def merge_matmul_coeff(rw: Reorderer, op: TensorOp) -> None:
    """INT8 matmuls with per-column multipliers or rshifts (a fixed-layout
    command block holds only per-tensor ones): bias, multiplier and rshift
    become `<matmul>_coeff_merged` [1, n, 1, 3] per column of the last axis,
    as for convs. A matmul with an activation or a float bias is left alone."""
    if not isinstance(_element(op.operands[0]), UniformQuantizedType):
        return
    if op.value("coeff_merged") or len(op.operands) != 3:
        return
    if len(op.value("multiplier") or [1]) <= 1 and len(op.value("rshift") or [0]) <= 1:
        return
    owner = op.operands[BIAS].owner
    if not isinstance(owner, top.NoneOp | top.WeightOp):
        return
    if isinstance(owner, top.WeightOp) and rw.data(op, BIAS).dtype.kind not in "iu":
        return
    shape = shape_of(op.results[0])
    if not shape or shape[-1] < 1:
        return
    n = shape[-1]
    if isinstance(owner, top.WeightOp) and rw.data(op, BIAS).size not in (1, n):
        return
    columns = (
        bias_values(rw, op, n),
        per_channel(op, op.value("multiplier") or [1], n, "multiplier"),
        per_channel(op, op.value("rshift") or [0], n, "rshift"),
    )
    coeff = np.stack(columns, axis=-1).astype(np.int32).reshape(1, n, 1, 3)
    rw.replace(op, BIAS, f"{op.names[0]}_coeff_merged", coeff, i32)
    op.set_value("coeff_merged", True)


# --- the pass -----------------------------------------------------------------------------


def reorder_weights(module: ModuleOp, store: WeightStore) -> None:
    """Apply every rule to every op of `module`, then drop dead weights."""
    rw = Reorderer(module, store)
    for op in list(module.walk()):
        for rule in RULES.all(type(op)):
            rule(rw, op)  # type: ignore[arg-type]
    rw.erase_replaced()


@dataclass(frozen=True)
class WeightReorderPass(ModulePass):
    """TPU_LOWERED -> TPU_REORDERED: the chip's weight layouts."""

    name = "weight-reorder"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.base.module_state import ModuleState, advance_state, require_state

        require_state(op, self.name, ModuleState.TPU_LOWERED)
        reorder_weights(op, weights_of(op))
        advance_state(op, ModuleState.TPU_REORDERED)


__all__ = ["RULES", "WeightReorderPass", "merged_coeff", "reorder", "reorder_weights"]
