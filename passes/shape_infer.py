"""shape-infer: give every TOP result its static shape.

The frontends build ops with `tensor<*xf32>` results and call
`infer_op_shapes` (tpuc.dialects.top.shape_infer) on each op as they go;
the pass does the same over a whole module (e.g. after an edit by hand),
asking each op's class for its rule, and then brings each function's type
in line with what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass

from tpuc.dialects.top.shape_infer import ShapeError, infer_op_shapes, set_type, shape_rule_of

__all__ = ["ShapeError", "ShapeInferPass", "infer_op_shapes", "set_type", "shape_rule_of"]


def infer_function(func: FuncOp) -> None:
    """Infer every op of `func` in order, then update its function type."""
    for op in func.walk():
        infer_op_shapes(op)
    if not func.is_declaration:
        func.update_function_type()


@dataclass(frozen=True)
class ShapeInferPass(ModulePass):
    """Fill in the shape of every TOP result and each function's type."""

    name = "shape-infer"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from tpuc.base.module_state import ModuleState, require_state

        require_state(op, "shape-infer", ModuleState.TOP_F32, ModuleState.TOP_CALIBRATED)
        for func in op.walk():
            if isinstance(func, FuncOp):
                infer_function(func)
