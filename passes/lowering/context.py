"""What a lowering rule sees: the TOP op, its mode, operands converted to
that mode, result types, and weights.

`LoweringState` is shared by all ops of one module (chip, calibrated ranges,
the casts already made); `Lowering` is the view for one op. Casts are
inserted here, on demand, wherever a producer's precision differs from what
the consuming op runs in: that is the only place they come from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerType,
    Signedness,
    TensorType,
    bf16,
    f16,
    f32,
    i32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.rewriter import Rewriter

from tpuc.base.errors import TpucError
from tpuc.base.numerics import bf16_bits, quantize, to_bf16, to_f16
from tpuc.dialects import top, tpu
from tpuc.dialects.base import TensorOp
from tpuc.dialects.quant import CalibratedQuantizedType, UniformQuantizedType
from tpuc.ir.core import element_of
from tpuc.ir.qparams import QuantParams, from_calibrated
from tpuc.ir.weights import WeightStore, read_weight
from tpuc.target.chips import Chip

si8 = IntegerType(8, Signedness.SIGNED)
FLOAT_TYPES: dict[str, Attribute] = {"F32": f32, "F16": f16, "BF16": bf16}


def type_tag(element: Attribute) -> str:
    """Short name of an element type, for the names of casts and weights."""
    if isinstance(element, UniformQuantizedType):
        return "i8" if element.is_signed else "u8"
    if isinstance(element, Float16Type):
        return "f16"
    if isinstance(element, BFloat16Type):
        return "bf16"
    if isinstance(element, Float32Type):
        return "f32"
    return str(element)


def round_to(array: np.ndarray, element: Attribute) -> np.ndarray:
    """float32 values rounded to what `element` can hold."""
    if isinstance(element, Float16Type):
        return to_f16(array)
    if isinstance(element, BFloat16Type):
        return to_bf16(array)
    return np.asarray(array, np.float32)


def stored_float(array: np.ndarray, element: Attribute) -> np.ndarray:
    """How a float weight of `element` type is kept in the npz."""
    if isinstance(element, Float16Type):
        return np.asarray(array, np.float32).astype(np.float16)
    if isinstance(element, BFloat16Type):
        return bf16_bits(array)
    return np.asarray(array, np.float32)


@dataclass
class LoweringState:
    """Module-wide facts and caches of one convert-top-to-tpu run."""

    chip: Chip
    asymmetric: bool
    store: WeightStore
    calibrated: dict[str, CalibratedQuantizedType]  # TOP tensor name -> its range
    names: set[str]  # tensor names in use (new casts and weights get fresh ones)
    casts: dict[tuple[SSAValue, Attribute], SSAValue] = field(default_factory=dict)
    converted_weights: dict[tuple[SSAValue, Attribute], SSAValue] = field(default_factory=dict)
    replaced: dict[SSAValue, SSAValue] = field(default_factory=dict)  # TOP value -> lowered
    regions: dict = field(default_factory=dict)  # filled by preparers (int8_region)
    modes: dict[Operation, str] = field(default_factory=dict)  # TOP op -> its mode
    float_epilogue: bool = True  # the pass's option (ConvertTopToTpuPass.float_epilogue)

    def fresh_name(self, base: str) -> str:
        name, index = base, 1
        while name in self.names or name in self.store:
            name, index = f"{base}_{index}", index + 1
        self.names.add(name)
        return name

    def quant_params(self, tensor: str) -> QuantParams:
        """Quantization of a TOP tensor from its calibrated range."""
        element = self.calibrated.get(tensor)
        if element is None:
            raise TpucError(
                f"tensor '{tensor}' has no calibrated range; INT8 needs a calibration table "
                "(model_deploy.py --calibration_table)"
            )
        return from_calibrated(element, self.asymmetric)


class Lowering:
    """One TOP op being lowered in `mode`; rules build TPU ops through it."""

    def __init__(self, state: LoweringState, op: TensorOp, mode: str):
        self.state = state
        self.op = op
        self.mode = mode

    # --- facts ---------------------------------------------------------------------

    @property
    def chip(self) -> Chip:
        return self.state.chip

    @property
    def asymmetric(self) -> bool:
        return self.state.asymmetric

    @property
    def is_int8(self) -> bool:
        return self.mode == "INT8"

    @property
    def float_type(self) -> Attribute:
        return FLOAT_TYPES[self.mode]

    def shape(self, index: int = 0) -> tuple[int, ...]:
        t = self.op.results[index].type
        if not isinstance(t, TensorType):
            raise TpucError(f"{self.op.name} '{self.op.names[0]}': result has no static shape")
        return tuple(t.get_shape())

    def operand_shape(self, index: int) -> tuple[int, ...]:
        t = self.op.operands[index].type
        return tuple(t.get_shape()) if isinstance(t, TensorType) else ()

    # --- weights ---------------------------------------------------------------------

    def is_weight(self, index: int) -> bool:
        return isinstance(self.op.operands[index].owner, top.WeightOp)

    def is_none(self, index: int) -> bool:
        return isinstance(self.op.operands[index].owner, top.NoneOp)

    def weight(self, index: int) -> np.ndarray:
        """The float32 data of weight operand `index`."""
        owner = self.op.operands[index].owner
        if not isinstance(owner, top.WeightOp):
            raise TpucError(f"{self.op.name} '{self.op.names[0]}': operand {index} is not a weight")
        return np.asarray(read_weight(owner), np.float32)

    def add_weight(self, suffix: str, array: np.ndarray, element: Attribute) -> SSAValue:
        """A new `top.Weight` named `<op name>_<suffix>` holding `array`
        (already in its stored form: int8, int32, float16, bf16 bits …)."""
        name = self.state.fresh_name(f"{self.op.names[0]}_{suffix}")
        self.state.store[name] = np.require(array, requirements="C")
        weight = top.WeightOp.make([], name, result_types=[TensorType(element, array.shape)])
        self._insert(weight)
        return weight.results[0]

    def float_weight(self, index: int, element: Attribute | None = None) -> SSAValue:
        """Weight operand `index` as `element` (default: this op's float type);
        f32 keeps the original weight, others get one rounded copy per type."""
        value = self.op.operands[index]
        element = element or self.float_type
        if isinstance(element, Float32Type):
            return value
        key = (value, element)
        if key not in self.state.converted_weights:
            owner = value.owner
            assert isinstance(owner, top.WeightOp)
            base = f"{owner.names[0]}_{type_tag(element)}"
            name = self.state.fresh_name(base)
            data = round_to(self.weight(index), element)
            self.state.store[name] = stored_float(data, element)
            weight = top.WeightOp.make([], name, result_types=[TensorType(element, data.shape)])
            Rewriter.insert_op(weight, _before(owner))
            self.state.converted_weights[key] = weight.results[0]
        return self.state.converted_weights[key]

    def int_weight(self, suffix: str, array: np.ndarray, dtype: str) -> SSAValue:
        """Integer weight (dtype "int8" -> si8, "int32" -> i32)."""
        element = si8 if dtype == "int8" else i32
        return self.add_weight(suffix, np.asarray(array, dtype), element)

    # --- operands ------------------------------------------------------------------

    def operand(self, index: int) -> SSAValue:
        """Operand `index` in this op's precision: a Cast is inserted (once per
        value and type) when its producer runs in another one. Weights in
        float modes are converted copies; in INT8, quantized per tensor."""
        value = self.op.operands[index]
        owner = value.owner
        if isinstance(owner, top.NoneOp):
            return value
        if isinstance(owner, top.WeightOp):
            return self.float_weight(index) if not self.is_int8 else self._int8_weight(index)
        return self.cast(value, self.wanted_type(value))

    def wanted_type(self, value: SSAValue) -> Attribute:
        """The element type an activation must have to be read in this mode."""
        if not self.is_int8:
            return self.float_type
        current = element_of(value)
        if isinstance(current, UniformQuantizedType):
            return current
        return self.state.quant_params(producer_name(value)).element_type()

    def quant(self, index: int) -> QuantParams:
        """Quantization of operand `index` as this op reads it (INT8)."""
        return QuantParams.of(self.wanted_type(self.op.operands[index]))

    def cast(self, value: SSAValue, element: Attribute) -> SSAValue:
        """`value` converted to `element` through a shared tpu.Cast."""
        if element_of(value) == element:
            return value
        key = (value, element)
        if key not in self.state.casts:
            shape = value.type.get_shape()  # type: ignore[union-attr]
            name = self.state.fresh_name(f"{producer_name(value)}_{type_tag(element)}")
            cast = tpu.CastOp.make([value], name, result_types=[TensorType(element, shape)])
            Rewriter.insert_op(cast, _after(value))
            self.state.casts[key] = cast.results[0]
        return self.state.casts[key]

    def _int8_weight(self, index: int) -> SSAValue:
        """A weight read as an activation: int8, symmetric, per tensor."""
        data = self.weight(index)
        threshold = float(np.abs(data).max(initial=0.0)) or 1e-5
        params = QuantParams(threshold / 127.0, 0, -128, 127)
        q = quantize(data, params.scale, 0, -127, 127).astype(np.int8)
        return self.add_weight(f"w{index}_i8", q, params.element_type())

    # --- results -------------------------------------------------------------------

    def out_quant(self, index: int = 0) -> QuantParams:
        """Quantization of result `index` from its calibrated range."""
        return self.state.quant_params(self.op.names[index])

    def result_type(self, index: int = 0, element: Attribute | None = None) -> TensorType:
        """Result `index` with this mode's element type (or `element`)."""
        if element is None:
            element = self.out_quant(index).element_type() if self.is_int8 else self.float_type
        return TensorType(element, self.shape(index))

    def float_epilogue(self) -> Attribute | None:
        """The float type an INT8 conv/matmul should dequantize its int32
        accumulator to, when the chip can and every reader is an op running
        in a float mode: requantizing to int8 only to cast back would throw
        away the accumulator's precision. None when the result must stay
        quantized (an INT8 reader, or a function output: INT8 models return
        their int8 results, as TPU-MLIR's do)."""
        if not self.chip.float_epilogue:
            return None
        if not self.state.float_epilogue and not isinstance(self.op, top.MatMulOp):
            return None  # the pass's option: convolutions requantize (a matmul keeps it)
        users = [use.operation for value in self.op.results for use in value.uses]
        readers = [self.state.modes.get(u, "INT8") for u in users]  # outputs stay INT8
        if not readers or "INT8" in readers:
            return None
        return FLOAT_TYPES[readers[0]]

    def build(
        self,
        cls: type[TensorOp],
        operands: Sequence[SSAValue],
        attrs: dict[str, Any] | None = None,
        result_types: Sequence[Attribute] | None = None,
        copy_attributes: bool = True,
    ) -> TensorOp:
        """The TPU op `cls` replacing this TOP op: same name(s), the TOP op's
        attributes (unless copy_attributes=False) updated by `attrs`; result
        types default to `result_type(i)`. Inserted before the TOP op."""
        if result_types is None:
            result_types = [self.result_type(i) for i in range(len(self.op.results))]
        names = self.op.names
        values = {k: v for k, v in self.op.attributes.items() if copy_attributes}
        values.pop("name", None)
        values.pop("result_names", None)
        new = cls.make(
            operands,
            names[0],
            {**values, **(attrs or {})},
            result_types=result_types,
            result_names=names if len(self.op.results) > 1 or self.op.result_names else None,
        )
        self._insert(new)
        return new

    def _insert(self, new: Operation) -> None:
        Rewriter.insert_op(new, _before(self.op))


def producer_name(value: SSAValue) -> str:
    owner = value.owner
    if isinstance(owner, TensorOp):
        return owner.names[value.index]
    raise TpucError(f"operand {value} is not produced by a named op")


def _before(op: Operation):
    from xdsl.rewriter import InsertPoint

    return InsertPoint.before(op)


def _after(value: SSAValue):
    from xdsl.rewriter import InsertPoint

    owner = value.owner
    assert isinstance(owner, Operation)
    return InsertPoint.after(owner)
