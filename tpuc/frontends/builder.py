"""What every frontend's converter shares while it fills func @main's
block: the weights it creates, unique value names and the one `top.None`
for absent operands."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import NoneType
from xdsl.ir import Block, SSAValue

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
