"""What every frontend's converter shares while it fills func @main's
block: the weights it creates, unique value names and the one `top.None`
for absent operands."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import FunctionType, ModuleOp, NoneType, StringAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, Region, SSAValue

from tpuc.dialects import top
from tpuc.dialects.base import tensor_type


class ModuleBuilder:
    """The block being filled, its weights (name -> float32 array) and the
    names already taken (`names`: those of the source model to avoid)."""

    def __init__(self, names: set[str] | None = None):
        self.weights: dict[str, np.ndarray] = {}
        self.block = Block()
        self._names: set[str] = set(names or ())
        self._none: SSAValue | None = None

    def unique_name(self, base: str) -> str:
        """`base`, or `base_1`, `base_2`, … when taken; the name is then taken."""
        name, n = base, 0
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    def weight(self, base: str, array: np.ndarray) -> SSAValue:
        """A new float32 `top.Weight` named after `base`."""
        data = np.ascontiguousarray(array, dtype=np.float32)
        name = self.unique_name(base)
        self.weights[name] = data
        op = top.WeightOp.make([], name, result_types=[tensor_type(data.shape)])
        self.block.add_op(op)
        return op.results[0]

    def none(self) -> SSAValue:
        """The module's one `top.None` (an absent optional operand)."""
        if self._none is None:
            op = top.NoneOp.build(result_types=[NoneType()])
            self.block.add_op(op)
            self._none = op.results[0]
        return self._none

    def module(self, model_name: str, results: Sequence[SSAValue], platform: str) -> ModuleOp:
        """func @main returning `results`, in a TOP_F32 module of `platform`
        (ONNX, TFLITE, CAFFE) whose weight file follows TPU-MLIR's name."""
        self.block.add_op(ReturnOp(*results))
        in_types = [a.type for a in self.block.args]
        func = FuncOp(
            "main",
            FunctionType.from_lists(in_types, [r.type for r in results]),
            Region(self.block),
        )
        attributes: dict[str, Attribute] = {
            "module.name": StringAttr(model_name),
            "module.chip": StringAttr("ALL"),
            "module.state": StringAttr("TOP_F32"),
            "module.platform": StringAttr(platform),
            "module.weight_file": StringAttr(f"{model_name}_top_f32_all_origin_weight.npz"),
        }
        return ModuleOp([func], attributes=attributes, sym_name=StringAttr(model_name))
